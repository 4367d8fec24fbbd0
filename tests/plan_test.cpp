#include "model/plan.hpp"

#include <gtest/gtest.h>

#include "base/errors.hpp"
#include "policies/core/policy.hpp"
#include "tests/policy_test_fixtures.hpp"

namespace lcsim {
namespace plan_test {

using testing::micro_batch;
using testing::on_rank;
using testing::scheme;
using testing::sharded;

TEST(PlanStructure, MicroBatchTokensAndLongest) {
  const MicroBatch mb = micro_batch({on_rank(1, 300, 0), sharded(2, 1200), on_rank(3, 50, 1)});
  EXPECT_EQ(mb.tokens(), 1550);
  EXPECT_EQ(mb.longest(), 1200);
  EXPECT_EQ(MicroBatch{}.tokens(), 0);
  EXPECT_EQ(MicroBatch{}.longest(), 0);
}

TEST(PlanStructure, ReplicaGpuIndexIsStageCpTpMajor) {
  Replica r;
  r.scheme = scheme(/*tp=*/2, /*pp=*/2, /*cp=*/3);
  for (int g = 0; g < 12; ++g) r.gpus.push_back(100 + g);
  // index (stage * cp + cp_rank) * tp + tp_rank
  EXPECT_EQ(r.gpu(0, 0, 0), 100);
  EXPECT_EQ(r.gpu(0, 0, 1), 101);
  EXPECT_EQ(r.gpu(0, 2, 1), 105);
  EXPECT_EQ(r.gpu(1, 0, 0), 106);
  EXPECT_EQ(r.gpu(1, 1, 1), 109);
  EXPECT_EQ(r.gpu(1, 2, 1), 111);
}

TEST(PlanStructure, PlanTotalsAndPhases) {
  IterationPlan plan;
  plan.replicas = make_homogeneous_replicas(scheme(1, 1, 2), 2);
  plan.replicas[0].micro_batches = {micro_batch({sharded(1, 10), on_rank(2, 20, 1)}), micro_batch({sharded(3, 5)})};
  plan.replicas[1].micro_batches = {micro_batch({on_rank(4, 7, 0)})};
  EXPECT_EQ(plan.replicas[0].tokens(), 35);
  EXPECT_EQ(plan.tokens(), 42);
  EXPECT_EQ(plan.sequence_count(), 4u);
  EXPECT_EQ(plan.phase_count(), 1);
  plan.replicas[1].phase = 5;  // phases need not be dense
  EXPECT_EQ(plan.phase_count(), 2);
  EXPECT_EQ(IterationPlan{}.phase_count(), 0);
}

TEST(PlanStructure, HomogeneousReplicasTakeContiguousBlocks) {
  const auto replicas = make_homogeneous_replicas(scheme(2, 1, 4), 3);
  ASSERT_EQ(replicas.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    const auto& replica = replicas[static_cast<std::size_t>(r)];
    EXPECT_EQ(replica.scheme, scheme(2, 1, 4));
    ASSERT_EQ(replica.gpus.size(), 8u);
    for (int g = 0; g < 8; ++g) EXPECT_EQ(replica.gpus[static_cast<std::size_t>(g)], r * 8 + g);
    EXPECT_TRUE(replica.micro_batches.empty());
    EXPECT_EQ(replica.phase, 0);
    EXPECT_FALSE(replica.overlap_cp_comm);
  }
}

std::vector<Sequence> lengths(std::vector<Tokens> tokens) {
  std::vector<Sequence> sequences;
  for (std::size_t i = 0; i < tokens.size(); ++i) sequences.push_back({static_cast<std::int64_t>(i), tokens[i]});
  return sequences;
}

std::vector<std::vector<Tokens>> batch_tokens(const std::vector<GlobalBatch>& batches) {
  std::vector<std::vector<Tokens>> result;
  for (const auto& b : batches) {
    result.emplace_back();
    for (const auto& s : b) result.back().push_back(s.tokens);
  }
  return result;
}

TEST(PlanGlobalBatches, FixedSequenceCount) {
  TrainingConfig t;
  t.global_batch_sequences = 2;
  const auto seqs = lengths({5, 6, 7, 8, 9});
  EXPECT_EQ(batch_tokens(cut_global_batches(seqs, t, false)), (std::vector<std::vector<Tokens>>{{5, 6}, {7, 8}}));
  EXPECT_EQ(batch_tokens(cut_global_batches(seqs, t, true)), (std::vector<std::vector<Tokens>>{{5, 6}, {7, 8}, {9}}));
  EXPECT_EQ(cut_global_batches(seqs, t, false)[1][0].id, 2);
}

TEST(PlanGlobalBatches, TokenBudget) {
  TrainingConfig t;
  t.tokens_per_iteration = 10;
  // 4+5 fit, +3 would be 12; 3+7 = 10 exactly; 25 is over the budget and goes alone; 2 is a partial tail.
  const auto seqs = lengths({4, 5, 3, 7, 25, 2});
  EXPECT_EQ(batch_tokens(cut_global_batches(seqs, t, false)), (std::vector<std::vector<Tokens>>{{4, 5}, {3, 7}, {25}}));
  EXPECT_EQ(batch_tokens(cut_global_batches(seqs, t, true)),
            (std::vector<std::vector<Tokens>>{{4, 5}, {3, 7}, {25}, {2}}));
  // A tail that reaches the budget exactly is a full batch.
  EXPECT_EQ(batch_tokens(cut_global_batches(lengths({4, 6}), t, false)), (std::vector<std::vector<Tokens>>{{4, 6}}));
  // A lone over-budget tail too.
  EXPECT_EQ(batch_tokens(cut_global_batches(lengths({4, 6, 11}), t, false)),
            (std::vector<std::vector<Tokens>>{{4, 6}, {11}}));
}

TEST(PlanGlobalBatches, ExactlyOneRuleMustBeSet) {
  TrainingConfig t;
  const auto seqs = lengths({1});
  EXPECT_THROW(cut_global_batches(seqs, t, true), InputError);
  t.global_batch_sequences = 1;
  t.tokens_per_iteration = 1;
  EXPECT_THROW(cut_global_batches(seqs, t, true), InputError);
}

}  // namespace plan_test
}  // namespace lcsim
