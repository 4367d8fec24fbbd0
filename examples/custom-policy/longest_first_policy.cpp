#include "longest_first_policy.hpp"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

namespace example {

using lcsim::Sequence;

std::vector<lcsim::IterationPlan> LongestFirstPolicy::plan(const lcsim::PlanningContext& context,
                                                           std::span<const lcsim::GlobalBatch> batches) {
  // The scenario's static layout, as the baselines read it (tp, pp, cp and the recomputation setting).
  const lcsim::ParallelScheme scheme = lcsim::layout_scheme(context);
  const int dp = context.layout.dp;
  const lcsim::CostModel& cost = *context.cost;
  const auto work_of = [&](const Sequence& s) {
    if (!by_time_) return static_cast<double>(s.tokens);
    const lcsim::SequenceShare share{s.tokens, scheme.cp};
    // Every layer of the model (a weight for ordering, whatever the pipeline): which layers matters when part of
    // the model is frozen.
    return cost.compute_seconds(std::span(&share, 1), scheme, lcsim::LayerSpan{0, cost.model().layers}, true);
  };
  std::vector<lcsim::IterationPlan> plans;
  for (std::size_t b = 0; b < batches.size(); ++b) {
    std::vector<Sequence> longest_first(batches[b].begin(), batches[b].end());
    std::stable_sort(longest_first.begin(), longest_first.end(),
                     [](const Sequence& x, const Sequence& y) { return x.tokens > y.tokens; });
    lcsim::IterationPlan plan;
    plan.index = static_cast<int>(b);
    plan.label = "batch " + std::to_string(b);
    plan.replicas = lcsim::make_homogeneous_replicas(scheme, dp);
    // (work so far, rank): the least loaded rank first, the lowest index on ties, so plans are deterministic.
    using Load = std::pair<double, int>;
    std::priority_queue<Load, std::vector<Load>, std::greater<>> loads;
    for (int r = 0; r < dp; ++r) loads.emplace(0.0, r);
    for (const Sequence& s : longest_first) {
      auto [load, rank] = loads.top();
      loads.pop();
      lcsim::MicroBatch micro_batch;
      micro_batch.placements.push_back(lcsim::Placement{s.id, s.tokens, lcsim::Placement::kSharded});
      plan.replicas[static_cast<std::size_t>(rank)].micro_batches.push_back(std::move(micro_batch));
      loads.emplace(load + work_of(s), rank);
    }
    plans.push_back(std::move(plan));
  }
  return plans;
}

std::unique_ptr<lcsim::Policy> make_longest_first(const lcsim::PolicySpec& spec) {
  lcsim::JsonObjectReader options = lcsim::policy_options(spec);
  bool by_time = true;
  if (options.has("balance_by")) {
    const auto balance_by = options.required<std::string>("balance_by");
    if (balance_by != "time" && balance_by != "tokens")
      options.fail("balance_by", "expected \"time\" or \"tokens\", got \"" + balance_by + "\"");
    by_time = balance_by == "time";
  }
  options.finish();
  return std::make_unique<LongestFirstPolicy>(by_time);
}

}  // namespace example
