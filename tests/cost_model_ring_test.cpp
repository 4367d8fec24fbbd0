// Zigzag ring attention in the cost model (CostModelOptions::cp_attention = Zigzag: the balanced ring), hand-computed
// on a tiny model and a flat profile (peak 1 MFLOP/s, attention efficiency 0.5), then compared with Ulysses on the
// shipped H100 profile. The plain ring and all-gather CP: cost_model_cp_variants_test.cpp.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "base/errors.hpp"
#include "model/cost_model.hpp"
#include "tests/flat_profile_fixtures.hpp"

namespace lcsim {
namespace cost_model_ring_test {

using testing::flat_compute_profile;
using testing::single_segment;

ModelConfig tiny_model() {
  return testing::flat_tiny_model();
}

/// send_recv on NVLink: 1 us + bytes / `sendrecv_Bps`; all-to-all over 4: 1 us + bytes * 3/4 / 1 GB/s.
Profile flat_profile(double sendrecv_Bps) {
  Profile p = flat_compute_profile();
  p.collectives.push_back(single_segment(CollectiveOp::AllToAll, LinkClass::NvLink, 4, 1, 1));
  p.collectives.push_back(single_segment(CollectiveOp::SendRecv, LinkClass::NvLink, 2, 1, sendrecv_Bps / 1e9));
  return p;
}

ClusterSpec tiny_cluster() {
  return testing::flat_tiny_cluster(1, 8);
}

CostModel ring_cost(double sendrecv_Bps) {
  return CostModel(tiny_model(), tiny_cluster(), flat_profile(sendrecv_Bps),
                   CostModelOptions{.zero_stage = 2, .cp_attention = CpAttention::Zigzag});
}

ParallelScheme cp_scheme(int cp, int tp = 1) {
  ParallelScheme s;
  s.cp = cp;
  s.tp = tp;
  s.recompute = Recompute::None;
  return s;
}

// One 100-token sequence sharded over cp 4: 25 tokens per GPU (n), two chunks of 12.5 (h). Its K,V block:
// 25 * 2 * 32 * 2 B = 3200 B. Zigzag's forward steps, one layer: step 0 the rank's own chunks, a causal 25 x 25
// kernel of 25^2 / 2 pairs; steps 1..3 n x h or h x n, 25^2 / 2 pairs too. 4 x 64 FLOPs a pair at 0.5 MFLOP/s:
// 0.16 s a step, 0.64 s in all (2 * 100^2 * 64 / 4 FLOPs, the balanced quarter); backward 2.5 x, 0.4 s a step.
const std::vector<SequenceShare> kOneSharded{{100, 4}};
constexpr Tokens kTokensOnGpu = 25;
constexpr double kBlockBytes = 3200;
constexpr double kForwardBlock = 0.16;
constexpr double kBackwardBlock = 0.4;

TEST(CostModelRing, ZigzagStepsAreEqualAndSumToTheBalancedShare) {
  const CostModel cost = ring_cost(1e4);
  const auto steps = cost.cp_step_seconds(kOneSharded[0], 1);
  ASSERT_EQ(steps.size(), 4u);
  for (double step : steps) EXPECT_NEAR(step, kForwardBlock, 1e-12);
}

TEST(CostModelRing, ExchangesAreTheRingStepsBesideTheirBlocks) {
  const CostModel cost = ring_cost(1e4);
  const auto exchanges = cost.cp_exchanges(kOneSharded, kTokensOnGpu, cp_scheme(4), 2, 0);
  // Forward: step 0's transfer, then steps 1..2's (step 3 has none). Backward: K,V beside step 0, K,V + dK,dV
  // beside steps 1..2, the last dK,dV alone.
  ASSERT_EQ(exchanges.size(), 5u);
  const struct {
    CpExchange::Pass pass;
    double bytes, count, beside;
  } expected[] = {{CpExchange::Pass::Forward, kBlockBytes, 2, 2 * kForwardBlock},
                  {CpExchange::Pass::Forward, kBlockBytes, 4, 4 * kForwardBlock},
                  {CpExchange::Pass::Backward, kBlockBytes, 2, 2 * kBackwardBlock},
                  {CpExchange::Pass::Backward, 2 * kBlockBytes, 4, 4 * kBackwardBlock},
                  {CpExchange::Pass::Backward, kBlockBytes, 2, 0.0}};
  for (std::size_t e = 0; e < exchanges.size(); ++e) {
    EXPECT_EQ(exchanges[e].pass, expected[e].pass) << e;
    ASSERT_EQ(exchanges[e].calls.size(), 1u);
    EXPECT_EQ(exchanges[e].calls[0].op, CollectiveOp::SendRecv);
    EXPECT_EQ(exchanges[e].calls[0].group_size, 2);
    EXPECT_DOUBLE_EQ(exchanges[e].calls[0].bytes, expected[e].bytes) << e;
    EXPECT_DOUBLE_EQ(exchanges[e].calls[0].count, expected[e].count) << e;
    EXPECT_NEAR(exchanges[e].beside_s, expected[e].beside, 1e-12) << e;
  }
  // 2 (cp - 1) blocks a layer, as TransformerEngine's ring moves them.
  double backward_bytes = 0;
  for (const auto& e : exchanges)
    if (e.pass == CpExchange::Pass::Backward) backward_bytes += e.calls[0].bytes * e.calls[0].count;
  EXPECT_DOUBLE_EQ(backward_bytes, 2 * 2 * 3 * kBlockBytes);
}

TEST(CostModelRing, ExposedTimeIsWhatEachStepsTransferDoesNotHide) {
  // 10 kB/s: a step moves one block in 0.32 s, two in 0.64 s. Forward: 3 steps of 0.16 s exposed. Backward: step
  // 0 hides its block in 0.4 s, steps 1-2 expose 0.24 s each, the last dK,dV its 0.32 s whole.
  const CostModel cost = ring_cost(1e4);
  const double one = 1e-6 + kBlockBytes / 1e4;
  const double two = 1e-6 + 2 * kBlockBytes / 1e4;
  const double expected = 2 * (3 * (one - kForwardBlock) + 2 * (two - kBackwardBlock) + one);
  EXPECT_NEAR(cost.cp_comm_seconds(kOneSharded, kTokensOnGpu, cp_scheme(4), 2, LinkClass::NvLink), expected, 1e-12);
  EXPECT_NEAR(expected, 2.560012, 1e-9);
}

TEST(CostModelRing, TheLastGradientTransferIsExposedHoweverFastTheLink) {
  // 1 GB/s: every transfer beside a block hides (4.2 us beside 0.16 s), but the last dK,dV has nothing to hide
  // behind. A ring whose exchange is always hidden would charge 0 here.
  const CostModel cost = ring_cost(1e9);
  EXPECT_NEAR(cost.cp_comm_seconds(kOneSharded, kTokensOnGpu, cp_scheme(4), 2, LinkClass::NvLink),
              2 * (1e-6 + kBlockBytes / 1e9), 1e-15);
  ParallelScheme forward_only = cp_scheme(4);
  EXPECT_EQ(cost.cp_exchanges(kOneSharded, kTokensOnGpu, forward_only, 2, 0).size(), 5u);
}

TEST(CostModelRing, EachPassIsExposedOnItsOwn) {
  // 17.5 kB/s: a forward step (0.183 s) outlasts its 0.16 s block, a backward step of two blocks (0.366 s) hides
  // in its 0.4 s, the first (one block) too; the last dK,dV is exposed whole.
  const CostModel cost = ring_cost(1.75e4);
  const double one = 1e-6 + kBlockBytes / 1.75e4;
  EXPECT_LT(1e-6 + 2 * kBlockBytes / 1.75e4, kBackwardBlock);
  EXPECT_NEAR(cost.cp_comm_seconds(kOneSharded, kTokensOnGpu, cp_scheme(4), 2, LinkClass::NvLink),
              2 * 3 * (one - kForwardBlock) + 2 * one, 1e-12);
}

TEST(CostModelRing, CheckpointedLayersRunTheForwardRingAgain) {
  const CostModel cost = ring_cost(1e4);
  const double one = 1e-6 + kBlockBytes / 1e4;
  const double two = 1e-6 + 2 * kBlockBytes / 1e4;
  const double forward = 3 * (one - kForwardBlock);
  const double backward = 2 * (two - kBackwardBlock) + one;
  ParallelScheme scheme = cp_scheme(4);
  scheme.checkpointed_layers = 1;
  const auto exchanges = cost.cp_exchanges(kOneSharded, kTokensOnGpu, scheme, 2, 1);
  ASSERT_EQ(exchanges.size(), 7u);
  EXPECT_EQ(exchanges[2].pass, CpExchange::Pass::Backward);  // the recomputed forward runs in backward
  EXPECT_DOUBLE_EQ(exchanges[2].calls[0].bytes, kBlockBytes);
  EXPECT_DOUBLE_EQ(exchanges[2].calls[0].count, 1);
  EXPECT_DOUBLE_EQ(exchanges[3].calls[0].count, 2);
  EXPECT_NEAR(cost.cp_comm_seconds(kOneSharded, kTokensOnGpu, scheme, 2, LinkClass::NvLink), 3 * forward + 2 * backward,
              1e-12);
  scheme.checkpointed_layers = 0;
  scheme.recompute = Recompute::Full;
  EXPECT_NEAR(cost.cp_comm_seconds(kOneSharded, kTokensOnGpu, scheme, 2, LinkClass::NvLink), 4 * forward + 2 * backward,
              1e-12);
}

TEST(CostModelRing, TensorParallelismHalvesTheBlockAndTheAttention) {
  const CostModel cost = ring_cost(1e4);
  const auto exchanges = cost.cp_exchanges(kOneSharded, kTokensOnGpu, cp_scheme(4, 2), 1, 0);
  ASSERT_EQ(exchanges.size(), 5u);
  EXPECT_DOUBLE_EQ(exchanges[0].calls[0].bytes, kBlockBytes / 2);
  EXPECT_NEAR(exchanges[0].beside_s, kForwardBlock / 2, 1e-12);
  EXPECT_NEAR(exchanges[1].beside_s, 2 * kForwardBlock / 2, 1e-12);
  EXPECT_NEAR(exchanges[3].beside_s, 2 * kBackwardBlock / 2, 1e-12);
}

TEST(CostModelRing, BlockwiseKernelsRunAtTheEfficiencyOfTheirBlockLength) {
  Profile p = flat_profile(1e9);
  p.compute.attention_efficiency = Curve{{100, 10000}, {0.2, 0.6}, std::nullopt};  // 0.2 at 100, 0.4 at 1000
  const CostModel ring(tiny_model(), tiny_cluster(), p,
                       CostModelOptions{.zero_stage = 2, .cp_attention = CpAttention::Zigzag});
  const CostModel ulysses(tiny_model(), tiny_cluster(), p,
                          CostModelOptions{.zero_stage = 2, .cp_attention = CpAttention::Ulysses});
  // 1000 tokens over 10 ranks: 100 local tokens for the GEMMs. The ring's blocks: 1.28e8 / 10 attention FLOPs per
  // GPU at e(100) for step 0, e(50) = e(100) (the curve's floor) for the half blocks of the others. Ulysses: a rank
  // runs whole heads, so the 4 heads' busiest ranks run one each, 1.28e8 / 4, at e(1000).
  const std::vector<SequenceShare> sharded{{1000, 10}};
  const double gemm = 100 * 73728 / 1e6;
  const double flops = 2.0 * 1000 * 1000 * 64;
  EXPECT_NEAR(ulysses.layer_seconds(sharded, 1, Recompute::None, false, LayerGrad::Full),
              3 * gemm + 3.5 * flops / 4 / 0.4e6 + 10e-6, 1e-9);
  EXPECT_NEAR(ring.layer_seconds(sharded, 1, Recompute::None, false, LayerGrad::Full),
              3 * gemm + 3.5 * flops / 10 / 0.2e6 + 10e-6, 1e-9);
  // A whole sequence (cp 1) is the same in both modes.
  const std::vector<SequenceShare> whole{{1000, 1}};
  EXPECT_DOUBLE_EQ(ring.layer_seconds(whole, 1, Recompute::None, false, LayerGrad::Full),
                   ulysses.layer_seconds(whole, 1, Recompute::None, false, LayerGrad::Full));
}

TEST(CostModelRing, UlyssesIsOneExchangeOfAllToAllsThatNothingHides) {
  const CostModel cost(tiny_model(), tiny_cluster(), flat_profile(1e9));
  ASSERT_EQ(cost.options().cp_attention, CpAttention::Ulysses);
  const auto exchanges = cost.cp_exchanges(kOneSharded, 10, cp_scheme(4), 2, 1);
  ASSERT_EQ(exchanges.size(), 1u);
  EXPECT_EQ(exchanges[0].pass, CpExchange::Pass::Both);
  EXPECT_EQ(exchanges[0].beside_s, 0.0);
  EXPECT_EQ(exchanges[0].calls.size(), 2u);
  // 10 tokens: Q/O 1280 B, K/V 640 B, 4 of each per layer, all_to_all over 4: 1 us + size * 3/4 / 1 GB/s.
  const double q = 1e-6 + 1280 * 0.75 / 1e9;
  const double kv = 1e-6 + 640 * 0.75 / 1e9;
  EXPECT_NEAR(cost.cp_comm_seconds(kOneSharded, 10, cp_scheme(4), 2, LinkClass::NvLink), 2 * 2 * (2 * q + 2 * kv),
              1e-15);
}

TEST(CostModelRing, NothingShardedNothingExchanged) {
  const CostModel cost = ring_cost(1e4);
  EXPECT_TRUE(cost.cp_exchanges(kOneSharded, kTokensOnGpu, cp_scheme(1), 2, 0).empty());
  EXPECT_TRUE(cost.cp_exchanges({}, 0, cp_scheme(4), 2, 0).empty());
  EXPECT_TRUE(cost.cp_exchanges(kOneSharded, kTokensOnGpu, cp_scheme(4), 0, 0).empty());
  EXPECT_EQ(cost.cp_comm_seconds({}, 0, cp_scheme(4), 2, LinkClass::NvLink), 0.0);
  EXPECT_THROW(cost.cp_exchanges(kOneSharded, kTokensOnGpu, cp_scheme(4), 2, 3), std::invalid_argument);
}

TEST(CostModelRing, AProfileWithoutSendRecvIsAnInputErrorNamingIt) {
  Profile p = flat_profile(1e9);
  p.collectives.pop_back();  // the send_recv fit
  const CostModel cost(tiny_model(), tiny_cluster(), p,
                       CostModelOptions{.zero_stage = 2, .cp_attention = CpAttention::Zigzag});
  try {
    cost.cp_comm_seconds(kOneSharded, kTokensOnGpu, cp_scheme(4), 2, LinkClass::NvLink);
    ADD_FAILURE() << "ring attention needs the send_recv fit";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("send_recv"), std::string::npos) << e.what();
  }
}

TEST(CostModelRing, RingHidesBehindLongSequencesWhereUlyssesCannot) {
  ClusterSpec cluster;
  cluster.gpu = named_gpu("H100-SXM");
  cluster.nodes = 1;
  cluster.gpus_per_node = 8;
  cluster.nvlink_GBps = 450;  // the profile's network reference: its fits apply as they are
  cluster.nvlink_latency_us = 2;
  const Profile profile = load_profile(std::string(LCSIM_SOURCE_DIR) + "/calibrate/profiles/h100-sxm-default.json");
  const ModelConfig model = named_model("Qwen2.5-0.5B");
  const CostModel ring(model, cluster, profile, CostModelOptions{.zero_stage = 2, .cp_attention = CpAttention::Zigzag});
  const CostModel ulysses(model, cluster, profile,
                          CostModelOptions{.zero_stage = 2, .cp_attention = CpAttention::Ulysses});
  const ParallelScheme scheme = cp_scheme(8);
  const auto exposed = [&](const CostModel& cost, Tokens s) {
    const SequenceShare share{s, 8};
    return cost.cp_comm_seconds({&share, 1}, (s + 7) / 8, scheme, model.layers, LinkClass::NvLink);
  };
  // 64K tokens: attention dominates, the ring hides all but its last dK,dV transfer; Ulysses' all-to-alls hide
  // nothing and cost more.
  EXPECT_GT(exposed(ulysses, 65536), 0.0);
  EXPECT_LT(exposed(ring, 65536), exposed(ulysses, 65536));
  // 2K tokens: 256-token blocks are too short to hide the per-step latency; the ring is exposed.
  EXPECT_GT(exposed(ring, 2048), 0.0);
}

TEST(CostModelRing, ModeNames) {
  EXPECT_EQ(to_string(CpAttention::Ulysses), "ulysses");
  EXPECT_EQ(to_string(CpAttention::Ring), "ring");
  EXPECT_EQ(to_string(CpAttention::Zigzag), "zigzag");
  EXPECT_EQ(to_string(CpAttention::AllGather), "all-gather");
}

}  // namespace cost_model_ring_test
}  // namespace lcsim
