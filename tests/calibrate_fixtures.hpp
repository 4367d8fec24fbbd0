#pragma once
// Synthetic calibration measurements generated from known coefficients, so the fits can be checked for recovering
// them. Every "measured" time below is what the cost model predicts for a profile whose numbers the test chose.
#include <cmath>
#include <vector>

#include "calibrate/fit/default_profile.hpp"
#include "calibrate/fit/measurements.hpp"
#include "calibrate/measure/measurement_plan.hpp"
#include "kernels/attention_tiles.hpp"
#include "model/cost_model.hpp"

namespace lcsim::testing {

struct Truth {
  // Efficiency linear in log2(x): exact under the curve's log-x interpolation, so a right fit has ~0 error.
  double gemm_at_128 = 0.20, gemm_per_doubling = 0.06;
  double attention_at_128 = 0.10, attention_per_doubling = 0.05;
  double gemm_backward_ratio = 2.1;
  double attention_backward_ratio = 2.3;
  double layer_overhead_us = 55;
  double gemm_work_overhead = 0.15;
  ActivationCoefficients none{14, 4, 6}, selective{10, 4, 4}, full{2, 0, 0};
  double memory_intercept_bytes = 12345;  // transient of the last layer, the same at every depth
  double collective_latency_us = 20;
  double collective_bus_GBps = 300;
  double send_recv_latency_us = 8;
  double send_recv_bus_GBps = 350;
  double optimizer_us_per_mparam = 9.95;
  double optimizer_launch_us = 3;
};

inline std::vector<double> doubling(double first, double last) {
  std::vector<double> out;
  for (double x = first; x <= last; x *= 2) out.push_back(x);
  return out;
}

/// The H100 default profile with the truth's compute curves and overhead.
inline Profile truth_profile(const Truth& t) {
  Profile p = derive_default_profile(named_gpu("H100-SXM"));
  p.compute.gemm_efficiency = {doubling(128, 32768), {}, std::nullopt};
  for (double x : p.compute.gemm_efficiency.x) {
    p.compute.gemm_efficiency.y.push_back(t.gemm_at_128 + t.gemm_per_doubling * std::log2(x / 128));
  }
  p.compute.attention_efficiency = {doubling(128, 32768), {}, std::nullopt};
  for (double x : p.compute.attention_efficiency.x) {
    p.compute.attention_efficiency.y.push_back(t.attention_at_128 + t.attention_per_doubling * std::log2(x / 128));
  }
  p.compute.attention_backward_ratio = t.attention_backward_ratio;
  p.compute.layer_overhead_us = t.layer_overhead_us;
  p.compute.gemm_work_overhead = t.gemm_work_overhead;
  return p;
}

inline ClusterSpec h100_node() {
  ClusterSpec c;
  c.gpu = named_gpu("H100-SXM");
  c.nodes = 1;
  c.gpus_per_node = 8;
  return c;
}

inline double bytes_per_token(const ActivationCoefficients& c, const ModelConfig& m) {
  return c.per_hidden * m.hidden + c.per_kv_hidden * m.kv_hidden() + c.per_ffn * m.ffn;
}

/// Measurements of `model` on `gpus` H100s as the truth predicts them.
inline Measurements synthetic_measurements(const ModelConfig& model, int gpus, const Truth& t = {}) {
  Profile truth = truth_profile(t);
  // lcsim's kernels on the synthetic device's 132 SMs, as the fit describes them (kernels/attention_tiles.hpp).
  truth.compute.attention_blocks = {
      kernels::kAttentionTileRows, 132, kernels::attention_forward_blocks_per_sm(model.head_dim),
      kernels::attention_backward_blocks_per_sm(model.head_dim), AttentionBlocks::BackwardWalk::KvGroup};
  const CostModel cm(model, h100_node(), truth);
  const double peak = truth.compute.peak_tflops * 1e12;
  Measurements m;
  m.device = {"NVIDIA H100 80GB HBM3", "H100-SXM",  gpus, "9.0", 132, 85e9, "580.159.04", "13.0", "2.28.9",
              "2026-11-22T04:00:00Z",  "gpu-node-1"};
  m.model = model.name;
  m.timing = "cupti";
  m.warmup = 5;
  m.repetitions = 20;
  for (double x : doubling(128, 32768)) {
    const double fwd = x * cm.gemm_flops_per_token() / (truth.compute.gemm_efficiency.at(x) * peak);
    const double bwd = t.gemm_backward_ratio * fwd;
    m.gemm.push_back({static_cast<Tokens>(x), {fwd, fwd * 1.1, 4}, KernelTiming{bwd, bwd * 1.1, 8}});
  }
  for (double s : doubling(128, 32768)) {
    const int seqs = std::max(1, static_cast<int>(32768 / s));
    const double fwd =
        seqs * cm.attention_flops(static_cast<Tokens>(s)) / (truth.compute.attention_efficiency.at(s) * peak);
    const double bwd = t.attention_backward_ratio * fwd;
    m.attention.push_back({static_cast<int>(s), seqs, {fwd, fwd * 1.05, 1}, KernelTiming{bwd, bwd * 1.05, 3}});
  }
  for (int budget : {4096, 16384}) {
    for (const auto& batch : layer_compositions(budget, 7)) {
      std::vector<SequenceShare> work;
      for (int s : batch) work.push_back({s, 1});
      for (auto r : {Recompute::None, Recompute::Selective, Recompute::Full}) {
        m.layers.push_back({batch, r, cm.layer_seconds(work, 1, r, r == Recompute::Full, LayerGrad::Full)});
      }
    }
  }
  for (const auto& shape : named_models()) {
    for (auto r : {Recompute::None, Recompute::Selective, Recompute::Full}) {
      const auto& c = r == Recompute::None ? t.none : r == Recompute::Selective ? t.selective : t.full;
      MemoryMeasurement probe{shape.name, shape.hidden, shape.kv_hidden(), shape.ffn, 2048, r, {1, 2, 3}, {}};
      for (int layers : probe.layers) {
        probe.peak_bytes.push_back(2048.0 * layers * bytes_per_token(c, shape) + t.memory_intercept_bytes);
      }
      m.memory.push_back(probe);
    }
  }
  if (gpus >= 2) {
    for (int n : collective_groups(gpus)) {
      for (auto op :
           {CollectiveOp::AllGather, CollectiveOp::ReduceScatter, CollectiveOp::AllReduce, CollectiveOp::AllToAll}) {
        CollectiveMeasurement c{op, n, {}};
        for (double bytes : collective_sizes(false)) {
          c.samples.push_back(
              {bytes, t.collective_latency_us * 1e-6 + bytes * bus_factor(op, n) / (t.collective_bus_GBps * 1e9)});
        }
        m.collectives.push_back(c);
      }
      if (n == 2) {
        CollectiveMeasurement c{CollectiveOp::SendRecv, 2, {}};
        for (double bytes : collective_sizes(false)) {
          c.samples.push_back({bytes, t.send_recv_latency_us * 1e-6 + bytes / (t.send_recv_bus_GBps * 1e9)});
        }
        m.collectives.push_back(c);
      }
      for (int tokens : {4096, 16384, 65536}) {
        const int per_gpu = tokens / n;
        const auto seconds = [&](double bytes) {
          return t.collective_latency_us * 1e-6 +
                 bytes * bus_factor(CollectiveOp::AllToAll, n) / (t.collective_bus_GBps * 1e9);
        };
        const double q = 2.0 * per_gpu * model.q_hidden();
        const double kv = 2.0 * per_gpu * model.kv_hidden();
        m.ulysses.push_back({n, per_gpu, 2 * seconds(q) + 2 * seconds(kv)});
      }
    }
  }
  for (double p : {1e6, 4e6, 1.6e7, 6.4e7, 2.56e8}) {
    m.optimizer.push_back({p, t.optimizer_launch_us * 1e-6 + p / 1e6 * t.optimizer_us_per_mparam * 1e-6});
  }
  return m;
}

}  // namespace lcsim::testing
