#pragma once
// Hand-built cost models for the plan / estimate / validator / policy tests.
//
// tiny_cost(): a 2-layer toy model (hidden 8, 2 heads of 4, ffn 16, vocab 32) on a 1000 FLOP/s GPU with flat
// efficiency 1 and no per-layer overhead, so times are checkable by hand:
//   GEMM FLOPs per token 2 (8 (8 + 16) + 8 8 + 3 8 16) = 1280, attention FLOPs 16 s^2, head FLOPs per token 512;
//   one layer over whole sequences of s tokens: 3 (1280 T) / 1000 + 3.5 (16 s^2) / 1000 = 3.84 T + 0.056 s^2,
//   the head: 3 (512 T) / 1000 = 1.536 T (T: tokens the GPU computes).
//   All-to-all: 1 s latency + bytes (n-1)/n / 100 B/s (NvLink), 2 s + the same size term (InfiniBand).
//   All-gather, reduce-scatter, all-reduce: 0.25 s; send/recv 0.1 s (bandwidth 1e18 B/s: latency only).
//   Activations: 1 byte per hidden unit per token per layer (selective), logits 0.5 byte per vocab entry per token;
//   no static bytes, 500 bytes of GPU memory.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "model/cost_model.hpp"
#include "model/model.hpp"
#include "model/plan.hpp"
#include "model/training.hpp"

namespace lcsim::testing {

inline ModelConfig tiny_model(int layers = 2) {
  ModelConfig m;
  m.name = "tiny";
  m.hidden = 8;
  m.layers = layers;
  m.heads = 2;
  m.kv_heads = 2;
  m.head_dim = 4;
  m.ffn = 16;
  m.vocab = 32;
  return m;
}

inline Curve flat_curve(double value) {
  Curve c;
  c.x = {1.0};
  c.y = {value};
  return c;
}

inline CollectiveFit collective(CollectiveOp op, LinkClass link, double latency_us, double bus_GBps) {
  CollectiveFit fit;
  fit.op = op;
  fit.link = link;
  fit.group_size = 8;
  fit.segments = {CollectiveSegment{0, latency_us, bus_GBps}};
  return fit;
}

inline Profile tiny_profile() {
  Profile p;
  p.gpu = "toy";
  p.provenance.source = "unit test";
  p.compute.peak_tflops = 1e-9;  // 1000 FLOP/s
  p.compute.gemm_efficiency = flat_curve(1.0);
  p.compute.attention_efficiency = flat_curve(1.0);
  p.compute.attention_backward_ratio = 2.5;
  p.compute.layer_overhead_us = 0;
  p.compute.optimizer_us_per_mparam = 0;
  p.compute.hot_switch_us_per_mparam = 0;
  p.memory.activations_selective = {1, 0, 0};
  p.memory.activations_none = {2, 0, 0};
  p.memory.activations_full = {0.25, 0, 0};
  p.memory.logits_bytes_per_token_per_vocab = 0.5;
  for (auto link : {LinkClass::NvLink, LinkClass::InfiniBand}) {
    const double scale = link == LinkClass::NvLink ? 1.0 : 2.0;
    p.collectives.push_back(collective(CollectiveOp::AllToAll, link, scale * 1e6, 1e-7));
    for (auto op : {CollectiveOp::AllGather, CollectiveOp::ReduceScatter, CollectiveOp::AllReduce})
      p.collectives.push_back(collective(op, link, scale * 0.25e6, 1e9));
    p.collectives.push_back(collective(CollectiveOp::SendRecv, link, scale * 0.1e6, 1e9));
  }
  return p;
}

inline ClusterSpec tiny_cluster(int nodes, int gpus_per_node, double memory_bytes = 500) {
  ClusterSpec c;
  c.gpu.name = "toy";
  c.gpu.memory_bytes = memory_bytes;
  c.gpu.peak_bf16_tflops = 1e-9;
  c.nodes = nodes;
  c.gpus_per_node = gpus_per_node;
  return c;
}

inline CostModel tiny_cost(int nodes = 1, int gpus_per_node = 2, Profile profile = tiny_profile(),
                           double memory_bytes = 500, int layers = 2) {
  return CostModel(tiny_model(layers), tiny_cluster(nodes, gpus_per_node, memory_bytes), std::move(profile));
}

/// A plausible H100 profile (not calibrated, not for numbers): 50% flat efficiencies, NVLink 370 GB/s and
/// InfiniBand 46 GB/s bus bandwidth, Korthikanti-style activation bytes, ZeRO static bytes, 4 GiB reserve.
inline Profile plausible_profile() {
  Profile p;
  p.gpu = "H100-SXM";
  p.provenance.source = "unit test";
  p.compute.peak_tflops = 989;
  p.compute.gemm_efficiency = flat_curve(0.6);
  p.compute.attention_efficiency = flat_curve(0.5);
  p.compute.layer_overhead_us = 50;
  p.compute.optimizer_us_per_mparam = 20;
  p.compute.hot_switch_us_per_mparam = 10;
  p.memory.activations_none = {34, 0, 0};
  p.memory.activations_selective = {18, 4, 6};
  p.memory.activations_full = {2, 0, 0};
  p.memory.logits_bytes_per_token_per_vocab = 6;
  p.memory.replicated_bytes_per_param = {16, 4, 2, 0};
  p.memory.sharded_bytes_per_param = {0, 12, 14, 16};
  p.memory.reserve_bytes = 4.0 * (1 << 30);
  for (auto link : {LinkClass::NvLink, LinkClass::InfiniBand}) {
    const double bw = link == LinkClass::NvLink ? 370 : 46;
    const double latency = link == LinkClass::NvLink ? 20 : 40;
    for (auto op : {CollectiveOp::AllGather, CollectiveOp::ReduceScatter, CollectiveOp::AllReduce,
                    CollectiveOp::AllToAll, CollectiveOp::SendRecv})
      p.collectives.push_back(collective(op, link, latency, bw));
  }
  return p;
}

inline CostModel plausible_cost(const ModelConfig& model, int nodes, int gpus_per_node = 8,
                                CostModelOptions options = {}) {
  ClusterSpec c;
  c.gpu = named_gpu("H100-SXM");
  c.nodes = nodes;
  c.gpus_per_node = gpus_per_node;
  c.nvlink_GBps = 450;
  c.ib_GBps = 50;
  return CostModel(model, c, plausible_profile(), std::move(options));
}

inline Placement on_rank(std::int64_t id, Tokens tokens, int cp_rank) {
  return Placement{id, tokens, cp_rank};
}
inline Placement sharded(std::int64_t id, Tokens tokens) {
  return Placement{id, tokens, Placement::kSharded};
}

inline MicroBatch micro_batch(std::vector<Placement> placements, bool padded = false) {
  MicroBatch mb;
  mb.placements = std::move(placements);
  mb.padded = padded;
  return mb;
}

inline Replica replica(ParallelScheme scheme, std::vector<int> gpus, std::vector<MicroBatch> micro_batches,
                       bool overlap = false, int phase = 0) {
  Replica r;
  r.scheme = scheme;
  r.gpus = std::move(gpus);
  r.micro_batches = std::move(micro_batches);
  r.overlap_cp_comm = overlap;
  r.phase = phase;
  return r;
}

inline ParallelScheme scheme(int tp, int pp, int cp, Recompute recompute = Recompute::Selective) {
  ParallelScheme s;
  s.tp = tp;
  s.pp = pp;
  s.cp = cp;
  s.recompute = recompute;
  return s;
}

/// The hand-checked DACP micro-batch of estimate_test.cpp on tiny_cost(): on a CP=2 replica, sequence 1 (10 tokens)
/// local on CP rank 0 and sequence 2 (20 tokens) sharded; `overlap`: Skrull's DACP overlap.
inline IterationPlan dacp_plan(bool overlap) {
  IterationPlan plan;
  plan.replicas = {replica(scheme(1, 1, 2), {0, 1}, {micro_batch({on_rank(1, 10, 0), sharded(2, 20)})}, overlap)};
  return plan;
}

/// A global batch of sequences of these lengths, numbered from `first_id`.
inline GlobalBatch batch_of(std::int64_t first_id, const std::vector<Tokens>& tokens) {
  GlobalBatch b;
  for (std::size_t i = 0; i < tokens.size(); ++i) b.push_back({first_id + static_cast<std::int64_t>(i), tokens[i]});
  return b;
}

/// The sequences a micro-batch places, in its order.
inline std::vector<std::int64_t> ids(const MicroBatch& mb) {
  std::vector<std::int64_t> result;
  for (const auto& p : mb.placements) result.push_back(p.sequence_id);
  return result;
}

/// What `f` throws as an InputError; empty when it returns.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace lcsim::testing
