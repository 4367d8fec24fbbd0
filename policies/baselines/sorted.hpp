#pragma once
// LongAlign sorted batching (Skrull Sec. 5, HBP Sec. 3.2): the whole window sorted by length, cut into
// consecutive groups of the scenario's global batch sizes, the groups in a seeded random order; each group runs
// like DeepSpeed (dealt round-robin to DP ranks, sharded over CP) but a DP rank's consecutive sequences share a
// micro-batch while the micro-batch stays within a token budget.
//
// Options:
//   micro_batch_tokens  total (padded) tokens of one micro-batch, i.e. micro_batch_tokens / cp per GPU; default
//                       training.context_length (the memory the layout is sized for: one longest sequence),
//                       or the window's longest sequence when the scenario sets no context length. A sequence
//                       over the budget forms a micro-batch alone.
//   padded              sequences of a micro-batch padded to its longest (LongAlign's collator); default true.
//   micro_batch         "budget" (default: LongAlign's collator, above) or "sequence": one sequence per micro-batch,
//                       the DeepSpeed baseline's gradient accumulation -- Skrull Sec. 5 runs sorted batching "with
//                       the same training settings" as that baseline, so sorting only regroups the global batches.
#include <memory>
#include <optional>

#include "policies/core/policy.hpp"

namespace lcsim::baselines {

class SortedPolicy : public Policy {
 public:
  SortedPolicy(std::optional<Tokens> micro_batch_tokens, bool padded, bool one_sequence_per_micro_batch = false)
      : micro_batch_tokens_(micro_batch_tokens),
        padded_(padded),
        one_sequence_per_micro_batch_(one_sequence_per_micro_batch) {}
  std::string kind() const override { return "sorted"; }
  std::vector<IterationPlan> plan(const PlanningContext& context, std::span<const GlobalBatch> batches) override;
  bool keeps_global_batches() const override { return false; }
  /// The micro-batch budget, for LongAlign's collator (micro_batch "budget") only.
  std::vector<TuneKnobSpec> tune_knobs(const TuneKnobContext& context) const {
    if (one_sequence_per_micro_batch_) return {};
    return {{"options.micro_batch_tokens", context_budgets(context.context_length)}};
  }

 private:
  std::optional<Tokens> micro_batch_tokens_;
  bool padded_;
  bool one_sequence_per_micro_batch_;
};

std::unique_ptr<Policy> make_sorted_policy(const PolicySpec& spec);

}  // namespace lcsim::baselines
