#include "model/training.hpp"

#include <string>

#include "base/errors.hpp"

namespace lcsim {

std::vector<GlobalBatch> cut_global_batches(std::span<const Sequence> sequences, const TrainingConfig& training,
                                            bool allow_partial_tail) {
  const bool by_count = training.global_batch_sequences > 0;
  const bool by_tokens = training.tokens_per_iteration > 0;
  if (by_count == by_tokens || training.global_batch_sequences < 0 || training.tokens_per_iteration < 0)
    throw InputError(
        "training: exactly one of global_batch_sequences and tokens_per_iteration must be set (positive), got " +
        std::to_string(training.global_batch_sequences) + " and " + std::to_string(training.tokens_per_iteration));

  std::vector<GlobalBatch> batches;
  GlobalBatch current;
  if (by_count) {
    const auto size = static_cast<std::size_t>(training.global_batch_sequences);
    for (const auto& s : sequences) {
      current.push_back(s);
      if (current.size() == size) {
        batches.push_back(std::move(current));
        current.clear();
      }
    }
    // Whatever is left is short of the batch size.
    if (!current.empty() && allow_partial_tail) batches.push_back(std::move(current));
    return batches;
  }

  const Tokens budget = training.tokens_per_iteration;
  Tokens held = 0;
  for (const auto& s : sequences) {
    if (!current.empty() && held + s.tokens > budget) {
      batches.push_back(std::move(current));
      current.clear();
      held = 0;
    }
    current.push_back(s);
    held += s.tokens;
  }
  // The last batch is full only if it reached the budget exactly or is one sequence over it (a batch alone);
  // otherwise the next sequence might still have fit, so it is a partial tail.
  const bool tail_full = held >= budget;
  if (!current.empty() && (tail_full || allow_partial_tail)) batches.push_back(std::move(current));
  return batches;
}

}  // namespace lcsim
