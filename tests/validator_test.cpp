#include "model/validator.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>

#include "tests/policy_test_fixtures.hpp"

namespace lcsim {
namespace validator_test {

using testing::micro_batch;
using testing::on_rank;
using testing::replica;
using testing::scheme;
using testing::sharded;
using testing::tiny_cost;
using testing::tiny_profile;
using Kind = PlanIssue::Kind;

const std::vector<Sequence> kBatch = {{1, 10}, {2, 20}, {3, 5}};

/// A valid plan of kBatch on 2 nodes x 2 GPUs with room to spare (1 GB per GPU).
IterationPlan good_plan() {
  IterationPlan plan;
  plan.replicas = {replica(scheme(1, 1, 2), {0, 1}, {micro_batch({on_rank(1, 10, 0), sharded(2, 20)})}),
                   replica(scheme(1, 1, 2), {2, 3}, {micro_batch({on_rank(3, 5, 1)})})};
  return plan;
}

CostModel roomy_cost() {
  return tiny_cost(2, 2, tiny_profile(), 1e9, 4);
}

std::size_t count(const ValidationReport& report, Kind kind) {
  return static_cast<std::size_t>(
      std::count_if(report.issues.begin(), report.issues.end(), [&](const PlanIssue& i) { return i.kind == kind; }));
}

bool mentions(const ValidationReport& report, Kind kind, const std::string& text) {
  return std::any_of(report.issues.begin(), report.issues.end(),
                     [&](const PlanIssue& i) { return i.kind == kind && i.message.find(text) != std::string::npos; });
}

TEST(ValidatorPlan, AcceptsAValidPlan) {
  const auto report = validate_plan(good_plan(), kBatch, roomy_cost());
  EXPECT_TRUE(report.issues.empty()) << report.summary();
  EXPECT_TRUE(report.structurally_valid());
  EXPECT_FALSE(report.out_of_memory());
  EXPECT_EQ(report.peak_bytes.size(), 4u);
}

TEST(ValidatorPlan, MissingDuplicateAndUnknownSequences) {
  IterationPlan plan = good_plan();
  plan.replicas[1].micro_batches[0].placements = {on_rank(1, 10, 1), on_rank(9, 4, 0), on_rank(2, 21, 0)};
  const auto report = validate_plan(plan, kBatch, roomy_cost());
  EXPECT_TRUE(mentions(report, Kind::MissingSequence, "sequence 3 "));
  EXPECT_TRUE(mentions(report, Kind::DuplicateSequence, "sequence 1 "));
  EXPECT_TRUE(mentions(report, Kind::UnknownSequence, "sequence 9 "));
  EXPECT_TRUE(mentions(report, Kind::UnknownSequence, "sequence 2 (21 tokens)"));
  EXPECT_EQ(report.issues.size(), 4u) << report.summary();
  EXPECT_FALSE(report.structurally_valid());
}

TEST(ValidatorPlan, BadRanks) {
  IterationPlan plan = good_plan();
  plan.replicas[1].micro_batches[0].placements[0].cp_rank = 2;
  plan.replicas[0].micro_batches[0].placements[0].cp_rank = -2;
  const auto report = validate_plan(plan, kBatch, roomy_cost());
  EXPECT_EQ(count(report, Kind::BadRank), 2u) << report.summary();
  EXPECT_EQ(report.issues.size(), 2u) << report.summary();
}

TEST(ValidatorPlan, BadGpus) {
  IterationPlan plan = good_plan();
  plan.replicas[1].gpus = {1, 4};  // 1 is taken by replica 0 in the same phase; 4 is outside the cluster
  auto report = validate_plan(plan, kBatch, roomy_cost());
  EXPECT_TRUE(mentions(report, Kind::BadGpu, "GPU 1 is used more than once"));
  EXPECT_TRUE(mentions(report, Kind::BadGpu, "GPU index 4 outside"));
  EXPECT_EQ(report.issues.size(), 2u) << report.summary();

  plan.replicas[1].phase = 1;  // a later phase may reuse GPUs
  plan.replicas[1].gpus = {1, 0};
  EXPECT_TRUE(validate_plan(plan, kBatch, roomy_cost()).issues.empty());

  plan.replicas[1].gpus = {2, 3, 0};  // three GPUs for a 2-GPU scheme
  report = validate_plan(plan, kBatch, roomy_cost());
  EXPECT_TRUE(mentions(report, Kind::BadGpu, "has 3 GPUs, its scheme needs 2"));
}

TEST(ValidatorPlan, BadSchemes) {
  IterationPlan plan = good_plan();
  plan.replicas[0].scheme.cp = 0;
  auto report = validate_plan(plan, kBatch, roomy_cost());
  EXPECT_TRUE(mentions(report, Kind::BadScheme, "must be >= 1"));

  plan = good_plan();
  plan.replicas[1].scheme = scheme(1, 3, 1);  // 4 layers
  plan.replicas[1].gpus = {2, 3, 0};
  plan.replicas[1].phase = 1;
  plan.replicas[1].micro_batches[0].placements[0].cp_rank = 0;
  report = validate_plan(plan, kBatch, roomy_cost());
  EXPECT_TRUE(mentions(report, Kind::BadScheme, "pp 3 does not divide the model's 4 layers"));
  EXPECT_EQ(report.issues.size(), 1u) << report.summary();

  plan = good_plan();
  plan.replicas[1].scheme = scheme(2, 1, 1);  // TP pair across the two nodes
  plan.replicas[1].gpus = {1, 2};
  plan.replicas[1].phase = 1;
  plan.replicas[1].micro_batches[0].placements[0].cp_rank = 0;
  report = validate_plan(plan, kBatch, roomy_cost());
  EXPECT_TRUE(mentions(report, Kind::BadScheme, "spans more than one node"));
  EXPECT_EQ(report.issues.size(), 1u) << report.summary();

  plan.replicas[1].gpus = {2, 3};  // within node 1
  EXPECT_TRUE(validate_plan(plan, kBatch, roomy_cost()).issues.empty());

  plan.replicas[1].scheme.checkpointed_layers = 5;
  EXPECT_TRUE(mentions(validate_plan(plan, kBatch, roomy_cost()), Kind::BadScheme, "checkpointed_layers 5"));
  plan.replicas[1].scheme.checkpointed_layers = -1;  // the peak estimate skips what the cost model cannot take
  EXPECT_TRUE(mentions(validate_plan(plan, kBatch, roomy_cost()), Kind::BadScheme, "checkpointed_layers -1"));
}

TEST(ValidatorPlan, EmptyMicroBatch) {
  IterationPlan plan = good_plan();
  plan.replicas[1].micro_batches.push_back(MicroBatch{});
  const auto report = validate_plan(plan, kBatch, roomy_cost());
  EXPECT_TRUE(mentions(report, Kind::EmptyMicroBatch, "replica 1, micro-batch 1"));
  EXPECT_FALSE(report.structurally_valid());
  // A replica with no micro-batches at all is fine (it only joins the gradient sync).
  plan.replicas[1].micro_batches = {};
  plan.replicas[0].micro_batches[0].placements.push_back(on_rank(3, 5, 1));
  EXPECT_TRUE(validate_plan(plan, kBatch, roomy_cost()).issues.empty());
}

TEST(ValidatorPlan, OutOfMemoryNamesGpuAndPeak) {
  // 4 layers x 8 + 16 = 48 bytes per token: GPU 0 holds 10 + 10 tokens = 960 bytes over the 500 available.
  const CostModel small = tiny_cost(2, 2, tiny_profile(), 500, 4);
  const auto report = validate_plan(good_plan(), kBatch, small);
  EXPECT_TRUE(report.structurally_valid()) << report.summary();
  EXPECT_TRUE(report.out_of_memory());
  EXPECT_EQ(count(report, Kind::OutOfMemory), 1u) << report.summary();
  EXPECT_TRUE(mentions(report, Kind::OutOfMemory, "GPU 0: estimated peak 0.00 GiB exceeds the usable 0.00 GiB"));
  EXPECT_DOUBLE_EQ(report.peak_bytes[0], 960);
  EXPECT_DOUBLE_EQ(report.peak_bytes[1], 480);
}

TEST(ValidatorPlan, StructureCheckIsTheReportLessItsMemory) {
  // What planning checks: the same structural issues in the same order, and no memory verdict (the replay's).
  IterationPlan plan = good_plan();
  plan.replicas[1].micro_batches[0].placements = {on_rank(1, 10, 1), on_rank(9, 4, 0)};
  const CostModel small = tiny_cost(2, 2, tiny_profile(), 500, 4);
  const ValidationReport report = validate_plan(plan, kBatch, small);
  ASSERT_TRUE(report.out_of_memory()) << report.summary();
  std::vector<PlanIssue> structural;
  std::copy_if(report.issues.begin(), report.issues.end(), std::back_inserter(structural),
               [](const PlanIssue& i) { return i.kind != Kind::OutOfMemory; });
  const std::vector<PlanIssue> checked = check_plan_structure(plan, kBatch, small);
  ASSERT_EQ(checked.size(), structural.size());
  ASSERT_GE(checked.size(), 3u);  // sequence 3 missing, 1 duplicated, 9 unknown
  for (std::size_t i = 0; i < checked.size(); ++i) {
    EXPECT_EQ(checked[i].kind, structural[i].kind);
    EXPECT_EQ(checked[i].message, structural[i].message);
  }
  EXPECT_TRUE(check_plan_structure(good_plan(), kBatch, small).empty());
}

TEST(ValidatorPlan, SummaryListsEveryIssue) {
  IterationPlan plan = good_plan();
  plan.replicas[1].micro_batches[0].placements.clear();
  const auto report = validate_plan(plan, kBatch, roomy_cost());
  EXPECT_EQ(report.issues.size(), 2u);  // sequence 3 missing, empty micro-batch
  const std::string summary = report.summary();
  EXPECT_EQ(std::count(summary.begin(), summary.end(), '\n'), 2);
}

TEST(ValidatorWindow, EverySequenceOnceAcrossPlans) {
  const std::vector<GlobalBatch> window = {{{1, 10}, {2, 20}}, {{3, 5}}};
  IterationPlan a = good_plan();
  a.replicas[1].micro_batches.clear();
  IterationPlan b;
  b.index = 1;
  b.replicas = {replica(scheme(1, 1, 1), {0}, {micro_batch({on_rank(3, 5, 0)})})};
  EXPECT_EQ(plan_sequences(a), (std::vector<Sequence>{{1, 10}, {2, 20}}));
  EXPECT_TRUE(validate_window(std::vector<IterationPlan>{a, b}, window).empty());

  const auto issues = validate_window(std::vector<IterationPlan>{a, a}, window);
  ASSERT_EQ(issues.size(), 3u);
  EXPECT_EQ(issues[0].kind, Kind::DuplicateSequence);
  EXPECT_EQ(issues[1].kind, Kind::DuplicateSequence);
  EXPECT_EQ(issues[2].kind, Kind::MissingSequence);
}

}  // namespace validator_test
}  // namespace lcsim
