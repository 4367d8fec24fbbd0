#pragma once
// FlexSP's per-micro-batch problem (Sec. 4.1, Eq. 5-10): form SP groups of power-of-two degrees on the cluster's
// GPUs and assign every sequence of the micro-batch to one, minimising the slowest group's time (FlexSpView),
// each group within its token capacity. Three solvers:
//   heterogeneous  lcsim's heuristic for scale: bisection on the makespan C with a greedy that places sequences,
//                  longest first, into the fullest group that stays within C, else opens the smallest group that
//                  runs the sequence within C; then GPUs left over go where they shorten the makespan
//   homogeneous    one degree for every group (FlexSP-BatchAda, and the heuristic's first incumbent): the
//                  sequences, longest first, to the group that finishes first (LPT)
//   exact          Eq. 5-10 as a MILP on COIN-OR CBC, for small micro-batches and the heuristic's optimality gap
#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "policies/flexsp/flexsp_view.hpp"

namespace lcsim::flexsp {

struct Group {
  int degree = 1;
  std::vector<std::size_t> members;  ///< indices into the micro-batch's lengths, longest first
  double sum = 0;                    ///< tokens
  double sum_sq = 0;                 ///< squared tokens
};

/// Groups of one micro-batch; `makespan` is the slowest group's time by the view.
struct GroupPlan {
  std::vector<Group> groups;
  double makespan = 0;
  int gpus_used() const;
};

/// Time of `g` by the view's formula for its degree.
double group_time(const Group& g, const FlexSpView& view);

/// Every group of one degree (degree_index into view.degrees()): GPUs / d groups. nullopt when a sequence does not
/// fit (memory).
std::optional<GroupPlan> assign_homogeneous(std::span<const Tokens> lengths, const FlexSpView& view,
                                            std::size_t degree_index);

/// The heuristic; nullopt when no grouping holds the micro-batch.
std::optional<GroupPlan> assign_heterogeneous(std::span<const Tokens> lengths, const FlexSpView& view);

struct ExactOptions {
  double time_limit_s = 5;  ///< FlexSP's SCIP limit (limits/time 5 s); a backstop to the node limit
  int max_nodes = 50000;    ///< makes results independent of machine speed
};
struct ExactResult {
  std::optional<GroupPlan> plan;  ///< the best found (nullopt: infeasible or nothing found)
  bool optimal = false;           ///< proven optimal (or proven infeasible)
};
/// Eq. 5-10 with virtual groups (every degree d: GPUs / d of them), warm-started with `incumbent`.
ExactResult assign_exact(std::span<const Tokens> lengths, const FlexSpView& view, const ExactOptions& options,
                         const std::optional<GroupPlan>& incumbent);

/// GPU offsets of the groups laid out largest first from GPU 0 (every block aligned to its size: an NVLink
/// domain of a power-of-two size then never splits a group of up to its size).
std::vector<int> group_offsets(const std::vector<Group>& groups);

}  // namespace lcsim::flexsp
