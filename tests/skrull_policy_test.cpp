// The Skrull family as policies over the default H100 profile: valid plans that keep Skrull's memory
// constraints, roll-back on/off, determinism, options; and the exact DACP reference against the heuristic.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "model/plan_demand.hpp"
#include "model/validator.hpp"
#include "policies/skrull/objective.hpp"
#include "policies/skrull/skrull_policy.hpp"
#include "policies/skrull/skrull_view.hpp"
#include "program/estimate.hpp"

namespace lcsim::skrull {
namespace skrull_policy_test {

CostModel default_cost(const std::string& model, int nodes) {
  ClusterSpec cluster;
  cluster.gpu = named_gpu("H100-SXM");
  cluster.nodes = nodes;
  cluster.gpus_per_node = 8;
  cluster.nvlink_GBps = 450;
  cluster.nvlink_latency_us = 2;
  cluster.ib_GBps = 50;
  cluster.ib_latency_us = 5;
  return CostModel(named_model(model), cluster,
                   load_profile(std::string(LCSIM_SOURCE_DIR) + "/calibrate/profiles/h100-sxm-default.json"));
}

PlanningContext context_for(const CostModel& cost, int dp, int cp, std::optional<Tokens> bucket = std::nullopt) {
  PlanningContext context;
  context.cost = &cost;
  context.layout.dp = dp;
  context.layout.cp = cp;
  context.training.global_batch_sequences = 64 * dp;
  context.training.context_length = 128 * kKiloTokens;
  context.training.bucket_size_tokens = bucket;
  context.seed = 3;
  return context;
}

std::vector<GlobalBatch> sample_batches(const std::string& distribution, int batches, std::size_t size,
                                        std::uint64_t seed) {
  const Dataset data =
      sample_dataset(distribution, {MixComponent{&named_distribution(distribution), 1.0}}, batches * size, seed);
  std::vector<GlobalBatch> out(static_cast<std::size_t>(batches));
  for (std::size_t i = 0; i < data.size(); ++i) out[i / size].push_back(data.sequences()[i]);
  return out;
}

PolicySpec spec_of(const std::string& kind, nlohmann::json options = nlohmann::json::object()) {
  PolicySpec spec;
  spec.kind = kind;
  spec.label = kind;
  spec.options = std::move(options);
  spec.file = "test.json";
  spec.path = "policies[0]";
  return spec;
}

// Eq. 7 / Eq. 10 on a finished plan: per CP rank local tokens + sharded tokens / N within C.
double worst_rank_tokens(const IterationPlan& plan, int cp) {
  double worst = 0;
  for (const Replica& replica : plan.replicas)
    for (const MicroBatch& mb : replica.micro_batches) {
      std::vector<double> used(static_cast<std::size_t>(cp), 0.0);
      for (const Placement& p : mb.placements) {
        if (p.sharded()) {
          for (auto& u : used) u += static_cast<double>(p.tokens) / cp;
        } else {
          used[static_cast<std::size_t>(p.cp_rank)] += static_cast<double>(p.tokens);
        }
      }
      worst = std::max(worst, *std::max_element(used.begin(), used.end()));
    }
  return worst;
}

TEST(SkrullPolicy, PlansAreValidAndKeepTheBucketOnEveryRank) {
  const CostModel cost = default_cost("Qwen2.5-0.5B", 4);
  const PlanningContext context = context_for(cost, 4, 8, 26 * kKiloTokens);
  for (const std::string distribution : {"chatqa2-long-sft", "wikipedia"}) {
    const auto batches = sample_batches(distribution, 3, 256, 17);
    for (const std::string kind : {"skrull", "skrull-dacp", "rr"}) {
      auto policy = make_policy(spec_of(kind));
      const auto plans = policy->plan(context, batches);
      ASSERT_EQ(plans.size(), batches.size());
      for (std::size_t i = 0; i < plans.size(); ++i) {
        const ValidationReport report = validate_plan(plans[i], batches[i], cost);
        EXPECT_TRUE(report.structurally_valid()) << kind << ": " << report.summary();
        EXPECT_LE(worst_rank_tokens(plans[i], 8), 26.0 * kKiloTokens) << kind << " on " << distribution;
        for (const Replica& replica : plans[i].replicas) EXPECT_TRUE(replica.overlap_cp_comm);
      }
    }
  }
}

TEST(SkrullPolicy, GdsUsesFewMicroBatchesAndKeepsShortSequencesLocal) {
  const CostModel cost = default_cost("Qwen2.5-0.5B", 4);
  const auto batches = sample_batches("wikipedia", 1, 256, 5);
  const auto plans = make_policy(spec_of("skrull"))->plan(context_for(cost, 4, 8, 26 * kKiloTokens), batches);
  std::size_t micro_batches = 0;
  Tokens local_tokens = 0;
  for (const Replica& replica : plans[0].replicas) {
    micro_batches += replica.micro_batches.size();
    for (const MicroBatch& mb : replica.micro_batches)
      for (const Placement& p : mb.placements)
        if (!p.sharded()) local_tokens += p.tokens;
  }
  // 64 mostly-short sequences per DP rank fit in one or two micro-batches of C N = 208K tokens, and DACP keeps
  // almost every token local (the deepspeed baseline shards everything, one sequence per micro-batch).
  EXPECT_LE(micro_batches, 8U);
  EXPECT_GT(static_cast<double>(local_tokens), 0.9 * static_cast<double>(plans[0].tokens()));
}

TEST(SkrullPolicy, EstimatedFasterThanTheDeepspeedBaseline) {
  const CostModel cost = default_cost("Qwen2.5-0.5B", 4);
  const PlanningContext context = context_for(cost, 4, 8, 26 * kKiloTokens);
  for (const std::string distribution : {"chatqa2-long-sft", "wikipedia"}) {
    const auto batches = sample_batches(distribution, 2, 256, 9);
    const auto skrull_plans = make_policy(spec_of("skrull"))->plan(context, batches);
    const auto baseline_plans = make_policy(spec_of("deepspeed"))->plan(context, batches);
    for (std::size_t i = 0; i < batches.size(); ++i)
      EXPECT_LT(program::estimate_iteration(skrull_plans[i], cost).seconds,
                program::estimate_iteration(baseline_plans[i], cost).seconds)
          << distribution;
  }
}

TEST(SkrullPolicy, WithoutRollBackTheBucketOverflowsInsteadOfBeingRepaired) {
  const CostModel cost = default_cost("Qwen2.5-0.5B", 1);
  // Four 6K sequences fill the ranks of a 4-way group with C = 8K; the 9K one then fits nowhere and its shard
  // (2.25K) does not fit the fullest rank (2K left): roll-back repairs it, no roll-back overflows.
  const GlobalBatch batch = {{0, 6144}, {1, 6144}, {2, 6144}, {3, 6144}, {4, 9216}};
  const std::vector<GlobalBatch> batches = {batch};
  auto context = context_for(cost, 2, 4, 8 * kKiloTokens);
  const auto repaired = make_policy(spec_of("skrull"))->plan(context, batches);
  const auto overflowing = make_policy(spec_of("skrull", {{"rollback", false}}))->plan(context, batches);
  EXPECT_LE(worst_rank_tokens(repaired[0], 4), 8.0 * kKiloTokens);
  EXPECT_GT(worst_rank_tokens(overflowing[0], 4), 8.0 * kKiloTokens);
}

TEST(SkrullPolicy, SameInputsGiveTheSamePlans) {
  const CostModel cost = default_cost("Qwen2.5-0.5B", 4);
  const auto batches = sample_batches("lmsyschat1m", 2, 256, 21);
  auto context = context_for(cost, 4, 8);
  for (const std::string kind : {"skrull", "skrull-dacp", "rr"})
    EXPECT_EQ(make_policy(spec_of(kind))->plan(context, batches), make_policy(spec_of(kind))->plan(context, batches));
}

TEST(SkrullPolicy, OptionsAreStrict) {
  EXPECT_THROW(make_policy(spec_of("skrull", {{"roll_back", true}})), InputError);
  EXPECT_THROW(make_policy(spec_of("skrull", {{"micro_batch_sequences", 2}})), InputError);
  EXPECT_THROW(make_policy(spec_of("skrull-dacp", {{"micro_batch_sequences", 0}})), InputError);
  EXPECT_THROW(make_policy(spec_of("rr", {{"rollback", "yes"}})), InputError);
  try {
    make_policy(spec_of("skrull", {{"bogus", 1}}));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("policies[0].options.bogus"), std::string::npos) << e.what();
  }
}

TEST(SkrullPolicy, DacpOnlyKeepsTheBaselineMicroBatches) {
  const CostModel cost = default_cost("Qwen2.5-0.5B", 4);
  const auto batches = sample_batches("wikipedia", 1, 256, 2);
  const auto plans =
      make_policy(spec_of("skrull-dacp", {{"micro_batch_sequences", 4}}))->plan(context_for(cost, 4, 8), batches);
  for (const Replica& replica : plans[0].replicas) {
    EXPECT_EQ(replica.micro_batches.size(), 16U);  // 64 sequences per DP rank, 4 per micro-batch
    for (const MicroBatch& mb : replica.micro_batches) EXPECT_EQ(mb.placements.size(), 4U);
  }
}

TEST(SkrullPolicy, DacpOnlyFillsMicroBatchesInBatchOrderUpToTheGroupCapacity) {
  const CostModel cost = default_cost("Qwen2.5-0.5B", 4);
  const auto batches = sample_batches("chatqa2-long-sft", 1, 256, 4);
  const double capacity = 26.0 * kKiloTokens * 8;
  const auto plans = make_policy(spec_of("skrull-dacp"))->plan(context_for(cost, 4, 8, 26 * kKiloTokens), batches);
  for (std::size_t r = 0; r < plans[0].replicas.size(); ++r) {
    const auto& mbs = plans[0].replicas[r].micro_batches;
    std::size_t position = r;  // sequence i goes to DP rank i % 4, in batch order
    for (std::size_t m = 0; m < mbs.size(); ++m) {
      EXPECT_LE(static_cast<double>(mbs[m].tokens()), capacity);
      for (const Placement& p : mbs[m].placements) {
        EXPECT_EQ(p.sequence_id, batches[0][position].id);
        position += 4;
      }
      // Maximal: the next micro-batch's first sequence would not have fitted.
      if (m + 1 < mbs.size()) {
        EXPECT_GT(static_cast<double>(mbs[m].tokens() + mbs[m + 1].placements.front().tokens), capacity);
      }
    }
  }
}

TEST(SkrullPolicy, RejectsTensorOrPipelineParallelLayouts) {
  const CostModel cost = default_cost("Qwen2.5-0.5B", 4);
  auto context = context_for(cost, 2, 8);
  context.layout.tp = 2;
  EXPECT_THROW(make_policy(spec_of("skrull"))->plan(context, sample_batches("wikipedia", 1, 8, 1)), PlanningError);
}

// ---- exact reference ----

double brute_force_optimum(const SkrullView& view, const std::vector<Tokens>& lengths, double bucket, int cp,
                           bool& feasible) {
  std::vector<int> ranks(lengths.size());
  double best = std::numeric_limits<double>::infinity();
  std::function<void(std::size_t)> visit = [&](std::size_t i) {
    if (i == lengths.size()) {
      std::vector<double> used(static_cast<std::size_t>(cp), 0.0);
      for (std::size_t k = 0; k < lengths.size(); ++k) {
        if (ranks[k] == CpAssignment::kSharded) {
          for (auto& u : used) u += static_cast<double>(lengths[k]) / cp;
        } else {
          used[static_cast<std::size_t>(ranks[k])] += static_cast<double>(lengths[k]);
        }
      }
      if (*std::max_element(used.begin(), used.end()) <= bucket + 1e-9)
        best = std::min(best, tdacp_seconds(view, lengths, ranks, cp));
      return;
    }
    for (int r = CpAssignment::kSharded; r < cp; ++r) {
      ranks[i] = r;
      visit(i + 1);
    }
  };
  visit(0);
  feasible = best < std::numeric_limits<double>::infinity();
  return best;
}

TEST(SkrullOptimal, BranchAndBoundMatchesExhaustiveSearch) {
  const CostModel cost = default_cost("Qwen2.5-0.5B", 1);
  Rng rng(13);
  for (int trial = 0; trial < 60; ++trial) {
    const int cp = 2 + static_cast<int>(rng.below(2));
    ParallelScheme scheme;
    scheme.cp = cp;
    const SkrullView view(cost, scheme, 8, 16 * kKiloTokens);
    std::vector<Tokens> lengths(1 + rng.below(6));
    for (auto& s : lengths) s = 256 + static_cast<Tokens>(rng.below(24 * kKiloTokens));
    bool feasible = false;
    const double expected = brute_force_optimum(view, lengths, 16.0 * kKiloTokens, cp, feasible);
    const auto found = optimal_dacp(view, lengths, 16.0 * kKiloTokens, cp);
    ASSERT_EQ(found.has_value(), feasible);
    if (feasible) {
      EXPECT_NEAR(found->seconds, expected, 1e-12 * expected);
      EXPECT_NEAR(tdacp_seconds(view, lengths, found->ranks, cp), expected, 1e-12 * expected);
    }
  }
}

TEST(SkrullOptimal, HeuristicIsFeasibleWheneverTheOptimumIsAndNeverBeatsIt) {
  const CostModel cost = default_cost("Qwen2.5-0.5B", 1);
  Rng rng(29);
  int compared = 0;
  for (int trial = 0; trial < 150; ++trial) {
    const int cp = 1 << (1 + static_cast<int>(rng.below(2)));  // 2 or 4
    ParallelScheme scheme;
    scheme.cp = cp;
    const Tokens bucket = 24 * kKiloTokens;
    const SkrullView view(cost, scheme, 8, bucket);
    std::vector<Tokens> lengths(1 + rng.below(12));
    // Bimodal lengths: a mix of micro-batches that fit and some that cannot.
    const auto& dist = named_distribution("chatqa2-long-sft");
    LengthSampler sampler(dist, rng.next());
    for (auto& s : lengths) s = std::min<Tokens>(sampler.sample(), 2 * bucket);
    std::vector<double> flops;
    for (const Tokens s : lengths) flops.push_back(view.flops(s));
    const auto optimum = optimal_dacp(view, lengths, static_cast<double>(bucket), cp);
    const auto heuristic = dacp_schedule(lengths, flops, static_cast<double>(bucket), cp, true);
    if (!optimum) continue;
    ++compared;
    ASSERT_TRUE(heuristic.scheduled) << "trial " << trial;
    EXPECT_GE(tdacp_seconds(view, lengths, heuristic.ranks, cp), optimum->seconds * (1 - 1e-12));
  }
  EXPECT_GT(compared, 50);
  EXPECT_LT(compared, 150);  // some instances must be infeasible, or feasibility is not exercised
}

}  // namespace skrull_policy_test
}  // namespace lcsim::skrull
