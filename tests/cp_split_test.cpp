// Per-sequence CP splitting (CpSplit::PerSequence, Llama-3's head-tail chunks of a whole pack) next to lcsim's
// per-document sharding, hand-computed: the chunks, the cost model's price of a chunk, the estimate's busiest rank
// and the validator's refusals.
#include <gtest/gtest.h>

#include "model/plan_demand.hpp"
#include "model/validator.hpp"
#include "program/estimate.hpp"
#include "tests/policy_test_fixtures.hpp"

namespace lcsim {
namespace cp_split_test {

using testing::micro_batch;
using testing::replica;
using testing::scheme;
using testing::sharded;

SequenceShare chunk(Tokens sequence, int cp, Tokens queries, Tokens offset) {
  return SequenceShare{sequence, cp, queries, offset};
}

TEST(CpSplit, HeadTailChunksOfAPack) {
  // [6, 2] over cp 2: four chunks of 2 tokens; rank 0 gets chunks 0 and 3, rank 1 chunks 1 and 2.
  const std::vector<Tokens> pack{6, 2};
  const auto ranks = head_tail_chunks(pack, 2);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0], (std::vector<SequenceShare>{chunk(6, 2, 2, 0), chunk(2, 2, 2, 0)}));
  EXPECT_EQ(ranks[1], (std::vector<SequenceShare>{chunk(6, 2, 2, 2), chunk(6, 2, 2, 4)}));
}

TEST(CpSplit, ChunksCutAtSequenceEndsAndUnevenTotals) {
  // [3, 5]: chunk 1 = [2, 4) holds the last token of the first sequence and the first of the second.
  const std::vector<Tokens> pack{3, 5};
  std::vector<std::vector<std::size_t>> owners;
  const auto ranks = head_tail_chunks(pack, 2, &owners);
  EXPECT_EQ(ranks[0], (std::vector<SequenceShare>{chunk(3, 2, 2, 0), chunk(5, 2, 2, 3)}));
  EXPECT_EQ(ranks[1], (std::vector<SequenceShare>{chunk(3, 2, 1, 2), chunk(5, 2, 1, 0), chunk(5, 2, 2, 1)}));
  EXPECT_EQ(owners, (std::vector<std::vector<std::size_t>>{{0, 1}, {0, 1, 1}}));
  // 7 tokens over 4 chunks: boundaries floor(7k/4) = 0, 1, 3, 5, 7.
  const std::vector<Tokens> odd{7};
  const auto uneven = head_tail_chunks(odd, 2);
  EXPECT_EQ(uneven[0], (std::vector<SequenceShare>{chunk(7, 2, 1, 0), chunk(7, 2, 2, 5)}));
  EXPECT_EQ(uneven[1], (std::vector<SequenceShare>{chunk(7, 2, 2, 1), chunk(7, 2, 2, 3)}));
}

TEST(CpSplit, CausalPairsOfAChunk) {
  EXPECT_DOUBLE_EQ(causal_pairs(2, 4), 2 * 4 + 3);  // c p + c (c + 1) / 2
  EXPECT_DOUBLE_EQ(causal_pairs(6, 0), 21);
}

CostModel ring_tiny_cost() {
  Profile p = testing::tiny_profile();
  // Free ring transfers: the estimate's difference between splits is then the busiest rank's compute alone.
  for (auto& fit : p.collectives)
    if (fit.op == CollectiveOp::SendRecv) fit.segments.front().latency_us = 0;
  return CostModel(testing::tiny_model(), testing::tiny_cluster(1, 2), std::move(p),
                   CostModelOptions{.zero_stage = 2, .cp_attention = CpAttention::Zigzag});
}

TEST(CpSplit, CostModelPricesAChunkFromItsOwnPairs) {
  const CostModel cost = ring_tiny_cost();
  // tiny_cost: GEMMs 3 x 1280 FLOPs a token at 1000 FLOP/s; attention 32 FLOPs a pair, backward 2.5x.
  // Chunk of 2 queries 4 tokens into a 6-token sequence: 11 pairs -> 3.5 x 32 x 11 / 1000 = 1.232 s; GEMMs 7.68 s.
  const std::vector<SequenceShare> one{chunk(6, 2, 2, 4)};
  EXPECT_NEAR(cost.layer_seconds(one, 1, Recompute::None, false, LayerGrad::Full), 7.68 + 1.232, 1e-12);
}

IterationPlan pack_plan(CpSplit split) {
  IterationPlan plan;
  MicroBatch mb = micro_batch({sharded(1, 6), sharded(2, 2)});
  mb.cp_split = split;
  plan.replicas = {replica(scheme(1, 1, 2), {0, 1}, {mb})};
  return plan;
}

TEST(CpSplit, EstimateWaitsForTheBusiestRank) {
  const CostModel cost = ring_tiny_cost();
  const double per_document = program::estimate_iteration(pack_plan(CpSplit::PerDocument), cost).seconds;
  const double per_sequence = program::estimate_iteration(pack_plan(CpSplit::PerSequence), cost).seconds;
  // Per document each rank runs 4 tokens and half of 6^2/2 + 2^2/2 = 20 pairs: attention 3.5 x 32 x 10 / 1000 =
  // 1.12 s a layer. Per sequence rank 1 holds the chunks at 2 and 4 of the 6-token sequence, 7 + 11 = 18 pairs:
  // 2.016 s a layer (rank 0: 3 + 3 pairs). Same tokens, same head: 2 layers x (2.016 - 1.12) = 1.792 s more.
  EXPECT_NEAR(per_sequence - per_document, 1.792, 1e-9);
}

TEST(CpSplit, ValidatorRefusesAPerSequenceSplitWithoutHeadTailChunks) {
  const CostModel ulysses = testing::tiny_cost();
  const std::vector<Sequence> batch{{1, 6}, {2, 2}};
  const ValidationReport report = validate_plan(pack_plan(CpSplit::PerSequence), batch, ulysses);
  EXPECT_FALSE(report.structurally_valid());
  EXPECT_NE(report.summary().find("needs head-tail chunks"), std::string::npos) << report.summary();
  // A plain ring keeps contiguous shards: no head-tail chunks to deal either.
  const CostModel zigzag = ring_tiny_cost();
  const CostModel plain(zigzag.model(), zigzag.cluster(), zigzag.profile(),
                        CostModelOptions{.zero_stage = 2, .cp_attention = CpAttention::Ring});
  const ValidationReport plain_report = validate_plan(pack_plan(CpSplit::PerSequence), batch, plain);
  EXPECT_FALSE(plain_report.structurally_valid());
  EXPECT_NE(plain_report.summary().find("not \"ring\""), std::string::npos) << plain_report.summary();
  EXPECT_TRUE(validate_plan(pack_plan(CpSplit::PerSequence), batch, ring_tiny_cost()).structurally_valid());
}

}  // namespace cp_split_test
}  // namespace lcsim
