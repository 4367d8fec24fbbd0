#pragma once
// `deepspeed-ulysses`: DeepSpeed with Ulysses sequence parallelism as Hydraulis's baseline (Sec. 8, Table 3:
// DP x SP, "+ AC" with activation checkpointing): static SP degree, no TP or PP, the fixed-length packing and even
// dealing of megatron.hpp, each pack sharded over the replica's SP group. Options:
//   sp                     SP degree; default the layout's cp
//   algorithm              as megatron (default "ffd")
//   packing_length_tokens  as megatron
//   recompute              as megatron ("full" for Table 3's AC rows)
// (The `deepspeed` policy is Skrull's DeepSpeed baseline: one unpacked sequence per micro-batch.)
#include <memory>

#include "policies/baselines/megatron.hpp"

namespace lcsim::baselines {

class UlyssesPolicy : public Policy {
 public:
  explicit UlyssesPolicy(StaticPackingOptions options) : options_(std::move(options)) {}
  std::string kind() const override { return "deepspeed-ulysses"; }
  std::vector<IterationPlan> plan(const PlanningContext& context, std::span<const GlobalBatch> batches) override;

 private:
  StaticPackingOptions options_;
};

std::unique_ptr<Policy> make_ulysses_policy(const PolicySpec& spec);

}  // namespace lcsim::baselines
