// The hydraulis policy end to end: plans, the plan mapping, determinism, options.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>

#include "base/errors.hpp"
#include "model/plan_demand.hpp"
#include "model/validator.hpp"
#include "policies/hydraulis/dispatch.hpp"
#include "policies/hydraulis/hydraulis_policy.hpp"
#include "policies/hydraulis/hydraulis_view.hpp"
#include "policies/hydraulis/proposal.hpp"
#include "program/estimate.hpp"
#include "tests/policy_test_fixtures.hpp"

namespace lcsim::hydraulis {
namespace hydraulis_policy_test {

struct Bench {
  CostModel cost = testing::plausible_cost(named_model("LLaMA2-7B"), 2);  // 16 GPUs
  PlanningContext context;
  std::vector<GlobalBatch> batches;

  explicit Bench(std::uint64_t seed = 3, Tokens tokens_per_iteration = 60000, int iterations = 4) {
    context.cost = &cost;
    context.layout.dp = 16;
    context.training.tokens_per_iteration = tokens_per_iteration;
    context.training.context_length = 32 * kKiloTokens;
    context.seed = seed;
    const auto& d = named_distribution("github");
    const Dataset data = sample_dataset("github", {MixComponent{&d, 1.0}}, 2000, seed);
    batches = cut_global_batches(data.sequences(), context.training, false);
    batches.resize(static_cast<std::size_t>(iterations));
  }
};

PolicySpec hydraulis_spec(nlohmann::json options = nlohmann::json::object()) {
  PolicySpec spec;
  spec.kind = "hydraulis";
  spec.label = "hydraulis";
  spec.options = std::move(options);
  spec.file = "test.json";
  spec.path = "policies[0]";
  return spec;
}

std::unique_ptr<Policy> hydraulis(nlohmann::json options = nlohmann::json::object()) {
  return make_policy(hydraulis_spec(std::move(options)));
}

TEST(HydraulisPolicy, DispatchAndPackingBoundsNeverExceedTheEstimate) {
  // The selection skips a finalist once its dispatch objective, or a pipeline's packing_lower_bound plus sync,
  // reaches the estimate of a plan that fits: both must be lower bounds of the two-stage estimate.
  Bench s(5, 60000, 6);
  auto policy = hydraulis();
  policy->plan(s.context, s.batches);
  const auto& candidates = dynamic_cast<const HydraulisPolicy&>(*policy).candidates();
  ASSERT_GT(candidates.size(), 1U);
  const SchemeSpace space(s.cost, 16, SpaceOptions{});
  const HydraulisOptions options;
  int checked = 0;
  for (std::size_t b = 0; b < s.batches.size(); ++b) {
    std::vector<Tokens> lengths;
    for (const auto& seq : s.batches[b]) lengths.push_back(seq.tokens);
    for (const auto& candidate : candidates) {
      const auto pipelines = lay_out(candidate, space);
      std::vector<std::size_t> schemes;
      for (const auto& p : pipelines) schemes.push_back(p.scheme);
      const DispatchResult dispatched = dispatch(lengths, schemes, space, options.trials, b);
      const Assignment a = assign(lengths, pipelines, space, options, b);
      EXPECT_LE(dispatched.objective, a.estimate * (1 + 1e-12));
      for (std::size_t p = 0; p < pipelines.size(); ++p) {
        std::vector<Tokens> sub;
        for (std::size_t i : dispatched.per_pipeline[p]) sub.push_back(lengths[i]);
        EXPECT_LE(packing_lower_bound(sub, space[pipelines[p].scheme]) + space[pipelines[p].scheme].sync,
                  a.estimate * (1 + 1e-12));
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 10);
}

TEST(HydraulisPolicy, AssignBelowGivesUpOnlyWhereTheEstimateReachesTheCutoff) {
  // The selection drops a finalist when assign_below gives up: at a cutoff, it must give the full assignment
  // whenever the estimate is below the cutoff, and may give up only when it is not.
  Bench s(7, 60000, 3);
  auto policy = hydraulis();
  policy->plan(s.context, s.batches);
  const auto& candidates = dynamic_cast<const HydraulisPolicy&>(*policy).candidates();
  const SchemeSpace space(s.cost, 16, SpaceOptions{});
  const HydraulisOptions options;
  int kept = 0;
  int gave_up = 0;
  for (std::size_t b = 0; b < s.batches.size(); ++b) {
    std::vector<Tokens> lengths;
    for (const auto& seq : s.batches[b]) lengths.push_back(seq.tokens);
    for (const auto& candidate : candidates) {
      const auto pipelines = lay_out(candidate, space);
      const Assignment full = assign(lengths, pipelines, space, options, b);
      for (const double factor : {0.9, 0.999, 1.0, 1.001, 1.2}) {
        const double cutoff = full.estimate * factor;
        const auto cut = assign_below(lengths, pipelines, space, options, b, cutoff);
        if (full.estimate < cutoff) {
          ASSERT_TRUE(cut.has_value());
          EXPECT_EQ(cut->estimate, full.estimate);
          EXPECT_EQ(cut->micro_batches, full.micro_batches);
          ++kept;
        } else {
          EXPECT_FALSE(cut.has_value());
          ++gave_up;
        }
      }
    }
  }
  EXPECT_GT(kept, 10);
  EXPECT_GT(gave_up, 10);
}

TEST(HydraulisPolicy, PlansAreValidHeterogeneousPipelines) {
  Bench s;
  auto policy = hydraulis();
  ASSERT_TRUE(policy->keeps_global_batches());
  const auto plans = policy->plan(s.context, s.batches);
  ASSERT_EQ(plans.size(), s.batches.size());
  const auto& chosen = dynamic_cast<const HydraulisPolicy&>(*policy).choices();
  const SchemeSpace space(s.cost, 16, SpaceOptions{});
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const auto report = validate_plan(plans[i], s.batches[i], s.cost);
    EXPECT_TRUE(report.structurally_valid()) << report.summary();
    EXPECT_FALSE(report.out_of_memory()) << report.summary();  // micro-batches within MaxLen fit the estimate too
    EXPECT_NE(plans[i].label.find(chosen[i].strategy.describe(space)), std::string::npos) << plans[i].label;
    double estimate = 0;
    for (const auto& r : plans[i].replicas) {
      EXPECT_EQ(r.scheme.cp, 1);
      EXPECT_EQ(r.phase, 0);
      const auto k = space.find(r.scheme.tp, r.scheme.pp);
      ASSERT_TRUE(k);
      // The two-stage estimate is Eq. 1's objective of the plan's own micro-batches.
      std::vector<Tokens> lengths;
      std::vector<std::vector<std::size_t>> micro_batches;
      for (const auto& mb : r.micro_batches) {
        micro_batches.emplace_back();
        for (const auto& p : mb.placements) {
          EXPECT_EQ(p.cp_rank, Placement::kSharded);
          micro_batches.back().push_back(lengths.size());
          lengths.push_back(p.tokens);
        }
        EXPECT_LE(mb.tokens(), space[*k].max_len);
      }
      estimate = std::max(estimate, packing_cost(lengths, micro_batches, space[*k]) + space[*k].sync);
    }
    EXPECT_NEAR(estimate, chosen[i].estimate, 1e-9 * estimate);
    EXPECT_GT(chosen[i].candidates, 0);
  }
}

TEST(HydraulisPolicy, Deterministic) {
  Bench s;
  const auto a = hydraulis()->plan(s.context, s.batches);
  const auto b = hydraulis()->plan(s.context, s.batches);
  EXPECT_EQ(a, b);
}

TEST(HydraulisPolicy, EvaluatingEveryCandidateIsNeverWorse) {
  Bench s;
  auto screened = hydraulis({{"finalists", 2}});
  auto all = hydraulis({{"finalists", 0}});
  screened->plan(s.context, s.batches);
  all->plan(s.context, s.batches);
  const auto& x = dynamic_cast<const HydraulisPolicy&>(*screened).choices();
  const auto& y = dynamic_cast<const HydraulisPolicy&>(*all).choices();
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_LE(y[i].estimate, x[i].estimate * (1 + 1e-12));
}

TEST(HydraulisPolicy, ExactPackingIsNeverWorse) {
  Bench s(5, 30000, 2);
  auto heuristic = hydraulis();
  auto exact = hydraulis({{"packing", "exact"}, {"exact_max_sequences", 12}});
  heuristic->plan(s.context, s.batches);
  const auto plans = exact->plan(s.context, s.batches);
  const auto& h = dynamic_cast<const HydraulisPolicy&>(*heuristic).choices();
  const auto& e = dynamic_cast<const HydraulisPolicy&>(*exact).choices();
  for (std::size_t i = 0; i < h.size(); ++i) {
    EXPECT_LE(e[i].estimate, h[i].estimate * (1 + 1e-12));
    EXPECT_TRUE(validate_plan(plans[i], s.batches[i], s.cost).structurally_valid());
  }
}

TEST(HydraulisPolicy, ExplicitStrategiesAndTheFallback) {
  Bench s;
  // Only 16 x <1,1>: the long github files do not fit it. The scheme space is then the explicit schemes alone,
  // so those iterations fall back to all the <1,1> pipelines again, with the long file alone in its micro-batch:
  // an out-of-memory iteration, labelled as such.
  auto policy = hydraulis(nlohmann::json::parse(R"({"strategies": [[{"tp": 1, "pp": 1, "count": 16}]]})"));
  const auto plans = policy->plan(s.context, s.batches);
  const Tokens small = HydraulisView(s.cost, 16).max_len(ParallelScheme{});
  int fallbacks = 0;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    Tokens longest = 0;
    for (const auto& seq : s.batches[i]) longest = std::max(longest, seq.tokens);
    const bool fits = longest <= small;
    EXPECT_EQ(plans[i].replicas.size(), 16u);
    EXPECT_EQ(plans[i].label.find("no candidate") == std::string::npos, fits) << plans[i].label;
    fallbacks += fits ? 0 : 1;
    const auto report = validate_plan(plans[i], s.batches[i], s.cost);
    EXPECT_TRUE(report.structurally_valid());
    EXPECT_EQ(report.out_of_memory(), !fits);
  }
  EXPECT_GT(fallbacks, 0);  // github at 32K context has long files in these batches
  // A strategy larger than the cluster.
  EXPECT_THROW(hydraulis(nlohmann::json::parse(R"({"strategies": [[{"tp": 8, "pp": 1, "count": 3}]]})"))
                   ->plan(s.context, s.batches),
               InputError);
}

// Sec. 7 proposes from the whole dataset: given its lengths, the candidates are the proposal over them, weighted as
// one mean iteration of the window; "proposal_from": "window" reads the planned window alone.
TEST(HydraulisPolicy, TheProposalReadsTheWholeDatasetUnlessToldTheWindow) {
  Bench s(3, 60000, 3);
  const auto& d = named_distribution("github");
  std::vector<Tokens> dataset = distribution_lengths({{&d, 1.0}}, 1 << 14);
  for (auto& t : dataset) t = std::min(t, s.context.training.context_length);
  s.context.dataset_lengths = std::make_shared<const std::vector<Tokens>>(dataset);
  std::vector<Tokens> window;
  for (const auto& batch : s.batches)
    for (const auto& seq : batch) window.push_back(seq.tokens);
  const auto tokens = [](const std::vector<Tokens>& v) { return std::accumulate(v.begin(), v.end(), 0.0); };
  const SchemeSpace space(s.cost, 16, SpaceOptions{});
  const ProposalOptions options;
  ASSERT_LE(*std::max_element(window.begin(), window.end()), *std::max_element(dataset.begin(), dataset.end()));

  auto from_dataset = hydraulis();
  EXPECT_TRUE(plans_from_dataset(hydraulis_spec()));  // its descriptor asks the loader for the dataset
  from_dataset->plan(s.context, s.batches);
  const double iterations = tokens(dataset) / (tokens(window) / 3.0);
  EXPECT_EQ(dynamic_cast<const HydraulisPolicy&>(*from_dataset).candidates(),
            propose_strategies(dataset, iterations, space, options).strategies);

  auto from_window = hydraulis({{"proposal_from", "window"}});
  EXPECT_FALSE(plans_from_dataset(hydraulis_spec({{"proposal_from", "window"}})));
  from_window->plan(s.context, s.batches);
  EXPECT_EQ(dynamic_cast<const HydraulisPolicy&>(*from_window).candidates(),
            propose_strategies(window, 3.0, space, options).strategies);
  EXPECT_NE(dynamic_cast<const HydraulisPolicy&>(*from_window).candidates(),
            dynamic_cast<const HydraulisPolicy&>(*from_dataset).candidates());
  EXPECT_FALSE(plans_from_dataset(
      hydraulis_spec(nlohmann::json::parse(R"({"strategies": [[{"tp": 1, "pp": 1, "count": 16}]]})"))));
  EXPECT_THROW(hydraulis({{"proposal_from", "trace"}}), InputError);
}

// Hydraulis proposes its strategies offline, once, from the profile the user measured and the data expected. A
// sampled world is hardware and data the planner never saw: it runs the nominal proposal (in its own space), while
// the selection prices the world's own batches with the world's costs.
TEST(HydraulisPolicy, ASampledWorldRunsTheNominalProposal) {
  Bench nominal(3, 60000, 3);
  Bench world(7, 60000, 3);  // another draw of the data
  Profile slower = testing::plausible_profile();
  slower.compute.attention_efficiency = testing::flat_curve(0.1);
  slower.memory.activations_selective = {36, 8, 12};
  const CostModel world_cost(named_model("LLaMA2-7B"), nominal.cost.cluster(), slower);
  world.context.cost = &world_cost;
  const auto candidates = [](const Policy& p) { return dynamic_cast<const HydraulisPolicy&>(p).candidates(); };
  const auto choices = [](const Policy& p) { return dynamic_cast<const HydraulisPolicy&>(p).choices(); };

  auto proposed_nominally = hydraulis();
  proposed_nominally->plan(nominal.context, nominal.batches);
  const SchemeSpace nominal_space(nominal.cost, 16, SpaceOptions{});
  const SchemeSpace world_space(world_cost, 16, SpaceOptions{});
  const std::vector<Strategy> expected =
      strategies_in_space(candidates(*proposed_nominally), nominal_space, world_space);
  auto proposed_in_world = hydraulis();  // what a world planned before: its own proposal
  proposed_in_world->plan(world.context, world.batches);
  ASSERT_NE(candidates(*proposed_in_world), expected);  // the world's own profile proposes otherwise
  ASSERT_FALSE(expected.empty());

  world.context.nominal = PlanningContext::Nominal{&nominal.cost, nominal.batches};
  auto sampled = hydraulis();
  const auto plans = sampled->plan(world.context, world.batches);
  EXPECT_EQ(candidates(*sampled), expected);
  ASSERT_EQ(plans.size(), world.batches.size());
  for (std::size_t b = 0; b < plans.size(); ++b) EXPECT_EQ(plans[b].sequence_count(), world.batches[b].size()) << b;

  // The selection prices the world: the same proposal and batches under the nominal costs choose otherwise.
  PlanningContext believed = world.context;
  believed.cost = &nominal.cost;
  auto priced_nominally = hydraulis();
  priced_nominally->plan(believed, world.batches);
  EXPECT_EQ(candidates(*priced_nominally), candidates(*proposed_nominally));
  ASSERT_EQ(choices(*priced_nominally).size(), choices(*sampled).size());
  for (std::size_t b = 0; b < plans.size(); ++b)
    EXPECT_NE(choices(*priced_nominally)[b].estimate, choices(*sampled)[b].estimate) << b;
}

TEST(HydraulisPolicy, OptionsAreChecked) {
  EXPECT_THROW(hydraulis({{"bogus", 1}}), InputError);
  EXPECT_THROW(hydraulis({{"trials", 0}}), InputError);
  EXPECT_THROW(hydraulis({{"packing", "ilp"}}), InputError);
  EXPECT_THROW(hydraulis({{"util_threshold", 1.5}}), InputError);
  EXPECT_THROW(hydraulis({{"gpu_step", 0}}), InputError);
  EXPECT_THROW(hydraulis({{"recompute", "partial"}}), InputError);
  EXPECT_THROW(hydraulis({{"strategies", nlohmann::json::array()}}), InputError);
  EXPECT_THROW(hydraulis(nlohmann::json::parse(R"({"strategies": [[{"tp": 1, "pp": 1}]]})")),
               InputError);  // count missing
  EXPECT_THROW(hydraulis(nlohmann::json::parse(R"({"strategies": [[{"tp": 1, "pp": 1, "count": 1, "cp": 2}]]})")),
               InputError);
  try {
    hydraulis({{"finalists", -1}});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("test.json: policies[0].options.finalists"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(hydraulis({{"trials", 10},
                             {"finalists", 0},
                             {"screen_trials", 2},
                             {"packing", "exact"},
                             {"exact_max_sequences", 8},
                             {"milp_time_limit_s", 0.1},
                             {"milp_max_nodes", 100},
                             {"util_threshold", 0.9},
                             {"length_step_tokens", 256},
                             {"gpu_step", 0.25},
                             {"proposal_precision", 0.01},
                             {"roundings_per_length", 0},
                             {"recompute", "full"},
                             {"optimization_phase", "hidden"}}));
  EXPECT_THROW(hydraulis({{"optimization_phase", "overlapped"}}), InputError);
}

TEST(HydraulisPolicy, SerialOptimizationCountsTheSyncInEveryChoice) {
  // "serial" adds each pipeline's gradient sync and optimizer step to the choice's estimate, "hidden" counts
  // propagation alone. Whether that yields faster iterations is a property of whole scenarios
  // (hydraulis_scenarios_test.cpp), not of this toy batch.
  Bench s(3, 60000, 4);
  auto serial = hydraulis();
  auto hidden = hydraulis({{"optimization_phase", "hidden"}});
  serial->plan(s.context, s.batches);
  hidden->plan(s.context, s.batches);
  const auto& h = dynamic_cast<const HydraulisPolicy&>(*hidden).choices();
  const auto& v = dynamic_cast<const HydraulisPolicy&>(*serial).choices();
  ASSERT_EQ(h.size(), v.size());
  for (std::size_t i = 0; i < h.size(); ++i) EXPECT_LT(h[i].estimate, v[i].estimate);
}

TEST(HydraulisPolicy, RecomputeOptionReachesTheSchemes) {
  Bench s(3, 30000, 1);
  const auto plans = hydraulis({{"recompute", "full"}})->plan(s.context, s.batches);
  for (const auto& r : plans[0].replicas) EXPECT_EQ(r.scheme.recompute, Recompute::Full);
}

}  // namespace hydraulis_policy_test
}  // namespace lcsim::hydraulis
