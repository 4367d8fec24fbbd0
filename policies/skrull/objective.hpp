#pragma once
// Skrull's joint objective (Eq. 1-11) in the paper's own cost terms (SkrullView), and an exact branch-and-bound
// search of the DACP problem (Eq. 1-7) for small micro-batches, the reference the heuristic is measured against.
#include <optional>
#include <span>
#include <vector>

#include "policies/skrull/gds.hpp"
#include "policies/skrull/skrull_view.hpp"

namespace lcsim::skrull {

/// TDACP of one micro-batch (Eq. 1-5): max over CP ranks j of max(Tcomm(V), Tcomp(Local_j)) + Tcomp(Dist).
/// Empty terms cost nothing (Tcomp(0) = Tcomm(0) = 0 rather than the fits' intercepts).
double tdacp_seconds(const SkrullView& view, std::span<const Tokens> lengths, std::span<const int> ranks, int cp);

/// Eq. 8: the slowest DP rank's sum of TDACP over its micro-batches. `lengths` indexes the global batch.
double joint_objective_seconds(const SkrullView& view, std::span<const Tokens> lengths,
                               std::span<const RankSchedule> ranks, int cp);

struct OptimalDacp {
  double seconds = 0;      ///< the optimum of Eq. 1 under Eq. 6-7
  std::vector<int> ranks;  ///< an optimal placement (CpAssignment conventions)
  long long nodes = 0;     ///< search nodes visited
};

/// Exact minimum of Eq. 1 subject to Eq. 6-7 by branch and bound (every sequence sharded or local on one rank;
/// ranks are interchangeable, so a sequence only opens the first empty rank). Partial objectives never
/// decrease as sequences are added, so they bound the subtree. Meant for up to ~12 sequences and CP <= 4.
/// nullopt when no placement satisfies Eq. 7.
std::optional<OptimalDacp> optimal_dacp(const SkrullView& view, std::span<const Tokens> lengths, double bucket_tokens,
                                        int cp);

}  // namespace lcsim::skrull
