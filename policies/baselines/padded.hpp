#pragma once
// Padded batching (Hugging Face's default: the Trainer's DataCollatorWithPadding under a sampler): micro-batches of
// a fixed number of sequences, each padded to the micro-batch's longest. The window's sequences in data order (or,
// with `shuffle`, a seeded random order: the Trainer's RandomSampler, which is HBP Table 3's "random batching").
// An iteration takes the next global batch's worth of them (the scenario's global batch sizes: gradient
// accumulation up to the scenario's batch), or, with micro_batches_per_rank M, the next dp x M x
// sequences_per_micro_batch (a fixed batch by count, as the Trainer's per-device batch and accumulation steps set
// it); sequence k of the iteration goes to DP rank k % dp (DistributedSampler's interleave), and each rank cuts its
// share into consecutive micro-batches of sequences_per_micro_batch, the last one shorter. Every micro-batch is
// sharded over the replica's CP group under the scenario's layout, like `deepspeed`. The last count-based
// iteration takes what is left (a rank may get fewer sequences, or none).
//
// The padding is charged, not skipped: MicroBatch::padded makes the cost model run every sequence at the longest
// length (GEMMs, element-wise work and causal attention over the padded tokens) and hold their activations; see
// docs/model.md ("Padding") for why attention is priced at the padded length.
//
// Options:
//   sequences_per_micro_batch  N, the per-device batch size; default 8 (TrainingArguments'
//                              per_device_train_batch_size default)
//   micro_batches_per_rank     M, micro-batches per DP rank per iteration (accumulation steps); default: none, the
//                              scenario's global batches make the iterations
//   shuffle                    take the window in a seeded random order (random batching); default false
#include <memory>
#include <optional>

#include "policies/core/policy.hpp"

namespace lcsim::baselines {

struct PaddedOptions {
  int sequences_per_micro_batch = 8;
  std::optional<int> micro_batches_per_rank;
  bool shuffle = false;
};

class PaddedPolicy : public Policy {
 public:
  explicit PaddedPolicy(PaddedOptions options) : options_(options) {}
  std::string kind() const override { return "padded"; }
  std::vector<IterationPlan> plan(const PlanningContext& context, std::span<const GlobalBatch> batches) override;
  /// In data order without a count, iteration i is the scenario's global batch i.
  bool keeps_global_batches() const override { return !options_.shuffle && !options_.micro_batches_per_rank; }
  /// The per-device batch size: the policy's default, then from one sequence to twice the default.
  std::vector<TuneKnobSpec> tune_knobs(const TuneKnobContext&) const {
    return {{"options.sequences_per_micro_batch", {nullptr, 1, 2, 4, 16}}};
  }

 private:
  PaddedOptions options_;
};

std::unique_ptr<Policy> make_padded_policy(const PolicySpec& spec);

}  // namespace lcsim::baselines
