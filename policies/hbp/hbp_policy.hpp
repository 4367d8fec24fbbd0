#pragma once
// HBP, Hierarchical Balance Packing (HBP Sec. 4): auto-selected packing groups, each with its own SP degree and
// gradient-checkpointing layers (auto_select.hpp); the whole data window balance-packed into those groups
// (balance_packing.hpp); a dynamic pipeline of global batches, each from one group and trained with that group's
// strategy (adaptive SP), the first K batches from the short groups only (curriculum), every batch reporting its
// stable loss normaliser T_ave.
//
// A plan is one global batch of one group of packing length l, SP degree sp and GC layers gc: world / sp replicas
// of ParallelScheme{cp = sp, recompute none, checkpointed_layers = gc}, each training k packs (micro-batches,
// every sequence sharded over the replica's SP group), k = max(1, floor(tokens_per_batch / (l x world / sp))), so
// every batch holds about the same global token number. The packs of a batch are dealt to the replicas in
// snake order (0..R-1, R-1..0, ...), which keeps sorted packs balanced when k > 1. The plan's label reads
// "hbp L=16K sp=1 gc=0 packs=32 T_ave=1843.2" (" curriculum" appended to the first K batches), T_ave being the
// batch's tokens per sequence (Eq. 6: every DP rank divides its summed loss by its sequence count x T_ave).
// HBP trains with ZeRO data parallelism and Ulysses SP only: of the scenario's parallel layout it uses the GPU
// count (the world); its own strategies replace the layout's dp/cp/tp/pp and recomputation.
//
// Options (all optional):
//   packing_lengths_tokens  candidate packing lengths L of Algorithm 1, ascending; the last is l_max and must hold
//                           the window's longest sequence. Default: 8K, 16K, 32K, ... below the cap, then the cap,
//                           the cap being training.context_length (or the window's longest sequence without one);
//                           at 128K: 8K, 16K, 32K, 64K, 128K, the paper's set.
//   sp_degrees              SP degrees to search, each dividing the world; default every power of two dividing it.
//   groups                  [{"length_tokens": L, "sp": s, "gc_layers": c}, ...]: fixed groups instead of
//                           auto-selection (HBP Table 11 "manual"); gc_layers defaults to GreedyProfileCkpt's count
//                           (every layer when none fits).
//                           Excludes packing_lengths_tokens, sp_degrees and hierarchical.
//   hierarchical            true (default): the groups L_p of Algorithm 1; false: one group, l_max with s_max.
//   balance                 true (default): each group's packs sorted by attention cost before batching; false: in
//                           a seeded random order.
//   curriculum_iterations   K: the first K batches come from the short groups (all but the longest); default 0.
//   tokens_per_batch        global token number per batch; default training.tokens_per_iteration, else the
//                           window's tokens / its global batches.
//   isf_iterations, isf_fill_threshold  ISF packing inside the groups, as for the packing baseline (10, 0.99).
// Every length no strategy fits is still planned with its least-memory strategy (largest SP, every layer
// checkpointed); such plans are reported as out-of-memory iterations.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "policies/baselines/packing_algorithms.hpp"
#include "policies/core/policy.hpp"
#include "policies/hbp/auto_select.hpp"

namespace lcsim::hbp {

struct GroupSpec {
  Tokens length = 0;
  int sp = 1;
  std::optional<int> gc_layers;
};

struct HbpOptions {
  std::optional<std::vector<Tokens>> packing_lengths;
  std::optional<std::vector<int>> sp_degrees;
  std::vector<GroupSpec> groups;  ///< manual groups; empty: auto-selection
  bool hierarchical = true;
  bool balance = true;
  int curriculum_iterations = 0;
  std::optional<Tokens> tokens_per_batch;
  baselines::IsfOptions isf;
  std::string file;  ///< where the options came from, for messages
  std::string path;  ///< JSON path of the options object
};

class HbpPolicy : public Policy {
 public:
  explicit HbpPolicy(HbpOptions options) : options_(std::move(options)) {}
  std::string kind() const override { return "hbp"; }
  std::vector<IterationPlan> plan(const PlanningContext& context, std::span<const GlobalBatch> batches) override;
  bool keeps_global_batches() const override { return false; }
  static constexpr bool kPlansUnderLayout = false;  // picks its own SP degrees per group

  /// The groups (length, sp, gc) the last plan() call trained with, ascending.
  const std::vector<Strategy>& groups() const { return groups_; }

 private:
  std::vector<Strategy> choose_groups(const CostModel& cost, int world, Tokens cap, Tokens longest) const;

  HbpOptions options_;
  std::vector<Strategy> groups_;
};

std::unique_ptr<Policy> make_hbp_policy(const PolicySpec& spec);

/// HBP's stable loss normaliser T_ave (Eq. 6): tokens per sequence over the whole global batch; 0 when empty.
double average_tokens_per_sample(const IterationPlan& plan);

/// The default candidate packing lengths for a cap (see the header comment).
std::vector<Tokens> default_packing_lengths(Tokens cap);
/// Every power of two dividing `world`, ascending.
std::vector<int> default_sp_degrees(int world);

}  // namespace lcsim::hbp
