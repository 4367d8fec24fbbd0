#include "policies/baselines/ulysses.hpp"

namespace lcsim::baselines {

std::vector<IterationPlan> UlyssesPolicy::plan(const PlanningContext& context, std::span<const GlobalBatch> batches) {
  ParallelScheme scheme;
  scheme.cp = options_.cp.value_or(context.layout.cp);
  scheme.recompute = options_.recompute.value_or(context.training.recompute);
  return plan_static_packing(context, batches, scheme, options_);
}

std::unique_ptr<Policy> make_ulysses_policy(const PolicySpec& spec) {
  auto reader = policy_options(spec);
  StaticPackingOptions options = read_static_packing_options(reader, spec);
  if (reader.has("sp")) options.cp = static_cast<int>(reader.integer_in("sp", 1, 1 << 20));
  reader.finish();
  return std::make_unique<UlyssesPolicy>(std::move(options));
}

}  // namespace lcsim::baselines
