#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>
#include <stdexcept>

#include "base/errors.hpp"
#include "model/validator.hpp"
#include "policies/baselines/deepspeed.hpp"
#include "policies/baselines/packing.hpp"
#include "policies/baselines/sorted.hpp"
#include "tests/policy_test_fixtures.hpp"

namespace lcsim::baselines {
namespace baselines_test {

PolicySpec spec(const std::string& kind, nlohmann::json options = nlohmann::json::object()) {
  PolicySpec s;
  s.kind = kind;
  s.label = kind;
  s.options = std::move(options);
  s.file = "scenario.json";
  s.path = "policies[1]";
  return s;
}

PlanningContext context(const CostModel& cost, int dp, int cp, Tokens context_length = 0, std::uint64_t seed = 7) {
  PlanningContext c;
  c.cost = &cost;
  c.layout.dp = dp;
  c.layout.cp = cp;
  c.training.context_length = context_length;
  c.training.recompute = Recompute::Full;
  c.seed = seed;
  return c;
}

using testing::batch_of;
using testing::error_of;
using testing::ids;

TEST(BaselinesDeepSpeed, DealsRoundRobinOneShardedSequencePerMicroBatch) {
  const CostModel cost = testing::tiny_cost(1, 8, testing::tiny_profile(), 1e12);
  const std::vector<GlobalBatch> batches = {batch_of(0, {10, 20, 30, 40, 50}), batch_of(5, {60, 70})};
  auto policy = make_deepspeed_policy(spec("deepspeed"));
  EXPECT_EQ(policy->kind(), "deepspeed");
  EXPECT_TRUE(policy->keeps_global_batches());
  const auto plans = policy->plan(context(cost, 2, 4), batches);
  ASSERT_EQ(plans.size(), 2u);
  const auto& p = plans[0];
  ASSERT_EQ(p.replicas.size(), 2u);
  EXPECT_EQ(p.replicas[0].scheme, testing::scheme(1, 1, 4, Recompute::Full));
  EXPECT_EQ(p.replicas[1].gpus, (std::vector<int>{4, 5, 6, 7}));
  ASSERT_EQ(p.replicas[0].micro_batches.size(), 3u);
  ASSERT_EQ(p.replicas[1].micro_batches.size(), 2u);
  EXPECT_EQ(ids(p.replicas[0].micro_batches[1]), (std::vector<std::int64_t>{2}));
  EXPECT_EQ(ids(p.replicas[1].micro_batches[1]), (std::vector<std::int64_t>{3}));
  for (const auto& r : p.replicas) {
    EXPECT_FALSE(r.overlap_cp_comm);
    for (const auto& mb : r.micro_batches) EXPECT_TRUE(mb.placements.at(0).sharded());
  }
  for (std::size_t i = 0; i < plans.size(); ++i) {
    EXPECT_EQ(plans[i].index, static_cast<int>(i));
    const auto report = validate_plan(plans[i], batches[i], cost);
    EXPECT_TRUE(report.issues.empty()) << report.summary();
  }
}

TEST(BaselinesDeepSpeed, RejectsOptions) {
  const std::string message = error_of([] { make_deepspeed_policy(spec("deepspeed", {{"overlap", true}})); });
  EXPECT_NE(message.find("scenario.json: policies[1].options.overlap: unknown key"), std::string::npos) << message;
}

TEST(BaselinesSorted, SortsTheWindowIntoBatchSizedGroups) {
  const CostModel cost = testing::tiny_cost(1, 2, testing::tiny_profile(), 1e12);
  // Window lengths 50 10 40 | 20 30 sorted: 10 20 30 | 40 50 (group sizes 3 and 2, in a seeded order).
  const std::vector<GlobalBatch> batches = {batch_of(0, {50, 10, 40}), batch_of(3, {20, 30})};
  auto policy = make_sorted_policy(spec("sorted", {{"micro_batch_tokens", 1000}}));
  EXPECT_FALSE(policy->keeps_global_batches());
  const auto plans = policy->plan(context(cost, 1, 2), batches);
  ASSERT_EQ(plans.size(), 2u);
  std::set<std::vector<std::int64_t>> groups;
  for (const auto& plan : plans) {
    ASSERT_EQ(plan.replicas.size(), 1u);
    ASSERT_EQ(plan.replicas[0].micro_batches.size(), 1u);  // everything fits the 1000-token budget
    EXPECT_TRUE(plan.replicas[0].micro_batches[0].padded);
    groups.insert(ids(plan.replicas[0].micro_batches[0]));
    const auto report = validate_plan(plan, plan_sequences(plan), cost);
    EXPECT_TRUE(report.issues.empty()) << report.summary();
  }
  EXPECT_EQ(groups, (std::set<std::vector<std::int64_t>>{{1, 3, 4}, {2, 0}}));
  EXPECT_TRUE(validate_window(plans, batches).empty());
}

TEST(BaselinesSorted, MicroBatchesStayWithinThePaddedBudget) {
  const CostModel cost = testing::tiny_cost(1, 2, testing::tiny_profile(), 1e12);
  const std::vector<GlobalBatch> batches = {batch_of(0, {10, 20, 30, 35})};
  // Padded: 10 -> 1 x 10; + 20 -> 2 x 20 = 40; + 30 -> 3 x 30 = 90 > 60: {10, 20}, then {30} (+35: 70 > 60), {35}.
  auto plans = make_sorted_policy(spec("sorted", {{"micro_batch_tokens", 60}}))->plan(context(cost, 1, 2), batches);
  const auto& mbs = plans.at(0).replicas.at(0).micro_batches;
  ASSERT_EQ(mbs.size(), 3u);
  EXPECT_EQ(ids(mbs[0]), (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(ids(mbs[1]), (std::vector<std::int64_t>{2}));
  EXPECT_EQ(ids(mbs[2]), (std::vector<std::int64_t>{3}));
  // Unpadded: 10 + 20 + 30 = 60 fits; 35 alone.
  plans = make_sorted_policy(spec("sorted", {{"micro_batch_tokens", 60}, {"padded", false}}))
              ->plan(context(cost, 1, 2), batches);
  ASSERT_EQ(plans[0].replicas[0].micro_batches.size(), 2u);
  EXPECT_EQ(ids(plans[0].replicas[0].micro_batches[0]), (std::vector<std::int64_t>{0, 1, 2}));
  // Default budget: the context length (35 here), so 30 + 35 cannot share and neither can 20 + 30.
  plans = make_sorted_policy(spec("sorted", {{"padded", false}}))->plan(context(cost, 1, 2, 35), batches);
  EXPECT_EQ(plans[0].replicas[0].micro_batches.size(), 3u);
  // Two DP ranks: sorted 10 20 30 35 dealt 10 30 | 20 35.
  plans = make_sorted_policy(spec("sorted", {{"micro_batch_tokens", 1000}}))->plan(context(cost, 2, 1), batches);
  EXPECT_EQ(ids(plans[0].replicas[1].micro_batches.at(0)), (std::vector<std::int64_t>{1, 3}));
}

TEST(BaselinesSorted, SkrullsReadingKeepsOneSequencePerMicroBatch) {
  // Skrull Sec. 5 runs sorted batching with the DeepSpeed baseline's settings: sorting regroups the global
  // batches, every sequence is still its own micro-batch however much budget there is.
  const CostModel cost = testing::tiny_cost(1, 2, testing::tiny_profile(), 1e12);
  const std::vector<GlobalBatch> batches = {batch_of(0, {10, 20, 30, 35})};
  const auto plans =
      make_sorted_policy(spec("sorted", {{"micro_batch", "sequence"}}))->plan(context(cost, 1, 2, 1000), batches);
  const auto& mbs = plans.at(0).replicas.at(0).micro_batches;
  ASSERT_EQ(mbs.size(), 4u);
  for (std::size_t i = 0; i < mbs.size(); ++i) EXPECT_EQ(ids(mbs[i]), (std::vector<std::int64_t>{std::int64_t(i)}));
  EXPECT_THROW(make_sorted_policy(spec("sorted", {{"micro_batch", "pack"}})), InputError);
  EXPECT_THROW(make_sorted_policy(spec("sorted", {{"micro_batch", "sequence"}, {"micro_batch_tokens", 60}})),
               InputError);
}

TEST(BaselinesSorted, GroupOrderFollowsTheSeed) {
  const CostModel cost = testing::tiny_cost(1, 2, testing::tiny_profile(), 1e12);
  std::vector<GlobalBatch> batches;
  for (int b = 0; b < 12; ++b) batches.push_back(batch_of(b * 2, {100 - b, 200 + b}));
  auto policy = make_sorted_policy(spec("sorted"));
  auto labels = [&](std::uint64_t seed) {
    std::vector<std::string> result;
    for (const auto& p : policy->plan(context(cost, 1, 2, 1000, seed), batches)) result.push_back(p.label);
    return result;
  };
  EXPECT_EQ(labels(1), labels(1));
  EXPECT_NE(labels(1), labels(2));
  auto sorted = labels(1);
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end());
}

TEST(BaselinesPacking, PacksDealtToSpReplicas) {
  const CostModel cost = testing::tiny_cost(1, 8, testing::tiny_profile(), 1e12);
  std::vector<GlobalBatch> batches = {batch_of(0, {60, 50, 40, 30, 20, 10, 90, 80}), batch_of(8, {70, 100, 5})};
  // Layout dp 2 x cp 4 = 8 GPUs; sp 2 -> 4 replicas; 2 packs per replica -> 8 packs per iteration.
  auto policy = make_packing_policy(
      spec("packing", {{"algorithm", "ffd"}, {"packing_length_tokens", 100}, {"sp", 2}, {"packs_per_replica", 2}}));
  EXPECT_FALSE(policy->keeps_global_batches());
  const auto plans = policy->plan(context(cost, 2, 4), batches);
  // 555 tokens in packs of 100: FFD gives 6 packs -> one iteration.
  ASSERT_EQ(plans.size(), 1u);
  const auto& plan = plans[0];
  ASSERT_EQ(plan.replicas.size(), 4u);
  std::size_t packs = 0;
  for (const auto& r : plan.replicas) {
    EXPECT_EQ(r.scheme, testing::scheme(1, 1, 2, Recompute::Full));
    EXPECT_LE(r.micro_batches.size(), 2u);
    for (const auto& mb : r.micro_batches) {
      ++packs;
      EXPECT_LE(mb.tokens(), 100);
      EXPECT_FALSE(mb.padded);
      for (const auto& p : mb.placements) EXPECT_TRUE(p.sharded());
    }
  }
  EXPECT_EQ(packs, 6u);
  EXPECT_TRUE(validate_plan(plan, plan_sequences(plan), cost).issues.empty());
  EXPECT_TRUE(validate_window(plans, batches).empty());

  // One pack per replica: 6 packs over 4 replicas -> two iterations.
  const auto two =
      make_packing_policy(spec("packing", {{"algorithm", "ffd"}, {"packing_length_tokens", 100}, {"sp", 2}}))
          ->plan(context(cost, 2, 4), batches);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].replicas.size(), 4u);
  EXPECT_TRUE(two[1].replicas[3].micro_batches.empty());
  EXPECT_TRUE(validate_window(two, batches).empty());
}

TEST(BaselinesPacking, DefaultsAndDeterminism) {
  const CostModel cost = testing::tiny_cost(1, 4, testing::tiny_profile(), 1e12);
  std::vector<GlobalBatch> batches;
  Rng rng(5);
  for (int b = 0; b < 4; ++b) {
    GlobalBatch batch;
    for (int i = 0; i < 16; ++i) batch.push_back({b * 16 + i, 1 + static_cast<Tokens>(rng.below(512))});
    batches.push_back(batch);
  }
  auto policy = make_packing_policy(spec("packing"));  // ISF, packing length = context length, sp = layout cp
  const auto plans = policy->plan(context(cost, 2, 2, 512), batches);
  EXPECT_EQ(plans, policy->plan(context(cost, 2, 2, 512), batches));
  EXPECT_NE(plans, policy->plan(context(cost, 2, 2, 512, 8), batches));
  for (const auto& plan : plans) {
    ASSERT_EQ(plan.replicas.size(), 2u);
    EXPECT_EQ(plan.replicas[0].scheme.cp, 2);
    for (const auto& r : plan.replicas)
      for (const auto& mb : r.micro_batches) EXPECT_LE(mb.tokens(), 512);
  }
  EXPECT_TRUE(validate_window(plans, batches).empty());
}

TEST(BaselinesPacking, ErrorsNameTheOption) {
  const CostModel cost = testing::tiny_cost(1, 8, testing::tiny_profile(), 1e12);
  const std::vector<GlobalBatch> batches = {batch_of(0, {60, 150, 40})};
  std::string message = error_of([&] {
    make_packing_policy(spec("packing", {{"packing_length_tokens", 100}}))->plan(context(cost, 2, 4), batches);
  });
  EXPECT_NE(message.find("policies[1].options.packing_length_tokens: sequence 1 has 150 tokens"), std::string::npos)
      << message;
  message = error_of([&] { make_packing_policy(spec("packing"))->plan(context(cost, 2, 4, 100), batches); });
  // Without a packing length of its own, the data is too long for the context: the message says what fixes it.
  EXPECT_NE(message.find("dataset: sequence 1 has 150 tokens, more than training.context_length_tokens (100)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("set dataset.truncate_to_context"), std::string::npos) << message;
  EXPECT_EQ(message.find("packing_length_tokens"), std::string::npos) << message;
  message = error_of([&] { make_packing_policy(spec("packing", {{"algorithm", "spfhp"}})); });
  EXPECT_NE(message.find("policies[1].options.algorithm: unknown packing algorithm 'spfhp'"), std::string::npos)
      << message;
  EXPECT_NE(message.find("isf, ffd"), std::string::npos) << message;
  message = error_of([&] {
    make_packing_policy(spec("packing", {{"sp", 3}}))->plan(context(cost, 2, 4, 200), batches);
  });
  EXPECT_NE(message.find("policies[1].options.sp: 3"), std::string::npos) << message;
  message = error_of([&] { make_packing_policy(spec("packing", {{"isf_fill_threshold", 1.5}})); });
  EXPECT_NE(message.find("isf_fill_threshold: must be in (0, 1]"), std::string::npos) << message;
  message = error_of([&] { make_packing_policy(spec("packing", {{"packs_per_replica", 0}})); });
  EXPECT_NE(message.find("packs_per_replica: must be in [1"), std::string::npos) << message;
  message = error_of([&] { make_packing_policy(spec("packing", {{"algorithm", "isf"}, {"extra", 1}})); });
  EXPECT_NE(message.find("options.extra: unknown key"), std::string::npos) << message;
}

TEST(BaselinesRegistry, KnowsTheBaselinesAndRejectsUnknownKinds) {
  const auto kinds = policy_kinds();
  for (const char* kind : {"deepspeed", "sorted", "packing"}) {
    EXPECT_NE(std::find(kinds.begin(), kinds.end(), kind), kinds.end()) << kind;
    EXPECT_EQ(make_policy(spec(kind))->kind(), kind);
  }
  const std::string message = error_of([] { make_policy(spec("magic")); });
  EXPECT_NE(message.find("scenario.json: policies[1].kind: unknown policy kind 'magic'"), std::string::npos) << message;
  EXPECT_NE(message.find("deepspeed"), std::string::npos) << message;
  const std::string options = error_of([] { make_policy(spec("sorted", nlohmann::json::array())); });
  EXPECT_NE(options.find("policies[1].options: expected an object"), std::string::npos) << options;
}

TEST(BaselinesRegistry, RegisteredPoliciesJoinTheBuiltIns) {
  const std::string kind = "registry-test-deepspeed";
  const PolicyFactory factory = [](const PolicySpec& s) { return make_deepspeed_policy(s); };
  auto kinds = policy_kinds();
  if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) register_policy(kind, factory);  // once per process
  kinds = policy_kinds();
  EXPECT_EQ(kinds.back(), kind) << "registered kinds come after the built-in ones";
  EXPECT_EQ(make_policy(spec(kind))->kind(), "deepspeed");
  const std::string options = error_of([&] { make_policy(spec(kind, {{"overlap", true}})); });
  EXPECT_NE(options.find("options.overlap: unknown key"), std::string::npos) << options;
  EXPECT_THROW(register_policy(kind, factory), std::invalid_argument);
  EXPECT_THROW(register_policy("deepspeed", factory), std::invalid_argument);
  EXPECT_THROW(register_policy("", factory), std::invalid_argument);
  EXPECT_THROW(register_policy("registry-test-empty", nullptr), std::invalid_argument);
}

}  // namespace baselines_test
}  // namespace lcsim::baselines
