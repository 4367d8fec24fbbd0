#pragma once
// DeepSpeed-Ulysses with ZeRO (Skrull Sec. 5 baseline): the scenario's static layout, the global batch dealt to
// DP ranks in batch order (sequence k to rank k % dp), every sequence sharded across the CP group, one sequence
// per micro-batch (gradient accumulation), no overlap of CP communication.
#include <memory>
#include <span>
#include <vector>

#include "policies/core/policy.hpp"

namespace lcsim::baselines {

class DeepSpeedPolicy : public Policy {
 public:
  std::string kind() const override { return "deepspeed"; }
  std::vector<IterationPlan> plan(const PlanningContext& context, std::span<const GlobalBatch> batches) override;
};

/// No options.
std::unique_ptr<Policy> make_deepspeed_policy(const PolicySpec& spec);

// ---- shared by the baselines ----
/// Sequence k of `sequences` to rank k % ranks, keeping order within a rank.
std::vector<std::vector<Sequence>> deal_round_robin(std::span<const Sequence> sequences, int ranks);
/// A micro-batch of `sequences`, each sharded across the replica's CP group.
MicroBatch sharded_micro_batch(std::span<const Sequence> sequences, bool padded);

}  // namespace lcsim::baselines
