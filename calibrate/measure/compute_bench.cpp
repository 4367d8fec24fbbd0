#include "calibrate/measure/compute_bench.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <memory>
#include <ostream>

#include "kernels/attention.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/layer_ops.hpp"
#include "kernels/layer_proxy.hpp"

namespace lcsim::gpu {
namespace {

using kernels::bf16;
using kernels::check_cuda;
using kernels::DeviceBuffer;

constexpr double kFlashBackwardFlops = 2.5;  // FlashAttention's convention: backward FLOPs = 2.5 x forward

struct Randomizer {
  const GpuContext& gpu;
  std::uint64_t seed;
  DeviceBuffer bf16_buffer(std::int64_t elements, float scale) {
    DeviceBuffer b = gpu.arena->allocate(static_cast<std::size_t>(elements) * sizeof(bf16));
    kernels::fill_uniform(b.as<bf16>(), elements, seed++, scale, gpu.stream);
    return b;
  }
  DeviceBuffer f32_buffer(std::int64_t elements, float scale) {
    DeviceBuffer b = gpu.arena->allocate(static_cast<std::size_t>(elements) * sizeof(float));
    kernels::fill_uniform(b.as<float>(), elements, seed++, scale, gpu.stream);
    return b;
  }
};

std::int64_t n(Tokens rows, std::int64_t width) {
  return static_cast<std::int64_t>(rows) * width;
}

void finish(const GpuContext& gpu) {
  check_cuda(cudaStreamSynchronize(gpu.stream), "sweep");
  gpu.arena->release_cached();
}

std::ostream& us(std::ostream& out, double seconds, int width = 11) {
  return out << std::setw(width) << std::fixed << std::setprecision(1) << seconds * 1e6 << std::defaultfloat;
}

}  // namespace

double attention_forward_flops(const ModelConfig& model, int seq_len, int sequences) {
  return sequences * 2.0 * seq_len * static_cast<double>(seq_len) * model.q_hidden();
}

std::vector<GemmMeasurement> measure_gemms(const GpuContext& gpu, const ModelConfig& model,
                                           const std::vector<Tokens>& tokens, std::ostream& table) {
  const int h = model.hidden, q = model.q_hidden(), f = model.ffn;
  const int qkv = q + 2 * model.kv_hidden();
  const double flops_per_token = 2.0 * (static_cast<double>(h) * qkv + static_cast<double>(q) * h + 3.0 * h * f);
  const double weight_bytes = 2.0 * (static_cast<double>(qkv) * h + static_cast<double>(h) * q + 3.0 * f * h);
  const int sets = rotation_sets(weight_bytes, gpu.l2_bytes);
  Randomizer rnd{gpu, gpu.seed};
  struct Weights {
    DeviceBuffer qkv, o, gu, down, g_qkv, g_o, g_gu, g_down;
  };
  std::vector<Weights> w(static_cast<std::size_t>(sets));
  for (auto& s : w) {
    s = {rnd.bf16_buffer(n(qkv, h), 0.03f), rnd.bf16_buffer(n(h, q), 0.03f), rnd.bf16_buffer(n(2 * f, h), 0.03f),
         rnd.bf16_buffer(n(h, f), 0.03f),   rnd.bf16_buffer(n(qkv, h), 0.f), rnd.bf16_buffer(n(h, q), 0.f),
         rnd.bf16_buffer(n(2 * f, h), 0.f), rnd.bf16_buffer(n(h, f), 0.f)};
  }
  table << "# layer GEMMs of " << model.name << " (QKV, O, gate+up, down), " << sets
        << " weight set(s) rotated; backward = dgrad + wgrad\n"
        << "#" << std::setw(9) << "tokens" << std::setw(11) << "fwd(us)" << std::setw(10) << "TFLOP/s" << std::setw(11)
        << "bwd(us)" << std::setw(9) << "bwd/fwd" << std::setw(11) << "event(us)" << std::setw(9) << "kernels"
        << "\n";
  std::vector<GemmMeasurement> out;
  for (Tokens t : tokens) {
    const int rows = static_cast<int>(t);
    DeviceBuffer n1 = rnd.bf16_buffer(n(t, h), 1.f), attn = rnd.bf16_buffer(n(t, q), 1.f);
    DeviceBuffer n2 = rnd.bf16_buffer(n(t, h), 1.f), act = rnd.bf16_buffer(n(t, f), 1.f);
    DeviceBuffer y_qkv = rnd.bf16_buffer(n(t, qkv), 0.f), y_o = rnd.bf16_buffer(n(t, h), 0.f);
    DeviceBuffer y_gu = rnd.bf16_buffer(n(t, 2 * f), 0.f), y_down = rnd.bf16_buffer(n(t, h), 0.f);
    DeviceBuffer d_qkv = rnd.bf16_buffer(n(t, qkv), 1.f), d_o = rnd.bf16_buffer(n(t, h), 1.f);
    DeviceBuffer d_gu = rnd.bf16_buffer(n(t, 2 * f), 1.f), d_down = rnd.bf16_buffer(n(t, h), 1.f);
    DeviceBuffer d_n1 = rnd.bf16_buffer(n(t, h), 0.f), d_attn = rnd.bf16_buffer(n(t, q), 0.f);
    DeviceBuffer d_n2 = rnd.bf16_buffer(n(t, h), 0.f), d_act = rnd.bf16_buffer(n(t, f), 0.f);
    auto& g = *gpu.gemm;
    const auto forward = [&](int rep) {
      const Weights& s = w[static_cast<std::size_t>(rep % sets)];
      g.gemm(rows, qkv, h, n1.as<bf16>(), false, s.qkv.as<bf16>(), true, y_qkv.as<bf16>());
      g.gemm(rows, h, q, attn.as<bf16>(), false, s.o.as<bf16>(), true, y_o.as<bf16>());
      g.gemm(rows, 2 * f, h, n2.as<bf16>(), false, s.gu.as<bf16>(), true, y_gu.as<bf16>());
      g.gemm(rows, h, f, act.as<bf16>(), false, s.down.as<bf16>(), true, y_down.as<bf16>());
    };
    const auto backward = [&](int rep) {
      const Weights& s = w[static_cast<std::size_t>(rep % sets)];
      g.gemm(rows, h, qkv, d_qkv.as<bf16>(), false, s.qkv.as<bf16>(), false, d_n1.as<bf16>());
      g.gemm(qkv, h, rows, d_qkv.as<bf16>(), true, n1.as<bf16>(), false, s.g_qkv.as<bf16>(), 1.f);
      g.gemm(rows, q, h, d_o.as<bf16>(), false, s.o.as<bf16>(), false, d_attn.as<bf16>());
      g.gemm(h, q, rows, d_o.as<bf16>(), true, attn.as<bf16>(), false, s.g_o.as<bf16>(), 1.f);
      g.gemm(rows, h, 2 * f, d_gu.as<bf16>(), false, s.gu.as<bf16>(), false, d_n2.as<bf16>());
      g.gemm(2 * f, h, rows, d_gu.as<bf16>(), true, n2.as<bf16>(), false, s.g_gu.as<bf16>(), 1.f);
      g.gemm(rows, f, h, d_down.as<bf16>(), false, s.down.as<bf16>(), false, d_act.as<bf16>());
      g.gemm(h, f, rows, d_down.as<bf16>(), true, act.as<bf16>(), false, s.g_down.as<bf16>(), 1.f);
    };
    const std::string what = "GEMMs at " + std::to_string(t) + " tokens";
    GemmMeasurement m{t, gpu.timer->measure(what + " forward", forward, gpu.warmup, gpu.repetitions),
                      gpu.timer->measure(what + " backward", backward, gpu.warmup, gpu.repetitions)};
    table << std::setw(10) << t;
    us(table, m.forward.kernel_seconds) << std::setw(10) << std::fixed << std::setprecision(1)
                                        << flops_per_token * static_cast<double>(t) / m.forward.kernel_seconds / 1e12;
    us(table, m.backward->kernel_seconds)
        << std::setw(9) << std::setprecision(2) << m.backward->kernel_seconds / m.forward.kernel_seconds;
    us(table, m.forward.event_seconds) << std::setw(9) << m.forward.kernels << "\n" << std::defaultfloat;
    out.push_back(m);
  }
  w.clear();
  finish(gpu);
  return out;
}

std::vector<AttentionMeasurement> measure_attention(const GpuContext& gpu, const ModelConfig& model,
                                                    const std::vector<AttentionPoint>& points, std::ostream& table) {
  const int q = model.q_hidden(), kv = model.kv_hidden();
  table << "# varlen causal attention of " << model.name << " (" << model.heads << " heads, " << model.kv_heads
        << " KV heads, head_dim " << model.head_dim << "), packed sequences; TFLOP/s: 2 s^2 q_hidden forward, "
        << kFlashBackwardFlops << "x backward\n"
        << "#" << std::setw(8) << "seq_len" << std::setw(6) << "seqs" << std::setw(11) << "fwd(us)" << std::setw(10)
        << "TFLOP/s" << std::setw(11) << "bwd(us)" << std::setw(10) << "TFLOP/s" << std::setw(9) << "bwd/fwd"
        << std::setw(11) << "event(us)"
        << "\n";
  std::vector<AttentionMeasurement> out;
  Randomizer rnd{gpu, gpu.seed + 1000};
  for (const auto& p : points) {
    const auto tokens = static_cast<Tokens>(p.seq_len) * p.sequences;
    std::vector<int> cu(static_cast<std::size_t>(p.sequences) + 1);
    for (std::size_t i = 0; i < cu.size(); ++i) cu[i] = static_cast<int>(i) * p.seq_len;
    DeviceBuffer cu_seqlens = gpu.arena->allocate(cu.size() * sizeof(int));
    // The stream does not synchronise with the legacy default stream: copy on it, and wait for the host vector.
    check_cuda(
        cudaMemcpyAsync(cu_seqlens.as<void>(), cu.data(), cu.size() * sizeof(int), cudaMemcpyHostToDevice, gpu.stream),
        "attention sweep: cu_seqlens");
    check_cuda(cudaStreamSynchronize(gpu.stream), "attention sweep: cu_seqlens");
    const int sets = rotation_sets(2.0 * static_cast<double>(n(tokens, q + 2 * kv)), gpu.l2_bytes);
    struct Inputs {
      DeviceBuffer q, k, v, out, lse, dout, dq, dk, dv;
    };
    std::vector<Inputs> in;
    for (int s = 0; s < sets; ++s) {
      in.push_back({rnd.bf16_buffer(n(tokens, q), 1.f), rnd.bf16_buffer(n(tokens, kv), 1.f),
                    rnd.bf16_buffer(n(tokens, kv), 1.f), rnd.bf16_buffer(n(tokens, q), 0.f),
                    rnd.f32_buffer(n(tokens, model.heads), 0.f), rnd.bf16_buffer(n(tokens, q), 1.f),
                    rnd.bf16_buffer(n(tokens, q), 0.f), rnd.bf16_buffer(n(tokens, kv), 0.f),
                    rnd.bf16_buffer(n(tokens, kv), 0.f)});
    }
    const kernels::VarlenLayout layout{cu_seqlens.as<int>(), p.sequences, static_cast<int>(tokens), p.seq_len};
    const kernels::AttentionDims dims{model.heads, model.kv_heads, model.head_dim};
    DeviceBuffer workspace = gpu.arena->allocate(kernels::attention_backward_workspace_bytes(layout, dims));
    const float scale = 1.f / std::sqrt(static_cast<float>(model.head_dim));
    const auto forward_args = [&](int rep) {
      Inputs& s = in[static_cast<std::size_t>(rep % sets)];
      kernels::AttentionForwardArgs a;
      a.layout = layout;
      a.dims = dims;
      a.q = {s.q.as<bf16>(), q};
      a.k = {s.k.as<bf16>(), kv};
      a.v = {s.v.as<bf16>(), kv};
      a.out = {s.out.as<bf16>(), q};
      a.lse = s.lse.as<float>();
      a.softmax_scale = scale;
      return a;
    };
    const auto forward = [&](int rep) { kernels::attention_forward(forward_args(rep), gpu.stream); };
    // The backward needs the forward's output and lse: compute them once for every set.
    for (int s = 0; s < sets; ++s) forward(s);
    const auto backward = [&](int rep) {
      Inputs& s = in[static_cast<std::size_t>(rep % sets)];
      kernels::AttentionBackwardArgs a;
      a.layout = layout;
      a.dims = dims;
      a.q = {s.q.as<bf16>(), q};
      a.k = {s.k.as<bf16>(), kv};
      a.v = {s.v.as<bf16>(), kv};
      a.out = {s.out.as<bf16>(), q};
      a.dout = {s.dout.as<bf16>(), q};
      a.lse = s.lse.as<float>();
      a.dq = {s.dq.as<bf16>(), q};
      a.dk = {s.dk.as<bf16>(), kv};
      a.dv = {s.dv.as<bf16>(), kv};
      a.softmax_scale = scale;
      kernels::attention_backward(a, workspace.as<void>(), gpu.stream);
    };
    const std::string what = "attention at " + std::to_string(p.seq_len) + " x " + std::to_string(p.sequences);
    AttentionMeasurement m{p.seq_len, p.sequences,
                           gpu.timer->measure(what + " forward", forward, gpu.warmup, gpu.repetitions),
                           gpu.timer->measure(what + " backward", backward, gpu.warmup, gpu.repetitions)};
    const double flops = attention_forward_flops(model, p.seq_len, p.sequences);
    table << std::setw(9) << p.seq_len << std::setw(6) << p.sequences;
    us(table, m.forward.kernel_seconds) << std::setw(10) << std::fixed << std::setprecision(1)
                                        << flops / m.forward.kernel_seconds / 1e12;
    us(table, m.backward->kernel_seconds)
        << std::setw(10) << std::fixed << std::setprecision(1)
        << kFlashBackwardFlops * flops / m.backward->kernel_seconds / 1e12 << std::setw(9) << std::setprecision(2)
        << m.backward->kernel_seconds / m.forward.kernel_seconds;
    us(table, m.forward.event_seconds) << "\n" << std::defaultfloat;
    out.push_back(m);
    in.clear();
    workspace.reset();
    cu_seqlens.reset();
    finish(gpu);
  }
  return out;
}

std::vector<LayerMeasurement> measure_layers(const GpuContext& gpu, const ModelConfig& model,
                                             const std::vector<std::vector<int>>& batches,
                                             const std::vector<Recompute>& modes, std::ostream& table) {
  const int sets = rotation_sets(4.0 * model.layer_parameters(), gpu.l2_bytes);
  std::vector<std::unique_ptr<kernels::LayerProxy>> proxies;
  for (int s = 0; s < sets; ++s) {
    proxies.push_back(std::make_unique<kernels::LayerProxy>(model, *gpu.arena, *gpu.gemm, gpu.seed + 2000 + 100 * s));
  }
  table << "# layer proxy of " << model.name << ": one layer forward + backward (CUDA events), " << sets
        << " weight set(s) rotated\n"
        << "#" << std::setw(7) << "tokens" << std::setw(6) << "seqs" << std::setw(9) << "longest" << std::setw(11)
        << "recompute" << std::setw(12) << "time(ms)"
        << "\n";
  std::vector<LayerMeasurement> out;
  for (const auto& batch : batches) {
    for (auto& proxy : proxies) proxy->set_batch(batch);
    const int tokens = proxies.front()->tokens();
    for (auto mode : modes) {
      const double seconds = gpu.timer->measure_events(
          [&](int rep) { proxies[static_cast<std::size_t>(rep % sets)]->run(1, mode); }, gpu.warmup, gpu.repetitions);
      table << std::setw(8) << tokens << std::setw(6) << batch.size() << std::setw(9)
            << *std::max_element(batch.begin(), batch.end()) << std::setw(11) << to_string(mode) << std::setw(12)
            << std::fixed << std::setprecision(3) << seconds * 1e3 << "\n"
            << std::defaultfloat;
      out.push_back({batch, mode, seconds});
    }
  }
  proxies.clear();
  finish(gpu);
  return out;
}

std::vector<MemoryMeasurement> measure_memory(const GpuContext& gpu, const std::vector<MemoryProbe>& probes,
                                              std::ostream& table) {
  table << "# activation memory: arena high-water mark of stacked layer proxies, forward + backward\n"
        << "#" << std::setw(13) << "model" << std::setw(8) << "tokens" << std::setw(11) << "recompute" << std::setw(8)
        << "layers" << std::setw(12) << "peak(MiB)" << std::setw(16) << "B/token/layer"
        << "\n";
  std::vector<MemoryMeasurement> out;
  for (const auto& probe : probes) {
    MemoryMeasurement m;
    m.model = probe.model.name;
    m.hidden = probe.model.hidden;
    m.kv_hidden = probe.model.kv_hidden();
    m.ffn = probe.model.ffn;
    m.tokens = probe.tokens;
    m.recompute = probe.recompute;
    {
      kernels::LayerProxy proxy(probe.model, *gpu.arena, *gpu.gemm, gpu.seed + 3000);
      const std::vector<int> batch = {probe.tokens};
      proxy.set_batch(batch);
      for (int layers : probe.layers) {
        proxy.clear_input_grad();
        check_cuda(cudaStreamSynchronize(gpu.stream), "memory probe");
        gpu.arena->reset_peak();
        const std::size_t before = gpu.arena->tracker().live_bytes();
        proxy.run(layers, probe.recompute);
        check_cuda(cudaStreamSynchronize(gpu.stream), "memory probe");
        const double peak = static_cast<double>(gpu.arena->tracker().peak_bytes() - before);
        m.layers.push_back(layers);
        m.peak_bytes.push_back(peak);
        table << std::setw(14) << m.model << std::setw(8) << m.tokens << std::setw(11) << to_string(m.recompute)
              << std::setw(8) << layers << std::setw(12) << std::fixed << std::setprecision(1) << peak / (1 << 20)
              << std::setw(16) << std::setprecision(1)
              << (m.peak_bytes.size() > 1 ? (peak - m.peak_bytes[m.peak_bytes.size() - 2]) /
                                                (layers - m.layers[m.layers.size() - 2]) / m.tokens
                                          : 0.0)
              << "\n"
              << std::defaultfloat;
      }
    }
    out.push_back(m);
    finish(gpu);
  }
  return out;
}

std::vector<OptimizerMeasurement> measure_optimizer(const GpuContext& gpu, const std::vector<double>& parameters,
                                                    std::ostream& table) {
  table << "# AdamW step (FP32 master, moments, gradient; BF16 parameter copy)\n"
        << "#" << std::setw(13) << "parameters" << std::setw(11) << "time(us)" << std::setw(13) << "us/Mparam"
        << "\n";
  std::vector<OptimizerMeasurement> out;
  Randomizer rnd{gpu, gpu.seed + 4000};
  for (double p : parameters) {
    const auto count = static_cast<std::int64_t>(p);
    const int sets = rotation_sets(18.0 * p, gpu.l2_bytes);
    struct State {
      DeviceBuffer master, m, v, grad, param;
    };
    std::vector<State> states;
    for (int s = 0; s < sets; ++s) {
      states.push_back({rnd.f32_buffer(count, 1.f), rnd.f32_buffer(count, 1e-3f), rnd.f32_buffer(count, 1e-6f),
                        rnd.f32_buffer(count, 1e-3f), rnd.bf16_buffer(count, 1.f)});
    }
    const kernels::AdamW opt;
    const KernelTiming t = gpu.timer->measure(
        "AdamW on " + std::to_string(count) + " parameters",
        [&](int rep) {
          State& s = states[static_cast<std::size_t>(rep % sets)];
          kernels::adamw_step(s.master.as<float>(), s.m.as<float>(), s.v.as<float>(), s.grad.as<float>(),
                              s.param.as<bf16>(), count, opt, gpu.stream);
        },
        gpu.warmup, gpu.repetitions);
    table << std::setw(14) << count;
    us(table, t.kernel_seconds) << std::setw(13) << std::fixed << std::setprecision(2)
                                << t.kernel_seconds * 1e6 / (p / 1e6) << "\n"
                                << std::defaultfloat;
    out.push_back({p, t.kernel_seconds});
    states.clear();
    finish(gpu);
  }
  return out;
}

}  // namespace lcsim::gpu
