#pragma once
// The flat profile of the cost-model tests (cost_model_test, cost_model_ring_test, the cost-view tests): a GPU of
// 1e6 FLOP/s, GEMM efficiency 1, a flat attention efficiency, backward attention 2.5x the forward, so every time
// is checkable by hand on a tiny model. Each test adds the memory figures and collectives it needs.
#include <optional>

#include "model/cost_model.hpp"
#include "model/model.hpp"

namespace lcsim::testing {

/// hidden 64, 2 layers, 4 heads of 16 (q_hidden 64), 2 KV heads (kv_hidden 32), ffn 128, vocab 1000, untied.
inline ModelConfig flat_tiny_model() {
  return ModelConfig{"tiny", 64, 2, 4, 2, 16, 128, 1000, false};
}

using lcsim::single_segment;  // model/profile.hpp

/// Compute figures only: peak 1e-6 TFLOP/s, GEMM efficiency 1, attention `attention_efficiency`, backward ratio
/// 2.5, `layer_overhead_us` per layer.
inline Profile flat_compute_profile(double attention_efficiency = 0.5, double layer_overhead_us = 10) {
  Profile p;
  p.gpu = "TestGPU";
  p.provenance.source = "unit test";
  p.compute.peak_tflops = 1e-6;  // 1e6 FLOP/s
  p.compute.gemm_efficiency = Curve{{1}, {1.0}, std::nullopt};
  p.compute.attention_efficiency = Curve{{1}, {attention_efficiency}, std::nullopt};
  p.compute.attention_backward_ratio = 2.5;
  p.compute.layer_overhead_us = layer_overhead_us;
  return p;
}

/// Activation bytes per token per layer (none / selective / full), logits, ZeRO bytes per parameter, 0.25 GiB
/// reserve.
inline void add_flat_memory(Profile& p) {
  p.memory.activations_none = {12, 4, 8};
  p.memory.activations_selective = {10, 4, 6};
  p.memory.activations_full = {2, 0, 0};
  p.memory.logits_bytes_per_token_per_vocab = 10;
  p.memory.replicated_bytes_per_param = {16, 4, 2, 0};
  p.memory.sharded_bytes_per_param = {0, 12, 14, 16};
  p.memory.reserve_bytes = 0.25 * 1024 * 1024 * 1024;
}

/// nodes x gpus_per_node GPUs of `memory_bytes`, 1e-6 TFLOP/s and `hbm_TBps` (default 0: no element-wise traffic
/// term, so that the by-hand layer times are GEMMs, attention and overheads alone).
inline ClusterSpec flat_tiny_cluster(int nodes, int gpus_per_node, double memory_bytes = 1e9, double hbm_TBps = 0) {
  ClusterSpec c;
  c.gpu = GpuKind{"TestGPU", memory_bytes, 1e-6, hbm_TBps, 1};
  c.nodes = nodes;
  c.gpus_per_node = gpus_per_node;
  return c;
}

}  // namespace lcsim::testing
