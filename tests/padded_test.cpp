// The `padded` baseline (policies/baselines/padded.hpp): Hugging Face's padding collator and HBP Table 3's random
// batching. Times are hand-worked on the toy cost model of policy_test_fixtures.hpp (formulas there): one layer over
// a micro-batch of T tokens in whole sequences s is 3.84 T + 0.056 sum s^2 seconds, the head 1.536 T, and a token
// holds 32 bytes (2 layers x 8 hidden x 1 byte selective + 0.5 x 32 logits).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "base/errors.hpp"
#include "model/metrics.hpp"
#include "model/plan_demand.hpp"
#include "model/validator.hpp"
#include "policies/baselines/padded.hpp"
#include "program/estimate.hpp"
#include "studies/evaluation.hpp"
#include "tests/policy_test_fixtures.hpp"

namespace lcsim::baselines {
namespace padded_test {

constexpr double kTol = 1e-6;

PolicySpec spec(nlohmann::json options = nlohmann::json::object(), const std::string& kind = "padded") {
  PolicySpec s;
  s.kind = kind;
  s.label = kind;
  s.options = std::move(options);
  s.file = "scenario.json";
  s.path = "policies[1]";
  return s;
}

PlanningContext context(const CostModel& cost, int dp, int cp, std::uint64_t seed = 7) {
  PlanningContext c;
  c.cost = &cost;
  c.layout.dp = dp;
  c.layout.cp = cp;
  c.training.recompute = Recompute::Selective;
  c.seed = seed;
  return c;
}

using testing::error_of;
using testing::ids;

GlobalBatch sequences(const std::vector<Tokens>& tokens) {
  return testing::batch_of(0, tokens);
}

// 100, 300, 50 tokens, two per micro-batch, both micro-batches in one iteration on one GPU:
//   {100, 300} padded to {300, 300}: T = 600, sum s^2 = 180,000: 2 x (2304 + 10080) + 921.6 = 25689.6 s
//   {50}:                             T = 50,  sum s^2 = 2,500:    2 x (192 + 140)    + 76.8  =   740.8 s
// Unpadded the first would be T = 400, sum s^2 = 100,000: 2 x (1536 + 5600) + 614.4 = 14886.4 s.
TEST(PaddedPolicy, PadsEachMicroBatchToItsLongestAndPaysForIt) {
  const CostModel cost = testing::tiny_cost(1, 1, testing::tiny_profile(), 1e9);
  const std::vector<GlobalBatch> window = {sequences({100, 300, 50})};
  auto policy = make_padded_policy(spec({{"sequences_per_micro_batch", 2}, {"micro_batches_per_rank", 2}}));
  EXPECT_FALSE(policy->keeps_global_batches()) << "a count makes its own iterations";
  auto plans = policy->plan(context(cost, 1, 1), window);
  ASSERT_EQ(plans.size(), 1u);
  const Replica& r = plans[0].replicas.at(0);
  ASSERT_EQ(r.micro_batches.size(), 2u);
  EXPECT_EQ(ids(r.micro_batches[0]), (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(ids(r.micro_batches[1]), (std::vector<std::int64_t>{2}));
  for (const auto& mb : r.micro_batches) EXPECT_TRUE(mb.padded);
  EXPECT_EQ(split_work(r, r.micro_batches[0]).sharded_tokens, 600);  // 200 padding tokens computed
  EXPECT_EQ(split_work(r, r.micro_batches[1]).sharded_tokens, 50);

  const IterationEstimate padded = program::estimate_iteration(plans[0], cost);
  EXPECT_NEAR(padded.seconds, 25689.6 + 740.8, kTol);
  EXPECT_NEAR(padded.peak_bytes.at(0), 600 * 32, kTol);  // the padded micro-batch's activations
  // PR = padding / padded slots = 200 / 650.
  EXPECT_NEAR(compute_metrics(plans[0], padded, 1).pr, 200.0 / 650.0, 1e-12);

  IterationPlan unpadded = plans[0];
  for (auto& mb : unpadded.replicas[0].micro_batches) mb.padded = false;
  const IterationEstimate packed = program::estimate_iteration(unpadded, cost);
  EXPECT_NEAR(packed.seconds, 14886.4 + 740.8, kTol);
  EXPECT_NEAR(padded.seconds / packed.seconds, 26430.4 / 15627.2, 1e-12);  // padding costs 1.69x here

  // One micro-batch per rank per iteration: the same micro-batches, one iteration each.
  plans = make_padded_policy(spec({{"sequences_per_micro_batch", 2}, {"micro_batches_per_rank", 1}}))
              ->plan(context(cost, 1, 1), window);
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_NEAR(program::estimate_iteration(plans[0], cost).seconds, 25689.6, kTol);
  EXPECT_NEAR(program::estimate_iteration(plans[1], cost).seconds, 740.8, kTol);
}

TEST(PaddedPolicy, DealsLikeADistributedSamplerInDataOrder) {
  // dp 2, cp 4, two per micro-batch. By default an iteration is the scenario's global batch (here 4, then 3
  // sequences), sequence k to rank k % 2, each rank's share cut into micro-batches of 2 (accumulation when longer).
  const CostModel cost = testing::tiny_cost(1, 8, testing::tiny_profile(), 1e12);
  const std::vector<GlobalBatch> window = {sequences({10, 20, 30, 40}), {{4, 50}, {5, 60}, {6, 70}}};
  auto policy = make_padded_policy(spec({{"sequences_per_micro_batch", 2}}));
  EXPECT_TRUE(policy->keeps_global_batches());
  auto plans = policy->plan(context(cost, 2, 4), window);
  ASSERT_EQ(plans.size(), 2u);
  ASSERT_EQ(plans[0].replicas.size(), 2u);
  EXPECT_EQ(plans[0].replicas[0].scheme, testing::scheme(1, 1, 4, Recompute::Selective));
  EXPECT_EQ(plans[0].replicas[1].gpus, (std::vector<int>{4, 5, 6, 7}));
  const auto expect_dealt = [&](const std::vector<IterationPlan>& p) {
    EXPECT_EQ(ids(p[0].replicas[0].micro_batches.at(0)), (std::vector<std::int64_t>{0, 2}));
    EXPECT_EQ(ids(p[0].replicas[1].micro_batches.at(0)), (std::vector<std::int64_t>{1, 3}));
    EXPECT_EQ(ids(p[1].replicas[0].micro_batches.at(0)), (std::vector<std::int64_t>{4, 6}));
    EXPECT_EQ(ids(p[1].replicas[1].micro_batches.at(0)), (std::vector<std::int64_t>{5}));
    for (const auto& plan : p) {
      EXPECT_EQ(plan.replicas[0].micro_batches.size(), 1u);
      for (const auto& replica : plan.replicas)
        for (const auto& mb : replica.micro_batches)
          for (const auto& placement : mb.placements) EXPECT_TRUE(placement.sharded());
    }
  };
  expect_dealt(plans);
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const auto report = validate_plan(plans[i], window[i], cost);
    EXPECT_TRUE(report.issues.empty()) << report.summary();
  }
  // The same by count (2 ranks x 1 micro-batch x 2 sequences) on the window as one batch: 4, then the 3 left.
  const std::vector<GlobalBatch> one = {sequences({10, 20, 30, 40, 50, 60, 70})};
  plans = make_padded_policy(spec({{"sequences_per_micro_batch", 2}, {"micro_batches_per_rank", 1}}))
              ->plan(context(cost, 2, 4), one);
  ASSERT_EQ(plans.size(), 2u);
  expect_dealt(plans);
  EXPECT_TRUE(validate_window(plans, one).empty());
  // Two per rank per iteration: one iteration, rank 0 gets 0 2 | 4 6, rank 1 gets 1 3 | 5.
  plans = make_padded_policy(spec({{"sequences_per_micro_batch", 2}, {"micro_batches_per_rank", 2}}))
              ->plan(context(cost, 2, 4), one);
  ASSERT_EQ(plans.size(), 1u);
  ASSERT_EQ(plans[0].replicas[0].micro_batches.size(), 2u);
  EXPECT_EQ(ids(plans[0].replicas[0].micro_batches[1]), (std::vector<std::int64_t>{4, 6}));
  EXPECT_EQ(ids(plans[0].replicas[1].micro_batches[1]), (std::vector<std::int64_t>{5}));
  // A global batch longer than dp x N accumulates: 7 sequences on one rank are micro-batches of 2, 2, 2, 1.
  plans = make_padded_policy(spec({{"sequences_per_micro_batch", 2}}))->plan(context(cost, 1, 4), one);
  ASSERT_EQ(plans.size(), 1u);
  ASSERT_EQ(plans[0].replicas[0].micro_batches.size(), 4u);
  EXPECT_EQ(ids(plans[0].replicas[0].micro_batches[3]), (std::vector<std::int64_t>{6}));
}

TEST(PaddedPolicy, ShuffleIsRandomBatchingWithTheScenarioSeed) {
  const CostModel cost = testing::tiny_cost(1, 1, testing::tiny_profile(), 1e12);
  std::vector<Tokens> lengths;
  for (Tokens t = 1; t <= 64; ++t) lengths.push_back(t);
  const std::vector<GlobalBatch> window = {sequences(lengths)};
  const auto order = [&](std::uint64_t seed, bool shuffle) {
    const auto plans = make_padded_policy(spec({{"sequences_per_micro_batch", 4}, {"shuffle", shuffle}}))
                           ->plan(context(cost, 1, 1, seed), window);
    std::vector<std::int64_t> seen;
    for (const auto& plan : plans)
      for (const auto& mb : plan.replicas[0].micro_batches)
        for (auto id : ids(mb)) seen.push_back(id);
    EXPECT_TRUE(validate_window(plans, window).empty());
    return seen;
  };
  std::vector<std::int64_t> data_order(64);
  for (std::size_t i = 0; i < data_order.size(); ++i) data_order[i] = static_cast<std::int64_t>(i);
  EXPECT_EQ(order(7, false), data_order);
  EXPECT_EQ(order(8, false), data_order) << "data order does not depend on the seed";
  const auto shuffled = order(7, true);
  EXPECT_NE(shuffled, data_order);
  EXPECT_EQ(shuffled, order(7, true)) << "the same seed gives the same batches";
  EXPECT_NE(shuffled, order(8, true));
}

TEST(PaddedPolicy, PaddedActivationsRunOutOfMemoryWherePackedOnesFit) {
  // 15,000 bytes: {100, 300} unpadded holds 400 x 32 = 12,800; padded 600 x 32 = 19,200 does not fit.
  const CostModel cost = testing::tiny_cost(1, 1, testing::tiny_profile(), 15000);
  const std::vector<GlobalBatch> window = {sequences({100, 300})};
  const auto plans = make_padded_policy(spec({{"sequences_per_micro_batch", 2}}))->plan(context(cost, 1, 1), window);
  ASSERT_EQ(plans.size(), 1u);
  const IterationEstimate padded = program::estimate_iteration(plans[0], cost);
  EXPECT_NEAR(padded.peak_bytes.at(0), 19200, kTol);
  EXPECT_TRUE(padded.out_of_memory());
  EXPECT_EQ(estimate_peak_bytes(plans[0], cost), padded.peak_bytes);
  IterationPlan unpadded = plans[0];
  unpadded.replicas[0].micro_batches[0].padded = false;
  EXPECT_FALSE(program::estimate_iteration(unpadded, cost).out_of_memory());
  // One sequence per micro-batch pads nothing and fits (the larger holds 300 x 32 = 9,600 bytes).
  const auto single = make_padded_policy(spec({{"sequences_per_micro_batch", 1}, {"micro_batches_per_rank", 2}}))
                          ->plan(context(cost, 1, 1), window);
  ASSERT_EQ(single.size(), 1u);
  const IterationEstimate one = program::estimate_iteration(single[0], cost);
  EXPECT_NEAR(one.peak_bytes.at(0), 9600, kTol);
  EXPECT_FALSE(one.out_of_memory());
}

TEST(PaddedPolicy, DefaultsToEightSequencesAndRejectsBadOptions) {
  const CostModel cost = testing::tiny_cost(1, 1, testing::tiny_profile(), 1e12);
  std::vector<Tokens> lengths(20, 10);
  const auto plans = make_policy(spec())->plan(context(cost, 1, 1), std::vector<GlobalBatch>{sequences(lengths)});
  ASSERT_EQ(plans.size(), 1u);  // the one global batch, accumulated over micro-batches of 8 + 8 + 4
  const auto& micro_batches = plans[0].replicas[0].micro_batches;
  ASSERT_EQ(micro_batches.size(), 3u);
  EXPECT_EQ(micro_batches[0].placements.size(), 8u);
  EXPECT_EQ(micro_batches[2].placements.size(), 4u);

  std::string message = error_of([] { make_padded_policy(spec({{"sequences_per_micro_batch", 0}})); });
  EXPECT_NE(message.find("scenario.json: policies[1].options.sequences_per_micro_batch: must be in [1"),
            std::string::npos)
      << message;
  message = error_of([] { make_padded_policy(spec({{"micro_batches_per_rank", -1}})); });
  EXPECT_NE(message.find("micro_batches_per_rank: must be in [1"), std::string::npos) << message;
  message = error_of([] { make_padded_policy(spec({{"shuffle", "yes"}})); });
  EXPECT_NE(message.find("options.shuffle"), std::string::npos) << message;
  message = error_of([] { make_padded_policy(spec({{"padding", "longest"}})); });
  EXPECT_NE(message.find("options.padding: unknown key"), std::string::npos) << message;
}

TEST(PaddedPolicy, IsRegisteredWithItsTuneKnob) {
  const auto kinds = policy_kinds();
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "padded"), kinds.end());
  EXPECT_EQ(make_policy(spec())->kind(), "padded");
  const auto knobs = tune_knobs(spec(), TuneKnobContext{4096, std::nullopt});
  ASSERT_EQ(knobs.size(), 1u);
  EXPECT_EQ(knobs[0].path, "options.sequences_per_micro_batch");
}

// HBP Table 3's scenarios (scenarios/hbp/*-table3.json) plan without running out of memory and keep the table's
// structure: random batching pads at 4K (B = 3) and not at 32K and 128K (B = 1), packing never pads, sorting and
// packing beat random batching at every length, and random batching's DBR is at least twice the others'.
TEST(PaddedPolicy, HbpTableThreeScenariosKeepTheTablesStructure) {
  for (const int k : {4, 32, 128}) {
    const std::string file =
        std::string(LCSIM_SOURCE_DIR) + "/scenarios/hbp/llama3.1-8b-tulu3-" + std::to_string(k) + "k-table3.json";
    SCOPED_TRACE(file);
    const LoadedScenario loaded = load_and_prepare(file, 8);
    EXPECT_EQ(loaded.scenario.baseline, "random");
    const RunResults results = evaluate_plans(loaded, {});
    const auto by_label = [&](const std::string& label) -> const PolicyResult& {
      const auto it = std::find_if(results.policies.begin(), results.policies.end(),
                                   [&](const PolicyResult& p) { return p.label == label; });
      if (it == results.policies.end()) throw std::runtime_error("no policy " + label);
      return *it;
    };
    for (const auto& p : results.policies) EXPECT_EQ(p.oom_iterations, 0) << p.label;
    const PolicyResult& random = by_label("random");
    const PolicyResult& sorted = by_label("sorted");
    const PolicyResult& packing = by_label("isf-" + std::to_string(k) + "k");
    if (k == 4)
      EXPECT_GT(random.metrics.pr, 0.2);
    else
      EXPECT_EQ(random.metrics.pr, 0.0);
    EXPECT_EQ(packing.metrics.pr, 0.0);
    EXPECT_GT(sorted.tokens_per_s, random.tokens_per_s);
    EXPECT_GT(packing.tokens_per_s, random.tokens_per_s);
    EXPECT_GT(random.metrics.dbr, 0.3);
    EXPECT_GT(random.metrics.dbr, 2 * sorted.metrics.dbr);
    EXPECT_GT(random.metrics.dbr, 2 * packing.metrics.dbr);
  }
}

}  // namespace padded_test
}  // namespace lcsim::baselines
