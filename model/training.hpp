#pragma once
// What a training run is, as every layer reads it: the scenario's training settings, its homogeneous parallel
// layout, and its data cut into global batches.
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/cost_model.hpp"
#include "model/workload.hpp"

namespace lcsim {

struct TrainingConfig {
  int global_batch_sequences = 0;   ///< sequences per iteration, or 0 when tokens_per_iteration is set
  Tokens tokens_per_iteration = 0;  ///< token budget per iteration, or 0 when global_batch_sequences is set
  int iterations = 10;
  int zero_stage = 2;
  Recompute recompute = Recompute::Selective;
  Tokens context_length = 0;                 ///< longest sequence the training run admits (packing length of baselines)
  std::optional<Tokens> bucket_size_tokens;  ///< Skrull BucketSize C when the scenario fixes it
  Finetuning finetuning{};                   ///< what is trained; the cost model prices it, policies need not look
  Precision precision = Precision::Bf16;     ///< the layer GEMMs' number format; the cost model prices it
  Elementwise elementwise = Elementwise::Fused;  ///< fused or eager element-wise kernels; the cost model prices it
  std::string attention;  ///< one of the profile's attention_implementations, or empty: the profile's own kernel
  bool overlap_gradient_sync = false;  ///< the gradient sync beside the backward and forward (CostModelOptions)
};

/// The scenario's homogeneous layout (the baselines' static strategy): dp x pp x cp x tp GPUs.
struct ParallelLayout {
  int dp = 1;
  int cp = 1;
  int tp = 1;
  int pp = 1;
  int virtual_pp = 1;  ///< model chunks per pipeline stage: interleaved 1F1B (ParallelScheme::virtual_pp)
  int gpus() const { return dp * cp * tp * pp; }
};

using GlobalBatch = std::vector<Sequence>;

/// Cuts `sequences` (in order) into global batches: fixed sequence count, or a token budget (sequences are
/// added while the batch stays within the budget; a sequence longer than the budget forms a batch alone).
/// A short tail that does not fill a batch is dropped only when `allow_partial_tail` is false -- the caller
/// decides and reports it.
std::vector<GlobalBatch> cut_global_batches(std::span<const Sequence> sequences, const TrainingConfig& training,
                                            bool allow_partial_tail);

}  // namespace lcsim
