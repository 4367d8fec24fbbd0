#pragma once
// Stage 2 of Hydraulis's two-stage sequence assignment (Sec. 6.1, Eq. 1, Appendix C): packing the sequences
// dispatched to one pipeline into V micro-batches, minimising (largest micro-batch cost) x (PP - 1 + V), every
// micro-batch holding at most MaxLen(P) tokens. A micro-batch costs c + sum of work(l) (strategy.hpp).
//
// V is enumerated over Appendix C's pruned range [max(ceil(sum l / MaxLen), 1), min(floor(sum l / UtilLen), U)]
// (the upper end raised to the lower when it falls below, as the reference does); when no V of the range can be
// packed within MaxLen, V keeps growing until one can (V = U always can). For each V:
//   - heuristic: longest-processing-time first (sequences by cost descending, each to the cheapest micro-batch
//     with room) for every V, then -- for the 3 V whose LPT packing was best -- local search moving or swapping a
//     sequence out of the most expensive micro-batch while that lowers it; fast, for any size;
//   - exact: the heuristic first; then, for each V whose lower bound (costliest sequence, mean load) could still
//     beat the best packing so far, the MILP of Eq. 1 for that V with the best so far as a cutoff, solved by
//     COIN-OR CBC (packing_milp.cpp) with a node limit (deterministic) and a time limit (a backstop).
// A sequence longer than MaxLen (an iteration that will run out of memory) forms a micro-batch alone; the others
// are packed as above.
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "policies/hydraulis/strategy.hpp"

namespace lcsim::hydraulis {

struct PackingResult {
  double cost = 0;  ///< (largest micro-batch cost) x (PP - 1 + V); 0 for no sequences
  /// Micro-batches in execution order, each the indices of its sequences (into the lengths), ascending. Longest
  /// micro-batch first, so 1F1B's warm-up holds the largest activations while the pipeline fills.
  std::vector<std::vector<std::size_t>> micro_batches;
  bool proven_optimal = false;  ///< every V of the range was solved to optimality (exact packing only)
};

struct MilpOptions {
  double time_limit_s = 0.5;  ///< per V, as the reference (strategy/new_dynamic.py: timeLimit=0.5)
  int max_nodes = 20000;      ///< branch-and-bound nodes per V: makes results independent of machine speed
};

/// Eq. 1's objective of a given packing (micro-batches of indices into `lengths`).
double packing_cost(std::span<const Tokens> lengths, const std::vector<std::vector<std::size_t>>& micro_batches,
                    const SchemeInfo& scheme);

PackingResult pack_heuristic(std::span<const Tokens> lengths, const SchemeInfo& scheme);
/// A cost no packing of `lengths` goes below, heuristic or exact: over every V a packing may use (from
/// ceil(sum / MaxLen) micro-batches, sequences over MaxLen alone), the costliest sequence or the mean load per
/// micro-batch, plus c, times PP - 1 + V. O(sequences); 0 for no sequences.
double packing_lower_bound(std::span<const Tokens> lengths, const SchemeInfo& scheme);
/// Exact per V (within the node and time limits; see proven_optimal).
PackingResult pack_exact(std::span<const Tokens> lengths, const SchemeInfo& scheme, const MilpOptions& options);

// ---- building blocks, exposed for tests ----

/// The V range of Appendix C for sequences of `total` tokens, `count` of them.
struct MicroBatchRange {
  int lo = 1;
  int hi = 1;
};
MicroBatchRange micro_batch_range(Tokens total, std::size_t count, const SchemeInfo& scheme);

/// Heuristic partition of `lengths` into exactly `v` micro-batches of at most `capacity` tokens minimising the
/// largest sum of `costs`; empty when it finds none that fits. Micro-batches may be empty only if v > count.
/// The local search runs when LPT's largest sum is below `polish_below`.
std::vector<std::vector<std::size_t>> partition_heuristic(
    std::span<const Tokens> lengths, std::span<const double> costs, Tokens capacity, int v,
    double polish_below = std::numeric_limits<double>::infinity());

/// The MILP for one V: minimise z s.t. each sequence in one micro-batch, sum of costs <= z and of tokens <=
/// capacity per micro-batch, and z < `below` (a cutoff: the best known elsewhere; +inf for none). `incumbent` (a
/// feasible partition, may be empty) seeds CBC when it is below the cutoff. Returns the best partition found
/// (empty if none) and whether the answer is proven (optimal, or nothing below the cutoff).
struct MilpPartition {
  std::vector<std::vector<std::size_t>> micro_batches;
  bool optimal = false;
};
MilpPartition partition_milp(std::span<const Tokens> lengths, std::span<const double> costs, Tokens capacity, int v,
                             double below, const std::vector<std::vector<std::size_t>>& incumbent,
                             const MilpOptions& options);

}  // namespace lcsim::hydraulis
