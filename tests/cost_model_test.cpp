// Hand-computed expectations on a tiny model and a flat profile (peak 1 MFLOP/s so times are readable).
#include <gtest/gtest.h>

#include <limits>

#include "base/errors.hpp"
#include "model/cost_model.hpp"
#include "tests/flat_profile_fixtures.hpp"

namespace lcsim {
namespace cost_model_test {

using testing::add_flat_memory;
using testing::flat_compute_profile;
using testing::single_segment;

ModelConfig tiny_model() {
  return testing::flat_tiny_model();
}

Profile flat_profile() {
  Profile p = flat_compute_profile();
  p.compute.optimizer_us_per_mparam = 10;
  add_flat_memory(p);
  for (auto op : {CollectiveOp::AllGather, CollectiveOp::ReduceScatter, CollectiveOp::AllReduce, CollectiveOp::AllToAll,
                  CollectiveOp::SendRecv}) {
    p.collectives.push_back(single_segment(op, LinkClass::NvLink, op == CollectiveOp::SendRecv ? 2 : 4, 1, 1));
    p.collectives.push_back(single_segment(op, LinkClass::InfiniBand, op == CollectiveOp::SendRecv ? 2 : 16, 5, 0.5));
  }
  return p;
}

ClusterSpec tiny_cluster() {
  return testing::flat_tiny_cluster(2, 4);
}

CostModel tiny_cost(int zero_stage = 2) {
  return CostModel(tiny_model(), tiny_cluster(), flat_profile(), CostModelOptions{.zero_stage = zero_stage});
}

TEST(CostModelFlops, CountsGemmAttentionAndHead) {
  const CostModel cost = tiny_cost();
  // 2 * (64*(64+2*32) + 64*64 + 3*64*128) = 2 * 36864
  EXPECT_DOUBLE_EQ(cost.gemm_flops_per_token(), 73728);
  EXPECT_DOUBLE_EQ(cost.attention_flops(100), 2.0 * 100 * 100 * 64);  // causal: 4 s^2 q / 2
  EXPECT_DOUBLE_EQ(cost.head_flops_per_token(), 2.0 * 64 * 1000);
}

TEST(CostModelTime, LayerSecondsByHand) {
  const CostModel cost = tiny_cost();
  const std::vector<SequenceShare> one{{100, 1}};
  // GEMM forward 100 * 73728 / 1e6 = 7.3728 s; attention forward 1.28e6 / (1e6 * 0.5) = 2.56 s.
  const double plain = 3 * 7.3728 + 3.5 * 2.56 + 10e-6;
  EXPECT_NEAR(cost.layer_seconds(one, 1, Recompute::None, false, LayerGrad::Full), plain, 1e-9);
  // Selective recomputation costs no time.
  EXPECT_NEAR(cost.layer_seconds(one, 1, Recompute::Selective, false, LayerGrad::Full), plain, 1e-9);
  EXPECT_NEAR(cost.layer_seconds(one, 1, Recompute::None, true, LayerGrad::Full), plain + 7.3728 + 2.56, 1e-9);
  EXPECT_NEAR(cost.layer_seconds(one, 1, Recompute::Full, false, LayerGrad::Full), plain + 7.3728 + 2.56, 1e-9);
  EXPECT_EQ(cost.layer_seconds({}, 1, Recompute::None, false, LayerGrad::Full), 0.0);
}

// A framework's CPU floor (docs/calibration.md): a trained layer costs max(its GPU time, layer_issue_us), the
// optimizer step max(its GPU time, step_issue_us); a profile without them (every shipped one) is unchanged.
TEST(CostModelTime, TheCpuFloorBoundsShortLayersAndTheOptimizerStep) {
  Profile p = flat_profile();
  const std::vector<SequenceShare> short_one{{10, 1}}, long_one{{100, 1}};
  const double short_gpu = tiny_cost().layer_seconds(short_one, 1, Recompute::None, false, LayerGrad::Full);
  const double long_gpu = tiny_cost().layer_seconds(long_one, 1, Recompute::None, false, LayerGrad::Full);
  const double optimizer_gpu = tiny_cost().optimizer_seconds(ParallelScheme{}, 1, 0);
  ASSERT_LT(short_gpu, 5.0);
  ASSERT_GT(long_gpu, 5.0);
  p.compute.layer_issue_us = 5e6;  // 5 s: between the two layers' GPU times
  p.compute.step_issue_us = optimizer_gpu * 2e6;
  const CostModel cost(tiny_model(), tiny_cluster(), p, CostModelOptions{.zero_stage = 2});
  EXPECT_DOUBLE_EQ(cost.layer_seconds(short_one, 1, Recompute::None, false, LayerGrad::Full), 5.0);
  EXPECT_DOUBLE_EQ(cost.layer_seconds(long_one, 1, Recompute::None, false, LayerGrad::Full), long_gpu);
  // A micro-batch of 4 layers: 4 floors, whatever the scheme sums them through.
  ParallelScheme scheme;
  EXPECT_NEAR(cost.compute_seconds(short_one, scheme, 4, false), 4 * 5.0, 1e-9);
  EXPECT_DOUBLE_EQ(cost.optimizer_seconds(scheme, 1, 0), 2 * optimizer_gpu);
  EXPECT_EQ(cost.layer_seconds({}, 1, Recompute::None, false, LayerGrad::Full), 0.0);  // no work, no issuing
}

TEST(CostModelTime, ElementWiseShareScalesTheGemmPassesOnly) {
  Profile p = flat_profile();
  p.compute.gemm_work_overhead = 0.25;
  const CostModel cost(tiny_model(), tiny_cluster(), p);
  const std::vector<SequenceShare> one{{100, 1}};
  // GEMM forward 7.3728 s, attention forward 2.56 s: the share grows with the rows the GEMMs see, not with
  // attention's s^2, whose kernels the attention sweep times by themselves.
  const double work = 3 * 7.3728 + 3.5 * 2.56;
  EXPECT_NEAR(cost.layer_seconds(one, 1, Recompute::None, false, LayerGrad::Full), work + 0.25 * 3 * 7.3728 + 10e-6,
              1e-9);
  // A recomputed forward's GEMMs are GEMM passes too.
  EXPECT_NEAR(cost.layer_seconds(one, 1, Recompute::Full, false, LayerGrad::Full),
              work + 7.3728 + 2.56 + 0.25 * 4 * 7.3728 + 10e-6, 1e-9);
  double gemm = 0;
  EXPECT_NEAR(cost.layer_work_seconds(one, 1, Recompute::Full, false, LayerGrad::Full, &gemm), work + 7.3728 + 2.56,
              1e-9);
  EXPECT_NEAR(gemm, 4 * 7.3728, 1e-9);
  // The forward pass carries its GEMMs' share and its part of the fixed cost: forward + k G + fixed forward / work.
  ParallelScheme scheme;
  const double forward = 7.3728 + 2.56;
  EXPECT_NEAR(cost.forward_seconds(one, scheme, 1, false), forward + 0.25 * 7.3728 + 10e-6 * forward / work, 1e-9);
}

TEST(CostModelTime, Fp8PricesTheLayerGemmsAtTheProfilesSpeedupAndNothingElse) {
  Profile p = flat_profile();
  p.compute.gemm_work_overhead = 0.25;
  const std::vector<SequenceShare> one{{100, 1}};
  // A profile that prices no FP8 GEMM refuses an FP8 run instead of running it as BF16.
  EXPECT_THROW(CostModel(tiny_model(), tiny_cluster(), p, CostModelOptions{.precision = Precision::Fp8}), InputError);
  p.compute.fp8_gemm_speedup = 2.0;
  const CostModel bf16(tiny_model(), tiny_cluster(), p);
  const CostModel fp8(tiny_model(), tiny_cluster(), p, CostModelOptions{.precision = Precision::Fp8});
  // GEMM passes at half the time; attention, the element-wise share (it follows the rows, not the format) and the
  // fixed cost as in BF16.
  const double expected = 3 * 7.3728 / 2 + 3.5 * 2.56 + 0.25 * 3 * 7.3728 + 10e-6;
  EXPECT_NEAR(fp8.layer_seconds(one, 1, Recompute::None, false, LayerGrad::Full), expected, 1e-9);
  EXPECT_NEAR(bf16.layer_seconds(one, 1, Recompute::None, false, LayerGrad::Full),
              3 * 7.3728 + 3.5 * 2.56 + 0.25 * 3 * 7.3728 + 10e-6, 1e-9);
  EXPECT_EQ(to_string(Precision::Fp8), "fp8");
}

TEST(CostModelTime, EagerElementwiseKernelsMoveEachOpsTensorsThroughHbm) {
  // h 64, q 64, kv 32 (GQA: K and V repeated to every query head), f 128. Eager adds, forward, 64 h (two FP32
  // RMSNorms) + 20 q + 16 kv (rotary through FP32 complex numbers, the contiguous attention output) + 4 f (silu and
  // product) + 4 (q + kv) (the repeat) = 4096 + 1280 + 512 + 512 + 384 = 6784 bytes a token; backward 100 h + 20 q +
  // 16 kv + 8 f + 4 (q + kv) = 6400 + 1280 + 512 + 1024 + 384 = 9600.
  const ClusterSpec cluster = testing::flat_tiny_cluster(2, 4, 1e9, 1e-6);  // 1e6 B/s of HBM
  const CostModel fused(tiny_model(), cluster, flat_profile());
  const CostModel eager(tiny_model(), cluster, flat_profile(), CostModelOptions{.elementwise = Elementwise::Eager});
  EXPECT_DOUBLE_EQ(eager.layer_elementwise_bytes_per_token().forward, 2 * 1216 + 6784);
  EXPECT_DOUBLE_EQ(eager.layer_elementwise_bytes_per_token().backward, 2 * 1600 + 9600);
  // Without GQA (kv = q) nothing is repeated.
  ModelConfig mha = tiny_model();
  mha.kv_heads = mha.heads;
  const CostModel eager_mha(mha, cluster, flat_profile(), CostModelOptions{.elementwise = Elementwise::Eager});
  const CostModel fused_mha(mha, cluster, flat_profile());
  EXPECT_DOUBLE_EQ(
      eager_mha.layer_elementwise_bytes_per_token().forward - fused_mha.layer_elementwise_bytes_per_token().forward,
      64 * 64 + 20 * 64 + 16 * 64 + 4 * 128);
  // 100 tokens at 1e6 B/s: 0.6784 s more forward, 0.96 s more backward; GEMMs and attention unchanged.
  const std::vector<SequenceShare> one{{100, 1}};
  EXPECT_NEAR(eager.layer_seconds(one, 1, Recompute::None, false, LayerGrad::Full) -
                  fused.layer_seconds(one, 1, Recompute::None, false, LayerGrad::Full),
              0.6784 + 0.96, 1e-9);
  EXPECT_EQ(to_string(Elementwise::Eager), "eager");
  EXPECT_EQ(to_string(Elementwise::Fused), "fused");
}

TEST(CostModelTime, Fp8CastsAndTransposesTheGemmOperandsThroughHbm) {
  // h 64, q 64, kv 32, f 128. BF16 floor: forward 2 x 1216, backward 2 x 1600 bytes a token. FP8 adds, forward,
  // the attention and SwiGLU outputs cast and transposed (4 q + 4 f) and the norms' FP8 outputs transposed (2 h):
  // 896; backward, the output gradients of the QKV, output, gate/up and down GEMMs cast and transposed,
  // 4 (q + 2 kv + 2 h + 2 f) = 2048.
  Profile p = flat_profile();
  p.compute.fp8_gemm_speedup = 2.0;
  const ClusterSpec cluster = testing::flat_tiny_cluster(2, 4, 1e9, 1e-6);  // 1e6 B/s of HBM
  const CostModel bf16(tiny_model(), cluster, p);
  const CostModel fp8(tiny_model(), cluster, p, CostModelOptions{.precision = Precision::Fp8});
  EXPECT_DOUBLE_EQ(fp8.layer_elementwise_bytes_per_token().forward, 2 * 1216 + 896);
  EXPECT_DOUBLE_EQ(fp8.layer_elementwise_bytes_per_token().backward, 2 * 1600 + 2048);
  // The loss over the logits stays BF16.
  EXPECT_DOUBLE_EQ(fp8.head_elementwise_bytes_per_token().forward, bf16.head_elementwise_bytes_per_token().forward);
  // 100 tokens at 1e6 B/s: the casts add 0.0896 s forward and 0.2048 s backward to the layer, beyond the halved GEMMs;
  // a recomputed forward casts again.
  const std::vector<SequenceShare> one{{100, 1}};
  const double gemm_saved = 3 * 7.3728 / 2;
  EXPECT_NEAR(bf16.layer_seconds(one, 1, Recompute::None, false, LayerGrad::Full) -
                  fp8.layer_seconds(one, 1, Recompute::None, false, LayerGrad::Full),
              gemm_saved - 0.0896 - 0.2048, 1e-9);
  EXPECT_NEAR(fp8.layer_seconds(one, 1, Recompute::Full, false, LayerGrad::Full) -
                  fp8.layer_seconds(one, 1, Recompute::None, false, LayerGrad::Full),
              7.3728 / 2 + 2.56 + 0.2432 + 0.0896, 1e-9);
}

TEST(CostModelTime, SelectiveRecomputationRerunsTheProfilesShareOfTheForwardGemms) {
  Profile p = flat_profile();
  p.compute.selective_recompute_gemm_share = 0.5;
  const CostModel cost(tiny_model(), tiny_cluster(), p);
  const std::vector<SequenceShare> one{{100, 1}};
  const double plain = 3 * 7.3728 + 3.5 * 2.56 + 10e-6;
  EXPECT_NEAR(cost.layer_seconds(one, 1, Recompute::Selective, false, LayerGrad::Full), plain + 0.5 * 7.3728, 1e-9);
  EXPECT_NEAR(cost.layer_seconds(one, 1, Recompute::None, false, LayerGrad::Full), plain, 1e-9);
  // A layer recomputed whole runs its forward once more, not the share on top.
  EXPECT_NEAR(cost.layer_seconds(one, 1, Recompute::Full, false, LayerGrad::Full), plain + 7.3728 + 2.56, 1e-9);
  EXPECT_NEAR(cost.layer_seconds(one, 1, Recompute::Selective, true, LayerGrad::Full), plain + 7.3728 + 2.56, 1e-9);
}

TEST(CostModelTime, ElementwiseTrafficMovesAtTheGpusHbmBandwidth) {
  // h 64, q 64, kv 32, f 128, V 1000; bf16. Forward 10 h + 2 (q + kv) + 3 f = 1216 elements a token, backward
  // 12 h + 2 (q + kv) + 5 f = 1600; the loss 2 V each way.
  const CostModel with(tiny_model(), testing::flat_tiny_cluster(2, 4, 1e9, 1e-6), flat_profile());  // 1e6 B/s
  const CostModel without = tiny_cost();
  EXPECT_DOUBLE_EQ(with.layer_elementwise_bytes_per_token().forward, 2 * 1216);
  EXPECT_DOUBLE_EQ(with.layer_elementwise_bytes_per_token().backward, 2 * 1600);
  EXPECT_DOUBLE_EQ(with.head_elementwise_bytes_per_token().forward, 2 * 2 * 1000);
  const std::vector<SequenceShare> one{{100, 1}};
  const auto added = [&](int tp, Recompute recompute, bool checkpointed, LayerGrad grad) {
    return with.layer_seconds(one, tp, recompute, checkpointed, grad) -
           without.layer_seconds(one, tp, recompute, checkpointed, grad);
  };
  // 100 tokens: forward 0.2432 s, backward 0.32 s at 1e6 B/s; a recomputed forward moves its bytes again; TP
  // splits the rows; a no_grad layer runs its forward only.
  EXPECT_NEAR(added(1, Recompute::None, false, LayerGrad::Full), 0.5632, 1e-9);
  EXPECT_NEAR(added(1, Recompute::Selective, false, LayerGrad::Full), 0.5632, 1e-9);
  EXPECT_NEAR(added(1, Recompute::Full, false, LayerGrad::Full), 0.5632 + 0.2432, 1e-9);
  EXPECT_NEAR(added(2, Recompute::None, false, LayerGrad::Full), 0.5632 / 2, 1e-9);
  EXPECT_NEAR(added(1, Recompute::None, false, LayerGrad::None), 0.2432, 1e-6);
  // Two layers and the loss over the logits (0.4 s each way).
  ParallelScheme scheme;
  EXPECT_NEAR(with.compute_seconds(one, scheme, 2, true) - without.compute_seconds(one, scheme, 2, true),
              2 * 0.5632 + 0.8, 1e-9);
  EXPECT_NEAR(with.forward_seconds(one, scheme, 2, true) - without.forward_seconds(one, scheme, 2, true),
              2 * 0.2432 + 0.4, 1e-6);
}

TEST(CostModelTime, APowerLimitedPartSlowsTheTensorCoresAndNotTheHbm) {
  // Parts at half their kind's peak: GEMMs, attention (whole and ring blocks) and the head take twice as long; the
  // element-wise traffic (1e6 B/s) and the per-layer fixed cost do not move.
  ClusterSpec full_cluster = testing::flat_tiny_cluster(2, 4, 1e9, 1e-6);
  ClusterSpec half_cluster = full_cluster;
  half_cluster.tensor_peak_share = 0.5;
  const CostModelOptions zigzag{.zero_stage = 2, .cp_attention = CpAttention::Zigzag};
  const CostModel full(tiny_model(), full_cluster, flat_profile(), zigzag);
  const CostModel half(tiny_model(), half_cluster, flat_profile(), zigzag);
  const std::vector<SequenceShare> one{{100, 1}};
  const double tensor = 3 * 7.3728 + 3.5 * 2.56;  // LayerSecondsByHand's GEMM and attention passes
  EXPECT_NEAR(half.layer_seconds(one, 1, Recompute::None, false, LayerGrad::Full) -
                  full.layer_seconds(one, 1, Recompute::None, false, LayerGrad::Full),
              tensor, 1e-9);
  ParallelScheme scheme;
  scheme.recompute = Recompute::None;
  const double head = 3 * 100 * 128000 / 1e6;  // ComputeSecondsAddsCheckpointedLayersAndTheHead's
  EXPECT_NEAR(half.compute_seconds(one, scheme, 1, true) - full.compute_seconds(one, scheme, 1, true), tensor + head,
              1e-9);
  const std::vector<double> full_steps = full.cp_step_seconds(SequenceShare{400, 4}, 1);
  const std::vector<double> half_steps = half.cp_step_seconds(SequenceShare{400, 4}, 1);
  ASSERT_EQ(half_steps.size(), full_steps.size());
  for (std::size_t i = 0; i < full_steps.size(); ++i) EXPECT_DOUBLE_EQ(half_steps[i], 2 * full_steps[i]);
}

TEST(CostModelMemory, UlyssesShardsKeepTheProfilesCopiesForEveryTokenOfTheSequence) {
  // Tiny model: 4 heads, 2 KV heads, head_dim 16, 2 layers. Over CP 2 a rank runs 2 heads and 1 KV head: per
  // token of a sharded sequence 4 x 2 x 16 + 4 x 1 x 16 + 4 x 2 = 200 bytes a layer.
  Profile p = flat_profile();
  p.memory.sharded_attention = {4, 4, 4};
  const CostModel cost(tiny_model(), tiny_cluster(), p);
  ParallelScheme scheme;
  scheme.cp = 2;
  const std::vector<SequenceShare> dist{{100, 2}, {50, 2}, {30, 1}};  // the cp 1 share keeps nothing extra
  EXPECT_DOUBLE_EQ(cost.sharded_attention_bytes(dist, scheme, LayerSpan{0, 2}), 150.0 * 200 * 2);
  EXPECT_DOUBLE_EQ(cost.sharded_attention_bytes(dist, scheme, LayerSpan{1, 1}), 150.0 * 200);
  // A checkpointed layer keeps its input only; ring attention exchanges blocks, not these copies; a profile
  // without the field keeps nothing.
  ParallelScheme checkpointed = scheme;
  checkpointed.recompute = Recompute::Full;
  EXPECT_DOUBLE_EQ(cost.sharded_attention_bytes(dist, checkpointed, LayerSpan{0, 2}), 0.0);
  const CostModel ring(tiny_model(), tiny_cluster(), p,
                       CostModelOptions{.zero_stage = 2, .cp_attention = CpAttention::Zigzag});
  EXPECT_DOUBLE_EQ(ring.sharded_attention_bytes(dist, scheme, LayerSpan{0, 2}), 0.0);
  EXPECT_DOUBLE_EQ(tiny_cost().sharded_attention_bytes(dist, scheme, LayerSpan{0, 2}), 0.0);
}

TEST(CostModelTime, UlyssesRanksRunWholeHeadsAndTheBusiestSetsThePace) {
  EXPECT_EQ(ulysses_rank_heads(14, 2, 8).heads, 2);  // Qwen2.5-0.5B over 8 ranks: 2 of 14, not 1.75
  EXPECT_EQ(ulysses_rank_heads(14, 2, 8).kv_heads, 1);
  EXPECT_EQ(ulysses_rank_heads(28, 4, 8).heads, 4);  // Qwen2.5-7B: 3.5 -> 4 beside one KV head
  EXPECT_EQ(ulysses_rank_heads(32, 8, 8).heads, 4);  // divides: heads / cp
  EXPECT_EQ(ulysses_rank_heads(64, 8, 16).heads, 4);
  EXPECT_EQ(ulysses_rank_heads(64, 8, 16).kv_heads, 1);
  EXPECT_THROW(ulysses_rank_heads(14, 2, 0), std::invalid_argument);

  // The test model: 4 heads, 2 KV heads. Over cp 2 each rank runs 2 heads, over cp 4 one; over cp 8 four ranks
  // idle and the busy ones still run a whole head: the same attention time as cp 4, where heads / cp would halve it.
  const CostModel cost = tiny_cost();
  const auto attention = [&](int cp) {
    const std::vector<SequenceShare> work{{400, cp}};
    double gemm = 0;
    const double all = cost.layer_work_seconds(work, 1, Recompute::None, false, LayerGrad::Full, &gemm);
    return all - gemm;
  };
  EXPECT_NEAR(attention(2), attention(1) / 2, 1e-9);
  EXPECT_NEAR(attention(4), attention(1) / 4, 1e-9);
  EXPECT_NEAR(attention(8), attention(4), 1e-9);
}

TEST(CostModelTime, ShardedSharesAndTensorParallelism) {
  const CostModel cost = tiny_cost();
  // A 100-token sequence sharded over 2 CP ranks (50 local tokens, attention over all 100 for half the heads)
  // next to a whole 50-token sequence, at TP 2: T = 100 local tokens.
  const std::vector<SequenceShare> work{{100, 2}, {50, 1}};
  const double gemm = 100 * 73728 / 2 / 1e6;
  const double attention = 1.28e6 / (2 * 2) / 0.5e6 + 2.0 * 50 * 50 * 64 / 2 / 0.5e6;
  EXPECT_NEAR(cost.layer_seconds(work, 2, Recompute::None, false, LayerGrad::Full), 3 * gemm + 3.5 * attention + 10e-6,
              1e-9);
}

TEST(CostModelTime, EfficiencyCurvesAreLookedUpAtLocalTokensAndSequenceLength) {
  Profile p = flat_profile();
  p.compute.gemm_efficiency = Curve{{10, 1000}, {0.5, 1.0}, std::nullopt};         // 0.75 at 100 tokens
  p.compute.attention_efficiency = Curve{{100, 10000}, {0.2, 0.6}, std::nullopt};  // 0.2 at 100, 0.4 at 1000
  const CostModel cost(tiny_model(), tiny_cluster(), p);
  const std::vector<SequenceShare> one{{100, 1}};
  EXPECT_NEAR(cost.layer_seconds(one, 1, Recompute::None, false, LayerGrad::Full),
              3 * 7.3728 / 0.75 + 3.5 * 1.28 / 0.2 + 10e-6, 1e-9);
  // 1000 tokens sharded 10 ways: GEMMs see 100 local tokens, attention a 1000-token sequence (the busiest ranks
  // run one of the 4 heads).
  const std::vector<SequenceShare> sharded{{1000, 10}};
  const double attention = 2.0 * 1000 * 1000 * 64 / 4 / (1e6 * 0.4);
  EXPECT_NEAR(cost.layer_seconds(sharded, 1, Recompute::None, false, LayerGrad::Full),
              3 * 7.3728 / 0.75 + 3.5 * attention + 10e-6, 1e-9);
}

TEST(CostModelTime, ComputeSecondsAddsCheckpointedLayersAndTheHead) {
  const CostModel cost = tiny_cost();
  const std::vector<SequenceShare> one{{100, 1}};
  const double plain = 3 * 7.3728 + 3.5 * 2.56 + 10e-6;
  const double checkpointed = plain + 7.3728 + 2.56;
  const double head = 3 * 100 * 128000 / 1e6;
  ParallelScheme scheme;
  scheme.recompute = Recompute::None;
  scheme.checkpointed_layers = 1;
  EXPECT_NEAR(cost.compute_seconds(one, scheme, 2, true), plain + checkpointed + head, 1e-9);
  EXPECT_NEAR(cost.compute_seconds(one, scheme, 2, false), plain + checkpointed, 1e-9);
  scheme.checkpointed_layers = 5;  // more than the stage has: every layer of the stage
  EXPECT_NEAR(cost.compute_seconds(one, scheme, 2, false), 2 * checkpointed, 1e-9);
  scheme.checkpointed_layers = 0;
  scheme.recompute = Recompute::Full;
  EXPECT_NEAR(cost.compute_seconds(one, scheme, 2, true), 2 * checkpointed + head, 1e-9);
  scheme.tp = 2;
  scheme.recompute = Recompute::None;
  EXPECT_NEAR(cost.compute_seconds(one, scheme, 1, true), 3 * 7.3728 / 2 + 3.5 * 2.56 / 2 + 10e-6 + head / 2, 1e-9);
}

TEST(CostModelComm, UlyssesAllToAllsByHand) {
  const CostModel cost = tiny_cost();
  // 10 tokens on the GPU: Q/O 10*64*2 = 1280 B, K/V 10*32*2 = 640 B; all_to_all over 4: 1 us + size*0.75/1 GB/s.
  const double q = 1e-6 + 1280 * 0.75 / 1e9;
  const double kv = 1e-6 + 640 * 0.75 / 1e9;
  // The GPU's 10 tokens are its part of a sharded sequence (Ulysses sizes by the tokens alone).
  const auto cp_comm = [&](int cp, Tokens tokens, int layers, LinkClass link) {
    ParallelScheme scheme;
    scheme.cp = cp;
    const SequenceShare share{tokens * cp, cp};
    return cost.cp_comm_seconds({&share, 1}, tokens, scheme, layers, link);
  };
  EXPECT_NEAR(cp_comm(4, 10, 2, LinkClass::NvLink), 2 * 2 * (2 * q + 2 * kv), 1e-15);
  EXPECT_NEAR(cp_comm(16, 10, 1, LinkClass::InfiniBand),
              2 * (2 * (5e-6 + 1280 * (15.0 / 16) / 0.5e9) + 2 * (5e-6 + 640 * (15.0 / 16) / 0.5e9)), 1e-15);
  EXPECT_EQ(cp_comm(1, 10, 2, LinkClass::NvLink), 0.0);
  EXPECT_EQ(cp_comm(4, 0, 2, LinkClass::NvLink), 0.0);
}

TEST(CostModelComm, AsyncTpHidesAllButOneChunkOfTheShorterOfEachCollectiveAndItsGemm) {
  // One collective (all-gather or reduce-scatter of 10 tokens over TP 2) c = 1 us + 640 ns; 16 of them over the two
  // layers' forward and backward passes. The peak is set so that a layer's forward GEMMs take 6 c on one TP rank:
  // QKV 6c x 2/9, output 6c x 1/9, gate + up 6c x 4/9, down 6c x 2/9 (their shares of 73728 FLOPs a token), so
  // only the output projection is shorter than its collective: a pass hides (c + 2/3 c + c + c) (1 - 1/2).
  const double c = 1e-6 + 1280 * 0.5 / 1e9;
  Profile profile = flat_profile();
  profile.compute.peak_tflops = 10 * 73728 / 2.0 / (6 * c) / 1e12;
  const CostModel none(tiny_model(), tiny_cluster(), profile);
  const CostModel async(tiny_model(), tiny_cluster(), profile, CostModelOptions{.tp_overlap = TpOverlap::Async});
  const double hidden = 4 * (c + 2.0 / 3 * c + c + c) / 2;
  EXPECT_NEAR(async.tp_hidden_seconds(10, 2, 2, 16 * c), hidden, 1e-15);
  EXPECT_NEAR(async.tp_comm_seconds(10, 2, 2, LinkClass::NvLink), 16 * c - hidden, 1e-15);
  EXPECT_NEAR(none.tp_comm_seconds(10, 2, 2, LinkClass::NvLink), 16 * c, 1e-15);
  EXPECT_EQ(none.tp_hidden_seconds(10, 2, 2, 16 * c), 0.0);
  // GEMMs far longer than the transfers: every collective hides all but its first chunk, 1 - 1/tp of it.
  const CostModel slow(tiny_model(), tiny_cluster(), flat_profile(), CostModelOptions{.tp_overlap = TpOverlap::Async});
  EXPECT_NEAR(slow.tp_hidden_seconds(10, 4, 2, 16 * c), 16 * c * 3 / 4, 1e-15);
  EXPECT_EQ(slow.tp_hidden_seconds(10, 1, 2, 16 * c), 0.0);
}

TEST(CostModelComm, TensorAndPipelineTransfersByHand) {
  const CostModel cost = tiny_cost();
  // 10 tokens * 64 * 2 B = 1280 B; all_gather and reduce_scatter over 2: 1 us + 1280 * 0.5 / 1 GB/s.
  const double one = 1e-6 + 1280 * 0.5 / 1e9;
  EXPECT_NEAR(cost.tp_comm_seconds(10, 2, 2, LinkClass::NvLink), 2 * 2 * 2 * (2 * one), 1e-15);
  EXPECT_EQ(cost.tp_comm_seconds(10, 1, 2, LinkClass::NvLink), 0.0);
  // send_recv of 1280 / tp bytes.
  EXPECT_NEAR(cost.pp_transfer_seconds(10, 2, LinkClass::NvLink), 1e-6 + 640 / 1e9, 1e-15);
  EXPECT_NEAR(cost.pp_transfer_seconds(10, 1, LinkClass::InfiniBand), 5e-6 + 1280 / 0.5e9, 1e-15);
}

TEST(CostModelParameters, LayersSplitOverStagesAndVocabularyOnTheEdgeStages) {
  const CostModel cost = tiny_cost();
  const double layer = tiny_model().layer_parameters();
  ParallelScheme scheme;
  EXPECT_DOUBLE_EQ(cost.parameters_per_gpu(scheme), 2 * layer + 2 * 64000.0);  // embedding + LM head
  scheme.tp = 2;
  scheme.pp = 2;
  EXPECT_DOUBLE_EQ(cost.parameters_per_gpu(scheme), 2 * layer / 4 + 64000.0 / 2);  // one of them per edge stage
  ModelConfig tied = tiny_model();
  tied.tied_embeddings = true;
  const CostModel tied_cost(tied, tiny_cluster(), flat_profile());
  EXPECT_DOUBLE_EQ(tied_cost.parameters_per_gpu(ParallelScheme{}), 2 * layer + 64000.0);
}

TEST(CostModelMemory, StaticBytesPerZeroStage) {
  const ParallelScheme scheme;
  const double params = tiny_cost().parameters_per_gpu(scheme);
  EXPECT_DOUBLE_EQ(tiny_cost(0).static_bytes(scheme, 4, 0), 16 * params);
  EXPECT_DOUBLE_EQ(tiny_cost(1).static_bytes(scheme, 4, 0), (4 + 12.0 / 4) * params);
  EXPECT_DOUBLE_EQ(tiny_cost(2).static_bytes(scheme, 4, 0), (2 + 14.0 / 4) * params);
  EXPECT_DOUBLE_EQ(tiny_cost(3).static_bytes(scheme, 4, 0), (16.0 / 4) * params);
  EXPECT_DOUBLE_EQ(tiny_cost(3).static_bytes(scheme, 1, 0), 16 * params);
  EXPECT_THROW(CostModel(tiny_model(), tiny_cluster(), flat_profile(), CostModelOptions{.zero_stage = 4}), InputError);
}

TEST(CostModelMemory, ActivationBytesPerToken) {
  const CostModel cost = tiny_cost();
  // Per layer: none 12*64 + 4*32 + 8*128 = 1920, selective 10*64 + 4*32 + 6*128 = 1536, full 2*64 = 128;
  // logits 10 * 1000 = 10000.
  ParallelScheme scheme;
  scheme.recompute = Recompute::Selective;
  EXPECT_DOUBLE_EQ(cost.activation_bytes_per_token(scheme, 2, false), 2 * 1536);
  EXPECT_DOUBLE_EQ(cost.activation_bytes_per_token(scheme, 2, true), 2 * 1536 + 10000);
  scheme.tp = 2;
  EXPECT_DOUBLE_EQ(cost.activation_bytes_per_token(scheme, 2, true), (2 * 1536 + 10000) / 2.0);
  scheme.tp = 1;
  scheme.recompute = Recompute::None;
  EXPECT_DOUBLE_EQ(cost.activation_bytes_per_token(scheme, 2, false), 2 * 1920);
  // One checkpointed layer: it keeps its input, and its recomputation in backward holds one selective layer's
  // activations beyond that (or the logits at the end of forward, whichever is larger).
  scheme.recompute = Recompute::Selective;
  scheme.checkpointed_layers = 1;
  EXPECT_DOUBLE_EQ(cost.activation_bytes_per_token(scheme, 2, false), 128 + 1536 + (1536 - 128));
  EXPECT_DOUBLE_EQ(cost.activation_bytes_per_token(scheme, 2, true), 128 + 1536 + 10000);
  scheme.recompute = Recompute::Full;
  EXPECT_DOUBLE_EQ(cost.activation_bytes_per_token(scheme, 2, false), 2 * 128 + (1920 - 128));
}

// fp32 main gradients (Megatron under BF16, torchtitan's reduce_dtype) reduce 4 bytes a parameter; the updated
// parameters still come back in bf16.
TEST(CostModelIteration, GradientsReduceInTheirMainGradientPrecision) {
  Profile profile = flat_profile();
  profile.memory.gradient_reduce_bytes = 4;
  const ParallelScheme scheme;
  const auto zero = [&](int stage) {
    return CostModel(tiny_model(), tiny_cluster(), profile, CostModelOptions{.zero_stage = stage});
  };
  const double params = zero(1).trained_parameters_per_gpu(scheme, 0);
  const auto sync = zero(1).gradient_sync_calls(scheme, 4, 0);
  ASSERT_EQ(sync.size(), 2u);
  EXPECT_EQ(sync[0].op, CollectiveOp::ReduceScatter);
  EXPECT_DOUBLE_EQ(sync[0].bytes, 4 * params);
  EXPECT_EQ(sync[1].op, CollectiveOp::AllGather);
  EXPECT_DOUBLE_EQ(sync[1].bytes, 2 * params);
  const auto all_reduce = zero(0).gradient_sync_calls(scheme, 4, 0);
  ASSERT_EQ(all_reduce.size(), 1u);
  EXPECT_DOUBLE_EQ(all_reduce[0].bytes, 4 * params);
  // ZeRO-1 at 1 GB/s, bus factor 0.75, 1 us each: the fp32 reduce-scatter takes twice the bf16 all-gather's transfer.
  EXPECT_NEAR(zero(1).gradient_sync_seconds(scheme, 4, LinkClass::NvLink, 0),
              (1e-6 + 4 * params * 0.75 / 1e9) + (1e-6 + 2 * params * 0.75 / 1e9), 1e-15);
}

TEST(CostModelIteration, OverlappedGradientSyncHidesAllButTheLastLayerAndNoMoreThanItsCompute) {
  EXPECT_DOUBLE_EQ(CostModel::gradient_sync_hidden_seconds(10, 4, 100), 7.5);  // the last layer's bucket stays
  EXPECT_DOUBLE_EQ(CostModel::gradient_sync_hidden_seconds(10, 4, 3), 3);      // a short backward caps it
  EXPECT_DOUBLE_EQ(CostModel::gradient_sync_hidden_seconds(10, 1, 100), 0);    // one layer: nothing to overlap
}

TEST(CostModelMemory, CapacityIsMemoryLessReserve) {
  EXPECT_DOUBLE_EQ(tiny_cost().capacity_bytes(), 1e9 - 0.25 * 1024 * 1024 * 1024);
}

TEST(CostModelIteration, GradientSyncAndOptimizerByHand) {
  const ParallelScheme scheme;
  const double params = tiny_cost().parameters_per_gpu(scheme);
  const double bytes = 2 * params;
  // ZeRO-2: reduce-scatter + all-gather over 4 (bus factor 0.75) at 1 GB/s, 1 us each.
  EXPECT_NEAR(tiny_cost(2).gradient_sync_seconds(scheme, 4, LinkClass::NvLink, 0), 2 * (1e-6 + bytes * 0.75 / 1e9),
              1e-15);
  EXPECT_NEAR(tiny_cost(1).gradient_sync_seconds(scheme, 4, LinkClass::NvLink, 0), 2 * (1e-6 + bytes * 0.75 / 1e9),
              1e-15);
  // ZeRO-0: one all-reduce (bus factor 1.5).
  EXPECT_NEAR(tiny_cost(0).gradient_sync_seconds(scheme, 4, LinkClass::NvLink, 0), 1e-6 + bytes * 1.5 / 1e9, 1e-15);
  EXPECT_EQ(tiny_cost(2).gradient_sync_seconds(scheme, 1, LinkClass::NvLink, 0), 0.0);
  // 10 us per million parameters updated: the GPU's shard from ZeRO-1 on, everything at ZeRO-0.
  EXPECT_NEAR(tiny_cost(2).optimizer_seconds(scheme, 4, 0), 10e-6 * params / 4 / 1e6, 1e-18);
  EXPECT_NEAR(tiny_cost(0).optimizer_seconds(scheme, 4, 0), 10e-6 * params / 1e6, 1e-18);
}

TEST(CostModelNames, RecomputeNames) {
  EXPECT_EQ(to_string(Recompute::None), "none");
  EXPECT_EQ(to_string(Recompute::Selective), "selective");
  EXPECT_EQ(to_string(Recompute::Full), "full");
}

}  // namespace cost_model_test
}  // namespace lcsim
