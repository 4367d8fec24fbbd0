// The paper views against hand-computed values on tiny models with a flat profile (peak 1 MFLOP/s).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "policies/core/cost_views.hpp"
#include "policies/core/errors.hpp"
#include "tests/flat_profile_fixtures.hpp"

namespace lcsim {
namespace {

using testing::add_flat_memory;
using testing::single_segment;

ModelConfig tiny_model() {
  return testing::flat_tiny_model();
}

Profile flat_profile(double attention_efficiency = 0.5, double layer_overhead_us = 10) {
  Profile p = testing::flat_compute_profile(attention_efficiency, layer_overhead_us);
  add_flat_memory(p);
  for (auto op : {CollectiveOp::AllGather, CollectiveOp::ReduceScatter, CollectiveOp::AllReduce, CollectiveOp::AllToAll,
                  CollectiveOp::SendRecv}) {
    const int n = op == CollectiveOp::SendRecv ? 2 : 4;
    p.collectives.push_back(single_segment(op, LinkClass::NvLink, n, 1, 1));
    p.collectives.push_back(single_segment(op, LinkClass::InfiniBand, n, 5, 0.5));
  }
  return p;
}

ClusterSpec tiny_cluster(double memory_bytes = 1e9) {
  return testing::flat_tiny_cluster(2, 4, memory_bytes);
}

ParallelScheme skrull_scheme(int cp) {
  ParallelScheme s;
  s.cp = cp;
  s.recompute = Recompute::Selective;
  return s;
}

// ---- Skrull ----

TEST(CostViewsSkrull, FlopsFollowEquation13) {
  const auto& qwen = ModelConfig{"Qwen2.5-0.5B", 896, 24, 14, 2, 64, 4864, 151936, true};
  const CostModel cost(qwen, tiny_cluster(), flat_profile());
  const SkrullView view(cost, skrull_scheme(8), 32, Tokens{26624});
  // Per layer at S = 4096: 4 h^2 S = 13,153,337,344; 4 h h_kv S = 1,879,048,192; 6 h ffn S = 107,105,746,944;
  // 4 h S^2 = 60,129,542,144; sum 182,267,674,624, times 24 layers.
  EXPECT_DOUBLE_EQ(view.flops(4096), 4374424190976.0);
  EXPECT_DOUBLE_EQ(view.flops_sharded(4096, 8), 4374424190976.0 / 8);
  EXPECT_DOUBLE_EQ(view.volume(4096), 4096.0 * 128);

  // At the LLaMA ratio ffn = 8h/3 the MLP term is the paper's 20 h^2 S exactly.
  const ModelConfig llama_ratio{"ratio", 96, 1, 4, 4, 24, 256, 10, false};
  const CostModel llama_cost(llama_ratio, tiny_cluster(), flat_profile());
  const SkrullView llama_view(llama_cost, skrull_scheme(2), 1, Tokens{1000});
  const double h = 96, s = 1000;
  EXPECT_DOUBLE_EQ(llama_view.flops(1000), 20 * h * h * s + 4 * h * 96 * s + 4 * h * s * s);
}

TEST(CostViewsSkrull, TcompIsExactWhenTheCostModelIsLinearInEquation13Flops) {
  // With q_hidden = hidden the cost model's GEMM FLOPs equal Eq. 13's linear term; with attention efficiency
  // 7/12, (1 + 2.5) * 2 s^2 h / (7/12) = 3 * 4 h s^2, so compute time is exactly 3 * FLOPs / peak (no LM head:
  // vocab 0) plus the per-layer overhead.
  const ModelConfig model{"mha", 64, 2, 4, 4, 16, 128, 0, false};
  const CostModel cost(model, tiny_cluster(), flat_profile(7.0 / 12, 10));
  const SkrullView view(cost, skrull_scheme(4), 8, Tokens{1});
  EXPECT_NEAR(view.tcomp_fit().slope / (3 / 1e6), 1, 1e-9);
  EXPECT_NEAR(view.tcomp_fit().intercept, 2 * 10e-6, 1e-9);
  EXPECT_NEAR(view.tcomp_fit().mape, 0, 1e-9);
  EXPECT_NEAR(view.tcomp(view.flops(5000)) / (3 * view.flops(5000) / 1e6 + 20e-6), 1, 1e-9);
}

TEST(CostViewsSkrull, TcommFitsTheUlyssesAllToAlls) {
  const CostModel cost(tiny_model(), tiny_cluster(), flat_profile());
  const SkrullView view(cost, skrull_scheme(4), 8);
  // Per sharded sequence of s tokens over 4 ranks (t = s/4 each, NVLink all_to_all 1 us + size * 0.75 / 1 GB/s):
  // 2 layers x 2 directions x (2 all_to_all of t*64*2 B + 2 of t*32*2 B) = 16 us + s * 3e-9 * (64 + 32);
  // per element of Volume = s * 32: slope 9e-9.
  EXPECT_NEAR(view.tcomm_fit().slope / 9e-9, 1, 1e-3);
  EXPECT_NEAR(view.tcomm_fit().intercept / 16e-6, 1, 2e-2);  // ceil(s / 4) rounding
  EXPECT_LT(view.tcomm_fit().mape, 1e-3);
  EXPECT_EQ(view.tcomm(0), 0.0);  // nothing distributed, nothing sent
  EXPECT_GT(view.tcomm(32000), view.tcomm(3200));

  const SkrullView no_cp(cost, skrull_scheme(1), 8);
  EXPECT_EQ(no_cp.tcomm(1e6), 0.0);
}

TEST(CostViewsSkrull, BucketSizeFromTheMemoryView) {
  const CostModel cost(tiny_model(), tiny_cluster(), flat_profile());
  const SkrullView view(cost, skrull_scheme(4), 4);
  // Activations per token, selective, with the LM head: 2 * 1536 + 10 * 1000 = 13072 B.
  EXPECT_NEAR(view.memory_fit().slope, 13072, 1e-6);
  EXPECT_NEAR(view.memory_fit().intercept, 0, 1e-3);
  EXPECT_NEAR(view.memory(1000), 13072000, 1e-2);
  // (1e9 - 0.25 GiB - 201984 params * (2 + 14/4)) / 13072 = 55879.2
  EXPECT_EQ(view.bucket_size(), 55879);

  EXPECT_EQ(SkrullView(cost, skrull_scheme(4), 4, Tokens{26624}).bucket_size(), 26624);
  EXPECT_THROW(SkrullView(cost, skrull_scheme(4), 4, Tokens{0}), InputError);
  ParallelScheme pipelined = skrull_scheme(4);
  pipelined.pp = 2;
  EXPECT_THROW(SkrullView(cost, pipelined, 4), InputError);
}

TEST(CostViewsSkrull, BucketSizeGrowsWithCapacityAndShrinksWithoutRoom) {
  Tokens previous = 0;
  for (double memory : {0.5e9, 1e9, 2e9, 4e9}) {
    const CostModel cost(tiny_model(), tiny_cluster(memory), flat_profile());
    const Tokens bucket = SkrullView(cost, skrull_scheme(4), 4).bucket_size();
    EXPECT_GT(bucket, previous);
    previous = bucket;
  }
  const CostModel full(tiny_model(), tiny_cluster(0.25 * 1024 * 1024 * 1024), flat_profile());
  EXPECT_THROW(SkrullView(full, skrull_scheme(4), 4), InputError);
}

// ---- Hydraulis ----

ParallelScheme tp_pp(int tp, int pp) {
  ParallelScheme s;
  s.tp = tp;
  s.pp = pp;
  s.recompute = Recompute::Selective;
  return s;
}

TEST(CostViewsHydraulis, LatencyIsTheQuadraticOfTheStageTime) {
  // Large overhead (5 s per layer) so the constant term is well determined next to the others.
  const CostModel cost(tiny_model(), tiny_cluster(), flat_profile(0.5, 5e6));
  const HydraulisView view(cost, 8);
  const QuadraticFit single = view.latency(tp_pp(1, 1));
  // 2 layers: a = 2 * 3.5 * 2 * 64 / (1e6 * 0.5); b = 2 * 3 * 73728 / 1e6 + 3 * 2 * 64 * 1000 / 1e6 (LM head);
  // c = 2 layers * 5 s.
  EXPECT_NEAR(single.a / 1.792e-3, 1, 1e-9);
  EXPECT_NEAR(single.b / (0.442368 + 0.384), 1, 1e-9);
  EXPECT_NEAR(single.c / 10, 1, 1e-9);
  EXPECT_NEAR(single.mape, 0, 1e-9);

  // TP 2 x PP 2 on one node: one layer per stage, half the FLOPs per GPU, the TP collectives (1 us + size * 0.5 /
  // 1 GB/s, 4 per direction) and the activation send + gradient receive (1 us + l * 64 B).
  const QuadraticFit split = view.latency(tp_pp(2, 2));
  const double l = 3000;
  const double compute = 3 * l * 73728 / 2 / 1e6 + 3.5 * 2 * l * l * 64 / 2 / 0.5e6 + 5 + 3 * l * 128000 / 2 / 1e6;
  const double tp_comm = 2 * 2 * 2 * (1e-6 + l * 64 * 2 * 0.5 / 1e9);
  const double pp_comm = 2 * (1e-6 + l * 64 * 2 / 2 / 1e9);
  EXPECT_NEAR(split(l) / (compute + tp_comm + pp_comm), 1, 1e-9);
  EXPECT_THROW(view.latency(skrull_scheme(2)), InputError);
}

TEST(CostViewsHydraulis, MaxLenFromAppendixB1) {
  const CostModel cost(tiny_model(), tiny_cluster(), flat_profile());
  const HydraulisView view(cost, 8);
  const double capacity = 1e9 - 0.25 * 1024 * 1024 * 1024;
  const double model_params = tiny_model().parameters();
  // <1, 1>: 16-bit parameters and gradients of the whole model (2 B at ZeRO-2), optimizer states over all 8 GPUs
  // (14 B / 8), activations 13072 B per token.
  EXPECT_EQ(view.max_len(tp_pp(1, 1)),
            static_cast<Tokens>(std::floor((capacity - 201984.0 * 2 - model_params * 14 / 8) / 13072)));
  // <1, 2>: one layer per stage. First stage: 2 micro-batches x 1536 B; last stage: 1536 + 10000 B (logits).
  EXPECT_EQ(view.max_len(tp_pp(1, 2)),
            static_cast<Tokens>(std::floor((capacity - 100992.0 * 2 - model_params * 14 / 8) / 11536)));
  EXPECT_THROW(view.max_len(skrull_scheme(2)), InputError);
}

TEST(CostViewsHydraulis, MaxLenShrinksWithSmallerModelShards) {
  const CostModel cost(tiny_model(), tiny_cluster(), flat_profile());
  const HydraulisView view(cost, 8);
  EXPECT_LT(view.max_len(tp_pp(1, 1)), view.max_len(tp_pp(2, 1)));
  EXPECT_LT(view.max_len(tp_pp(2, 1)), view.max_len(tp_pp(4, 1)));
  EXPECT_LT(view.max_len(tp_pp(1, 1)), view.max_len(tp_pp(1, 2)));
  EXPECT_LT(view.max_len(tp_pp(2, 1)), view.max_len(tp_pp(2, 2)));
  // Optimizer states are sharded across all GPUs even when the scenario runs ZeRO-0 for other policies.
  const CostModel zero0(tiny_model(), tiny_cluster(), flat_profile(), CostModelOptions{0});
  const CostModel zero1(tiny_model(), tiny_cluster(), flat_profile(), CostModelOptions{1});
  EXPECT_EQ(HydraulisView(zero0, 8).max_len(tp_pp(1, 1)), HydraulisView(zero1, 8).max_len(tp_pp(1, 1)));
  const CostModel tiny_gpu(tiny_model(), tiny_cluster(0.25 * 1024 * 1024 * 1024 + 1e5), flat_profile());
  EXPECT_EQ(HydraulisView(tiny_gpu, 8).max_len(tp_pp(1, 1)), 0);
}

// ---- HBP ----

TEST(CostViewsHbp, StepSecondsByHand) {
  const CostModel cost(tiny_model(), tiny_cluster(), flat_profile());
  const HbpView view(cost, 8);
  // A 400-token pack over SP 4 (100 local tokens), one of 2 layers checkpointed, the rest recompute nothing.
  const double gemm = 100 * 73728 / 1e6;
  const double attention = 2.0 * 400 * 400 * 64 / 4 / 0.5e6;
  const double plain = 3 * gemm + 3.5 * attention + 10e-6;
  const double head = 3 * 100 * 128000 / 1e6;
  const double a2a = 2 * 2 * (2 * (1e-6 + 12800 * 0.75 / 1e9) + 2 * (1e-6 + 6400 * 0.75 / 1e9));
  EXPECT_NEAR(view.step_seconds(400, 4, 1), plain + (plain + gemm + attention) + head + a2a, 1e-9);
  // SP 8 spans two 4-GPU nodes: the all-to-alls go over InfiniBand (5 us, 0.5 GB/s, bus factor 7/8).
  const double ib = 2 * 2 * (2 * (5e-6 + 6400 * 0.875 / 0.5e9) + 2 * (5e-6 + 3200 * 0.875 / 0.5e9));
  const SequenceShare share{400, 8};
  ParallelScheme scheme;
  scheme.cp = 8;
  scheme.recompute = Recompute::None;
  EXPECT_NEAR(view.step_seconds(400, 8, 0), cost.compute_seconds({&share, 1}, scheme, 2, true) + ib, 1e-12);
}

TEST(CostViewsHbp, PeakBytesAndFit) {
  const CostModel cost(tiny_model(), tiny_cluster(), flat_profile());
  const HbpView view(cost, 8);
  // Static: 201984 params * (2 + 14 / 8). Per token: 1 checkpointed layer (128) + 1 plain (1920), plus the larger
  // of logits (10000) and a recomputed layer (1920 - 128); 100 local tokens.
  EXPECT_DOUBLE_EQ(view.peak_bytes(400, 4, 1), 201984 * (2 + 14.0 / 8) + (128 + 1920 + 10000) * 100.0);
  EXPECT_TRUE(view.fits(400, 4, 1));
  EXPECT_FALSE(view.fits(400000, 1, 0));
  // More checkpointed layers: less memory, more time.
  EXPECT_LT(view.peak_bytes(40000, 4, 2), view.peak_bytes(40000, 4, 0));
  EXPECT_GT(view.step_seconds(40000, 4, 2), view.step_seconds(40000, 4, 0));
  EXPECT_THROW(view.peak_bytes(400, 16, 0), std::invalid_argument);
  EXPECT_THROW(view.step_seconds(400, 4, 3), std::invalid_argument);
}

}  // namespace
}  // namespace lcsim
