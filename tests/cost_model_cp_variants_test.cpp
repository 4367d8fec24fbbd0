// The CP attention variants side by side (docs/model.md, "Context parallelism"): the plain ring's causal imbalance,
// the block efficiency of each ring step, and all-gather CP's exposed collectives and gathered K,V, hand-computed on
// the tiny model and flat profile of cost_model_ring_test.cpp (4 heads of 16, 2 KV heads, 1 MFLOP/s, e_a 0.5).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/cost_model.hpp"
#include "tests/flat_profile_fixtures.hpp"

namespace lcsim {
namespace cost_model_cp_variants_test {

using testing::flat_compute_profile;
using testing::single_segment;

/// send_recv at 1 GB/s; all-gather and reduce-scatter over 4 at 1 us + bytes * 3/4 / 1 GB/s.
Profile flat_profile() {
  Profile p = flat_compute_profile();
  p.collectives.push_back(single_segment(CollectiveOp::SendRecv, LinkClass::NvLink, 2, 1, 1));
  p.collectives.push_back(single_segment(CollectiveOp::AllGather, LinkClass::NvLink, 4, 1, 1));
  p.collectives.push_back(single_segment(CollectiveOp::ReduceScatter, LinkClass::NvLink, 4, 1, 1));
  return p;
}

CostModel cost_of(CpAttention mode, Profile profile = flat_profile()) {
  return CostModel(testing::flat_tiny_model(), testing::flat_tiny_cluster(1, 8), std::move(profile),
                   CostModelOptions{.zero_stage = 2, .cp_attention = mode});
}

ParallelScheme cp_scheme(int cp) {
  ParallelScheme s;
  s.cp = cp;
  s.recompute = Recompute::None;
  return s;
}

// 100 tokens over cp 4, n = 25 a rank. A pair costs 4 x 64 FLOPs at 0.5 MFLOP/s: 512 us.
const std::vector<SequenceShare> kOneSharded{{100, 4}};
constexpr double kPair = 4 * 64 / 0.5e6;
constexpr double kDiagonal = 25 * 25 / 2.0 * kPair;  // 0.16 s
constexpr double kFull = 25 * 25 * kPair;            // 0.32 s

TEST(CostModelCpVariants, PlainRingStepsRunAtTheLastRanksPace) {
  // Rank 3 computes its diagonal at step 0 and a full block of an earlier rank at steps 1, 2, 3 (ranks 0..2 idle
  // at some of them): 0.16 + 3 x 0.32 = 1.12 s, where a balanced split gives every rank 0.64 s.
  const auto steps = cost_of(CpAttention::Ring).cp_step_seconds(kOneSharded[0], 1);
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_NEAR(steps[0], kDiagonal, 1e-12);
  for (std::size_t i = 1; i < 4; ++i) EXPECT_NEAR(steps[i], kFull, 1e-12);
}

TEST(CostModelCpVariants, PlainRingChargesItsCausalImbalanceToTheLayer) {
  // layer = 3 GEMM passes (25 tokens x 73728 FLOPs at 1 MFLOP/s) + 3.5 x attention forward + 10 us.
  const double gemm = 25 * 73728 / 1e6;
  const auto layer = [&](CpAttention mode) {
    return cost_of(mode).layer_seconds(kOneSharded, 1, Recompute::None, false, LayerGrad::Full);
  };
  EXPECT_NEAR(layer(CpAttention::Ring), 3 * gemm + 3.5 * (kDiagonal + 3 * kFull) + 10e-6, 1e-9);
  EXPECT_NEAR(layer(CpAttention::Zigzag), 3 * gemm + 3.5 * 4 * kDiagonal + 10e-6, 1e-9);
  // A plain ring priced as balanced would charge the zigzag's 0.64 s: 1.68 s a layer less.
  EXPECT_NEAR(layer(CpAttention::Ring) - layer(CpAttention::Zigzag), 3.5 * 3 * (kFull - kDiagonal), 1e-9);
}

TEST(CostModelCpVariants, PlainRingTransfersHideBehindItsLongerSteps) {
  // The same transfers as zigzag, beside the slowest rank's blocks: forward step 0 beside 0.16 s, steps 1-2 beside
  // 0.32 s each; at 5 kB/s a block (3200 B) takes 0.64 s: forward exposes 0.48 + 2 x 0.32 a layer.
  Profile p = flat_profile();
  p.collectives[0] = single_segment(CollectiveOp::SendRecv, LinkClass::NvLink, 2, 0, 5e-6);
  const auto exchanges = cost_of(CpAttention::Ring, p).cp_exchanges(kOneSharded, 25, cp_scheme(4), 1, 0);
  ASSERT_EQ(exchanges.size(), 5u);
  EXPECT_NEAR(exchanges[0].beside_s, kDiagonal, 1e-12);
  EXPECT_NEAR(exchanges[1].beside_s, 2 * kFull, 1e-12);
  const CostModel ring = cost_of(CpAttention::Ring, p);
  const double block = 3200 / 5e3;
  EXPECT_NEAR(ring.exposed_seconds(exchanges[0], LinkClass::NvLink), block - kDiagonal, 1e-12);
  EXPECT_NEAR(ring.exposed_seconds(exchanges[1], LinkClass::NvLink), 2 * (block - kFull), 1e-12);
  // Backward: 2.5 x the blocks; K,V + dK,dV (1.28 s) beside 0.8 s at steps 1-2, the last dK,dV alone.
  EXPECT_NEAR(ring.exposed_seconds(exchanges[3], LinkClass::NvLink), 2 * (2 * block - 2.5 * kFull), 1e-12);
  EXPECT_NEAR(ring.exposed_seconds(exchanges[4], LinkClass::NvLink), block, 1e-12);
}

TEST(CostModelCpVariants, RingBlocksRunAtTheEfficiencyOfTheirSize) {
  // e_a rising from 0.2 at 100 tokens to 0.6 at 10,000. 4000 tokens over cp 4: n = 1000, every zigzag step
  // 500,000 pairs, the work of a causal 1000-token kernel, at e(1000); over cp 8, n = 500: 125,000 pairs a step at
  // e(500), slower per FLOP. The plain ring's full 1000 x 1000 block (10^6 pairs) runs at e(1414), its diagonal at
  // e(1000). Smaller blocks pay their launch and partial tiles: the cp 8 zigzag's attention exceeds the cp 4 one's
  // halved share.
  Profile p = flat_profile();
  p.compute.attention_efficiency = Curve{{100, 10000}, {0.2, 0.6}, std::nullopt};
  const Curve& e = p.compute.attention_efficiency;
  ASSERT_LT(e.at(500), e.at(1000));
  const CostModel zigzag = cost_of(CpAttention::Zigzag, p);
  const auto four = zigzag.cp_step_seconds({4000, 4}, 1);
  ASSERT_EQ(four.size(), 4u);
  for (double step : four) EXPECT_NEAR(step, 500000.0 * 256 / (1e6 * e.at(1000)), 1e-9);
  const auto eight = zigzag.cp_step_seconds({4000, 8}, 1);
  ASSERT_EQ(eight.size(), 8u);
  for (double step : eight) EXPECT_NEAR(step, 125000.0 * 256 / (1e6 * e.at(500)), 1e-9);
  EXPECT_GT(8 * eight[0], 4 * four[0] / 2);
  const auto ring = cost_of(CpAttention::Ring, p).cp_step_seconds({4000, 4}, 1);
  EXPECT_NEAR(ring[0], 500000.0 * 256 / (1e6 * e.at(1000)), 1e-9);
  EXPECT_NEAR(ring[1], 1e6 * 256 / (1e6 * e.at(std::sqrt(2e6))), 1e-9);
}

TEST(CostModelCpVariants, AllGatherIsBalanced) {
  // Rank r's chunks of h = 12.5 queries: h^2 (2 cp - 1) + h^2 pairs = 8 x 156.25 = 1250 on every rank, at e(h).
  const auto steps = cost_of(CpAttention::AllGather).cp_step_seconds(kOneSharded[0], 1);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_NEAR(steps[0], 1250 * kPair, 1e-12);
  EXPECT_NEAR(steps[0], 4 * kDiagonal, 1e-12);  // the balanced share, as zigzag's
}

TEST(CostModelCpVariants, AllGatherCollectivesAreExposedWhole) {
  // 25 tokens a GPU: K,V 3200 B, gathered 12,800 B. Per layer: the forward all-gather; backward all-gathers again
  // and reduce-scatters dK,dV. Each: 1 us + 12800 x 3/4 / 1 GB/s = 10.6 us, nothing beside it.
  const CostModel cost = cost_of(CpAttention::AllGather);
  const auto exchanges = cost.cp_exchanges(kOneSharded, 25, cp_scheme(4), 2, 0);
  ASSERT_EQ(exchanges.size(), 2u);
  EXPECT_EQ(exchanges[0].pass, CpExchange::Pass::Forward);
  ASSERT_EQ(exchanges[0].calls.size(), 1u);
  EXPECT_EQ(exchanges[0].calls[0].op, CollectiveOp::AllGather);
  EXPECT_EQ(exchanges[0].calls[0].group_size, 4);
  EXPECT_DOUBLE_EQ(exchanges[0].calls[0].bytes, 12800);
  EXPECT_DOUBLE_EQ(exchanges[0].calls[0].count, 2);
  EXPECT_EQ(exchanges[1].pass, CpExchange::Pass::Backward);
  ASSERT_EQ(exchanges[1].calls.size(), 2u);
  EXPECT_EQ(exchanges[1].calls[1].op, CollectiveOp::ReduceScatter);
  for (const auto& e : exchanges) EXPECT_EQ(e.beside_s, 0.0);
  const double one = 1e-6 + 12800 * 0.75 / 1e9;
  EXPECT_NEAR(cost.cp_comm_seconds(kOneSharded, 25, cp_scheme(4), 2, LinkClass::NvLink), 2 * 3 * one, 1e-15);
  // A checkpointed layer gathers K,V once more for its recomputed forward.
  ParallelScheme checkpointed = cp_scheme(4);
  checkpointed.checkpointed_layers = 1;
  EXPECT_NEAR(cost.cp_comm_seconds(kOneSharded, 25, checkpointed, 2, LinkClass::NvLink), 7 * one, 1e-15);
}

TEST(CostModelCpVariants, AllGatherHoldsTheGatheredKvAndItsGradientOneLayerAtATime) {
  // 25 tokens a GPU over cp 4: the gathered K,V of the 100 tokens is 100 x 2 x 32 x 2 B = 12,800 B, held while the
  // forward's layer runs; in backward with the full-length dK,dV beside it, 25,600 B. Ring and zigzag hold only
  // their next block, nothing beyond their activations.
  const ParallelScheme scheme = cp_scheme(4);
  const CostModel all_gather = cost_of(CpAttention::AllGather);
  const auto exchanges = all_gather.cp_exchanges(kOneSharded, 25, scheme, 2, 0);
  ASSERT_EQ(exchanges.size(), 2u);
  EXPECT_DOUBLE_EQ(exchanges[0].buffer_bytes, 12800);
  EXPECT_DOUBLE_EQ(exchanges[1].buffer_bytes, 2 * 12800);
  EXPECT_DOUBLE_EQ(all_gather.cp_buffer_bytes(25, scheme, 2), 2 * 12800);
  EXPECT_EQ(all_gather.sharded_attention_bytes(kOneSharded, scheme, 2), 0.0);  // nothing kept between layers
  for (CpAttention mode : {CpAttention::Ring, CpAttention::Zigzag, CpAttention::Ulysses}) {
    EXPECT_EQ(cost_of(mode).cp_buffer_bytes(25, scheme, 2), 0.0);
    for (const auto& e : cost_of(mode).cp_exchanges(kOneSharded, 25, scheme, 2, 0)) EXPECT_EQ(e.buffer_bytes, 0.0);
  }
}

TEST(CostModelCpVariants, OnlyHeadTailVariantsDealPerSequenceChunks) {
  EXPECT_FALSE(head_tail_chunks(CpAttention::Ulysses));
  EXPECT_FALSE(head_tail_chunks(CpAttention::Ring));
  EXPECT_TRUE(head_tail_chunks(CpAttention::Zigzag));
  EXPECT_TRUE(head_tail_chunks(CpAttention::AllGather));
  for (CpAttention mode : kCpAttentionModes) EXPECT_EQ(shards_tokens(mode), mode != CpAttention::Ulysses);
}

}  // namespace cost_model_cp_variants_test
}  // namespace lcsim
