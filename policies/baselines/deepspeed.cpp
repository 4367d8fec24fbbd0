#include "policies/baselines/deepspeed.hpp"

#include "base/errors.hpp"

namespace lcsim::baselines {

std::vector<std::vector<Sequence>> deal_round_robin(std::span<const Sequence> sequences, int ranks) {
  std::vector<std::vector<Sequence>> dealt(static_cast<std::size_t>(ranks));
  for (std::size_t k = 0; k < sequences.size(); ++k) dealt[k % dealt.size()].push_back(sequences[k]);
  return dealt;
}

MicroBatch sharded_micro_batch(std::span<const Sequence> sequences, bool padded) {
  MicroBatch mb;
  mb.padded = padded;
  for (const auto& s : sequences) mb.placements.push_back(Placement{s.id, s.tokens, Placement::kSharded});
  return mb;
}

std::vector<IterationPlan> DeepSpeedPolicy::plan(const PlanningContext& context, std::span<const GlobalBatch> batches) {
  const ParallelScheme scheme = layout_scheme(context);
  std::vector<IterationPlan> plans;
  for (std::size_t b = 0; b < batches.size(); ++b) {
    IterationPlan plan;
    plan.index = static_cast<int>(b);
    plan.label = "batch " + std::to_string(b);
    plan.replicas = make_homogeneous_replicas(scheme, context.layout.dp);
    const auto dealt = deal_round_robin(batches[b], context.layout.dp);
    for (std::size_t r = 0; r < dealt.size(); ++r)
      for (const auto& s : dealt[r])
        plan.replicas[r].micro_batches.push_back(sharded_micro_batch(std::span(&s, 1), false));
    plans.push_back(std::move(plan));
  }
  return plans;
}

std::unique_ptr<Policy> make_deepspeed_policy(const PolicySpec& spec) {
  policy_options(spec).finish();
  return std::make_unique<DeepSpeedPolicy>();
}

}  // namespace lcsim::baselines
