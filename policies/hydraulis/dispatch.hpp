#pragma once
// Stage 1 of Hydraulis's two-stage sequence assignment (Sec. 6.2, Appendix D): dispatching a mini-batch's
// sequences across the pipelines of a strategy, minimising the largest per-pipeline lower bound (Eq. 2-3), with
// the greedy of Algorithm 1 over `trials` random permutations.
//
// Lower bound of pipeline j (Eq. 2, with the once-per-micro-batch constant c of strategy.hpp), plus the sync
// every pipeline pays after propagation (SchemeInfo::sync, 0 under the paper's hidden optimisation phase):
//   LB_j = C_j + c + (PP - 1) (W_j + c) + sync_j,  C_j = sum of work(l) over its sequences, W_j = work(longest);
//   sync_j alone when the pipeline is empty. (Eq. 1's optimum is at least LB_j - sync_j: the V micro-batches sum
//   to C_j + V c >= C_j + c, and the largest one costs at least W_j + c.)
//
// Algorithm 1, as implemented:
//   - a sequence goes only to pipelines whose MaxLen holds it; one longer than every MaxLen (an iteration that
//     will run out of memory) may go to the pipelines of the largest MaxLen;
//   - each trial shuffles the sequences with its own seeded stream, then places those with fewer eligible
//     schemes first (stable), as the reference implementation does for the sequences only the first pipeline
//     holds: Algorithm 1 never revisits a placement, so the least flexible sequences must not find their only
//     pipelines already loaded with short ones;
//   - each sequence goes to the pipeline minimising O_max = max(LB_j after adding it, the other pipelines' LB);
//     ties go to an empty pipeline, then to the smaller LB_j after adding, then to the lower pipeline index;
//   - the trial with the smallest objective wins (ties: the earlier trial); trials stop early once one reaches a
//     bound no trial can beat (the longest sequence alone on its best pipeline, or the mean load), which
//     changes no result.
// Pipelines of one scheme sit in a segment tree, so a placement costs O(schemes x log pipelines), not O(D).
// Every dispatch of a batch shares its trials' shuffles and the sequences' work per scheme (DispatchBatch), so
// screening a candidate whose first trial soon gives up costs a few passes over the sequences, not tables of its
// own.
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "policies/hydraulis/strategy.hpp"

namespace lcsim::hydraulis {

struct DispatchResult {
  double objective = 0;  ///< max_j LB_j of the best trial
  /// Per pipeline (in the given order), indices into the lengths, ascending.
  std::vector<std::vector<std::size_t>> per_pipeline;
};

/// One batch as every dispatch of it sees it. The selection dispatches the same batch with the same seed for
/// every candidate, so the shuffles of each trial, the work of each sequence on each scheme and the dispatch's
/// buffers are shared: computed on first use and kept for the batch. Not thread-safe.
class DispatchBatch {
 public:
  DispatchBatch(std::span<const Tokens> lengths, const SchemeSpace& space, std::uint64_t seed);
  ~DispatchBatch();
  DispatchBatch(const DispatchBatch&) = delete;
  DispatchBatch& operator=(const DispatchBatch&) = delete;

  std::span<const Tokens> lengths() const;
  const SchemeSpace& space() const;

  struct State;  ///< dispatch.cpp's

 private:
  friend DispatchResult dispatch(DispatchBatch&, std::span<const std::size_t>, int, double);
  friend double dispatch_objective(DispatchBatch&, std::span<const std::size_t>, int, double);
  friend std::vector<std::pair<std::size_t, double>> keep_best(DispatchBatch&,
                                                               const std::vector<std::vector<std::size_t>>&, int,
                                                               std::size_t);
  std::unique_ptr<State> state_;
};

/// `pipeline_schemes`: the scheme of every pipeline, in dispatch order (MaxLen descending, one scheme's
/// pipelines contiguous -- lay_out()'s order). trials >= 1. A trial stops as soon as its objective reaches
/// `give_up_at`; when none ends below it the objective is +inf and per_pipeline means nothing (screening only
/// needs to know that a candidate cannot make the finalists).
DispatchResult dispatch(DispatchBatch& batch, std::span<const std::size_t> pipeline_schemes, int trials,
                        double give_up_at = std::numeric_limits<double>::infinity());
/// The same on a batch of its own.
DispatchResult dispatch(std::span<const Tokens> lengths, std::span<const std::size_t> pipeline_schemes,
                        const SchemeSpace& space, int trials, std::uint64_t seed,
                        double give_up_at = std::numeric_limits<double>::infinity());
/// dispatch()'s objective alone, without building the per-pipeline lists (screening).
double dispatch_objective(DispatchBatch& batch, std::span<const std::size_t> pipeline_schemes, int trials,
                          double give_up_at = std::numeric_limits<double>::infinity());

/// Screening: of `candidates` (each its pipeline schemes, as dispatch() takes them), the `keep` whose
/// dispatch_objective() after `trials` trials is smallest (ties: the earlier candidate), as {candidate, objective}
/// in candidate order; all of them when there are at most `keep`. The same as dispatching every candidate, each
/// with the keep-th best objective of those before it as its cutoff, and keeping the best.
std::vector<std::pair<std::size_t, double>> keep_best(DispatchBatch& batch,
                                                      const std::vector<std::vector<std::size_t>>& candidates,
                                                      int trials, std::size_t keep);

/// LB_j (Eq. 2 + sync) for a pipeline holding `lengths` (sync alone when empty).
double dispatch_lower_bound(std::span<const Tokens> lengths, const SchemeInfo& scheme);

}  // namespace lcsim::hydraulis
