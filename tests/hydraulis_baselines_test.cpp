// Hydraulis's baselines: megatron, deepspeed-ulysses, hotspa.
#include <gtest/gtest.h>

#include <map>

#include "base/errors.hpp"
#include "model/plan_demand.hpp"
#include "model/validator.hpp"
#include "policies/baselines/hotspa.hpp"
#include "program/estimate.hpp"
#include "tests/policy_test_fixtures.hpp"

namespace lcsim::baselines {
namespace hydraulis_baselines_test {

struct Bench {
  CostModel cost = testing::plausible_cost(named_model("LLaMA2-7B"), 2);  // 16 GPUs
  PlanningContext context;
  std::vector<GlobalBatch> batches;

  explicit Bench(ParallelLayout layout = {4, 1, 2, 2}) {
    context.cost = &cost;
    context.layout = layout;
    context.training.tokens_per_iteration = 100000;
    context.training.context_length = 32 * kKiloTokens;
    context.seed = 9;
    const auto& d = named_distribution("commoncrawl");
    const Dataset data = sample_dataset("commoncrawl", {MixComponent{&d, 1.0}}, 3000, 4);
    batches = cut_global_batches(data.sequences(), context.training, false);
    batches.resize(4);
  }
};

std::unique_ptr<Policy> make(const std::string& kind, const std::string& options = "{}") {
  PolicySpec spec;
  spec.kind = kind;
  spec.label = kind;
  spec.options = nlohmann::json::parse(options);
  spec.file = "test.json";
  spec.path = "policies[1]";
  return make_policy(spec);
}

void expect_valid(const std::vector<IterationPlan>& plans, const Bench& s) {
  ASSERT_EQ(plans.size(), s.batches.size());
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const auto report = validate_plan(plans[i], s.batches[i], s.cost);
    EXPECT_TRUE(report.structurally_valid()) << report.summary();
  }
}

TEST(HydraulisBaselines, MegatronPacksToTheContextAndDealsEvenly) {
  Bench s;
  const auto plans = make("megatron")->plan(s.context, s.batches);
  expect_valid(plans, s);
  for (const auto& plan : plans) {
    ASSERT_EQ(plan.replicas.size(), 4u);  // DP4 x TP2 x PP2 from the layout
    std::size_t fewest = SIZE_MAX, most = 0;
    Tokens packed = 0;
    for (const auto& r : plan.replicas) {
      EXPECT_EQ(r.scheme.tp, 2);
      EXPECT_EQ(r.scheme.pp, 2);
      EXPECT_EQ(r.scheme.cp, 1);
      fewest = std::min(fewest, r.micro_batches.size());
      most = std::max(most, r.micro_batches.size());
      for (const auto& mb : r.micro_batches) {
        EXPECT_LE(mb.tokens(), 32 * kKiloTokens);
        packed += mb.tokens();
        for (const auto& p : mb.placements) EXPECT_EQ(p.cp_rank, Placement::kSharded);
      }
    }
    EXPECT_LE(most - fewest, 1u);  // even dispatch of the packs
    EXPECT_EQ(packed, plan.tokens());
    EXPECT_NE(plan.label.find("DP4TP2PP2"), std::string::npos) << plan.label;
  }
  // FFD to 32K: ~100K tokens need at least 4 packs.
  std::size_t packs = 0;
  for (const auto& r : plans[0].replicas) packs += r.micro_batches.size();
  EXPECT_GE(packs, 4u);

  const auto tp8 =
      make("megatron", R"({"tp": 8, "pp": 1, "packing_length_tokens": 16384})")->plan(s.context, s.batches);
  EXPECT_EQ(tp8[0].replicas.size(), 2u);
  for (const auto& r : tp8[0].replicas)
    for (const auto& mb : r.micro_batches) EXPECT_LE(mb.tokens(), 16384);
}

TEST(HydraulisBaselines, MegatronErrors) {
  Bench s;
  EXPECT_THROW(make("megatron", R"({"sp": 2})"), InputError);
  EXPECT_THROW(make("megatron", R"({"algorithm": "magic"})"), InputError);
  EXPECT_THROW(make("megatron", R"({"tp": 3})")->plan(s.context, s.batches), InputError);  // 16 % 3
  try {
    make("megatron", R"({"packing_length_tokens": 100})")->plan(s.context, s.batches);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("test.json: policies[1].options.packing_length_tokens"), std::string::npos)
        << e.what();
  }
}

TEST(HydraulisBaselines, UlyssesShardsPacksOverTheSpGroup) {
  Bench s({4, 4, 1, 1});
  const auto plans = make("deepspeed-ulysses", R"({"sp": 8, "recompute": "full"})")->plan(s.context, s.batches);
  expect_valid(plans, s);
  ASSERT_EQ(plans[0].replicas.size(), 2u);
  for (const auto& r : plans[0].replicas) {
    EXPECT_EQ(r.scheme.cp, 8);
    EXPECT_EQ(r.scheme.tp, 1);
    EXPECT_EQ(r.scheme.recompute, Recompute::Full);
  }
  const auto layout = make("deepspeed-ulysses")->plan(s.context, s.batches);
  ASSERT_EQ(layout[0].replicas.size(), 4u);
  EXPECT_EQ(layout[0].replicas[0].scheme.cp, 4);
}

TEST(HydraulisBaselines, HotSpaDefaultStrategiesHalveTheModelParallelWidth) {
  ParallelScheme layout;
  layout.tp = 4;
  layout.pp = 2;
  const auto strategies = default_hotspa_strategies(layout, 32, 32768);
  ASSERT_EQ(strategies.size(), 3u);
  EXPECT_EQ(strategies[0].max_tokens, 32768);
  EXPECT_EQ(strategies[1].scheme.tp, 2);
  EXPECT_EQ(strategies[1].max_tokens, 16384);
  EXPECT_EQ(strategies[2].scheme.tp, 1);
  EXPECT_EQ(strategies[2].scheme.pp, 2);
  EXPECT_EQ(strategies[2].max_tokens, 4096);
  ParallelScheme sp;
  sp.cp = 8;
  EXPECT_EQ(default_hotspa_strategies(sp, 32, 131072)[2].scheme.cp, 2);
  // Nothing to halve: one strategy for everything.
  EXPECT_EQ(default_hotspa_strategies(ParallelScheme{}, 32, 32768).size(), 1u);
  // PP 3 of 60 layers: the half would not divide the layers.
  ParallelScheme odd;
  odd.pp = 3;
  EXPECT_EQ(default_hotspa_strategies(odd, 60, 32768).size(), 1u);
}

TEST(HydraulisBaselines, HotSpaRunsBucketsAsPhasesAndPaysTheSwitches) {
  Bench s;
  const std::string options = R"({"strategies": [{"tp": 4, "pp": 2, "max_tokens": 32768},
                                                 {"tp": 2, "pp": 2, "max_tokens": 16384},
                                                 {"tp": 1, "max_tokens": 4096}]})";
  GlobalBatch batch{{1, 30000}, {2, 10000}, {3, 12000}, {4, 900}, {5, 4096}, {6, 4097}};
  std::vector<GlobalBatch> batches{batch, batch};
  const auto plans = make("hotspa", options)->plan(s.context, batches);
  ASSERT_EQ(plans.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(validate_plan(plans[i], batch, s.cost).structurally_valid());
    EXPECT_EQ(plans[i].phase_count(), 3);
    std::map<std::int64_t, std::pair<int, int>> where;  // sequence -> (phase, tp)
    for (const auto& r : plans[i].replicas)
      for (const auto& mb : r.micro_batches)
        for (const auto& p : mb.placements) where[p.sequence_id] = {r.phase, r.scheme.tp};
    EXPECT_EQ(where[1].second, 4);
    EXPECT_EQ(where[2].second, 2);
    EXPECT_EQ(where[3].second, 2);
    EXPECT_EQ(where[6].second, 2);
    EXPECT_EQ(where[4].second, 1);
    EXPECT_EQ(where[5].second, 1);
    // Even iterations run the strategies in the given order, odd ones in reverse: no switch between iterations.
    EXPECT_EQ(where[1].first, i == 0 ? 0 : 2);
    EXPECT_EQ(where[4].first, i == 0 ? 2 : 0);
  }
  EXPECT_NE(plans[0].label.find("DP2TP4PP2 -> DP4TP2PP2 -> DP16"), std::string::npos) << plans[0].label;

  // The estimate prices the two switches: hot_switch_us_per_mparam x the new phase's parameters per GPU.
  Profile free_switch = testing::plausible_profile();
  free_switch.compute.hot_switch_us_per_mparam = 0;
  const CostModel no_switch(s.cost.model(), s.cost.cluster(), free_switch);
  ParallelScheme p2, p1;
  p2.tp = 2;
  p2.pp = 2;
  const double expected = s.cost.profile().compute.hot_switch_us_per_mparam * 1e-12 *
                          (s.cost.parameters_per_gpu(p2) + s.cost.parameters_per_gpu(p1));
  EXPECT_NEAR(
      program::estimate_iteration(plans[0], s.cost).seconds - program::estimate_iteration(plans[0], no_switch).seconds,
      expected, 1e-9);
}

TEST(HydraulisBaselines, HotSpaErrors) {
  Bench s;
  EXPECT_THROW(make("hotspa", R"({"strategies": [{"tp": 2, "max_tokens": 100}, {"tp": 1, "max_tokens": 100}]})"),
               InputError);
  EXPECT_THROW(make("hotspa", R"({"strategies": [{"tp": 2}]})"), InputError);
  EXPECT_THROW(make("hotspa", R"({"strategies": [{"tp": 2, "max_tokens": 100, "dp": 2}]})"), InputError);
  EXPECT_THROW(make("hotspa", R"({"strategies": [{"tp": 2, "max_tokens": 4096}]})")->plan(s.context, s.batches),
               InputError);  // commoncrawl has longer sequences
  EXPECT_THROW(make("hotspa", R"({"strategies": [{"tp": 3, "max_tokens": 40000}]})")->plan(s.context, s.batches),
               InputError);
  const auto plans = make("hotspa")->plan(s.context, s.batches);  // defaults from the layout
  expect_valid(plans, s);
}

}  // namespace hydraulis_baselines_test
}  // namespace lcsim::baselines
