#pragma once
// Hydraulis (Sec. 5-7) as an lcsim policy: dynamic heterogeneous strategies chosen per iteration by the two-stage
// sequence assignment among candidates proposed from the data's length distribution.
//
// plan(): the scheme space over all the cluster's GPUs (strategy.hpp); the candidates (the proposal of
// proposal.hpp over the whole dataset's lengths, which the loader prepares since the descriptor asks for them
// (Sec. 7; option "proposal_from": "window" reads the planned window instead), or the scenario's explicit
// `strategies`; a sampled world runs the nominal world's proposal, PlanningContext::nominal: Hydraulis proposes
// offline, once, from the profiled costs and the expected data); then for every global batch (the scenario's mini-batch,
// e.g. tokens_per_iteration = 100K, kept as it is) every candidate whose longest MaxLen holds the batch's
// longest sequence is laid out (strategy.hpp), dispatched (dispatch.hpp) and packed (packing.hpp), and the one
// with the smallest two-stage estimate, max over pipelines of (largest micro-batch) x (PP - 1 + V) + sync, wins
// (ties: the earlier candidate) -- among those whose plan fits the cost model's memory estimate, when any does
// (MaxLen follows App. B.1 and spreads the optimizer states over all GPUs; the estimate shards them over the
// GPUs holding each model slice, a little less evenly when TP x PP does not divide the cluster). With no such candidate
// (a sequence no proposed strategy holds), the batch runs on as many pipelines of the largest-MaxLen scheme as fit, the
// too-long sequence alone in its micro-batch: an iteration the estimate reports as out of memory.
//
// Plan mapping: one Replica per pipeline, ParallelScheme{tp, pp, cp = 1, recompute}, its GPUs from lay_out()
// (TP groups inside a node), phase 0 for all (Hydraulis switches strategies between iterations, without the
// in-iteration switches of HotSPa: optimisation-propagation disaggregation keeps the optimizer states fully
// sharded whatever the strategy), micro-batches in execution order, each placement cp_rank kSharded (cp = 1:
// the whole packed sequence goes through the pipeline). Pipelines the dispatch left empty stay as replicas with
// no micro-batches; GPUs outside the strategy get no replica.
//
// Options (all optional):
//   trials               Algorithm 1's random permutations; default 100 (the paper's T)
//   finalists            candidates given the full two-stage estimate per iteration; default 8, 0 = all of them
//                        (the paper evaluates all; the proposal's rounding yields tens to hundreds of candidates
//                        at scale, so by default the others are screened out by Eq. 3's objective after
//                        screen_trials greedy trials)
//   screen_trials        default 1
//   packing              "heuristic" (default) or "exact": CBC MILP for pipelines of at most
//                        exact_max_sequences sequences, the heuristic beyond
//   exact_max_sequences  default 12
//   milp_time_limit_s    per MILP; default 0.5 (the reference's)
//   milp_max_nodes       per MILP; default 20000
//   util_threshold       UtilLen's share of the best throughput; default 0.85 (App. C)
//   optimization_phase   "serial" (default) or "hidden". The paper's estimates count propagation only: its
//                        subgraph scheduling hides the pull / push traffic between propagation and the fully
//                        sharded optimizer (Sec. 5.3; Table 1 still measures 1.18 s of it). lcsim's estimate runs
//                        every replica's gradient sync and optimizer step after propagation, and that time grows
//                        as TP x PP shrinks (a <1,1> pipeline synchronises the whole model). "serial" adds it to
//                        every pipeline in the proposal, the dispatch and the selection (SchemeInfo::sync);
//                        "hidden" is the paper's propagation-only planning.
//   length_step_tokens   proposal l step; default 128
//   gpu_step             proposal n and d step; default 0.1
//   proposal_precision   relative precision of t[N][L]; default 1e-3
//   roundings_per_length nearby integer strategies kept per L, the fastest by the relaxed model; default 4;
//                        0 keeps every one (the paper: thousands at 1024 GPUs)
//   recompute            "none" | "selective" | "full"; default training.recompute
//   strategies           explicit candidates instead of the proposal:
//                        [[{"tp": 8, "pp": 1, "count": 1}, {"tp": 2, "pp": 1, "count": 4}], ...]
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "policies/core/policy.hpp"
#include "policies/hydraulis/packing.hpp"
#include "policies/hydraulis/proposal.hpp"

namespace lcsim::hydraulis {

class DispatchBatch;

struct SchemeCount {
  int tp = 1;
  int pp = 1;
  int count = 1;
};

struct HydraulisOptions {
  int trials = 100;
  int finalists = 8;
  int screen_trials = 1;
  bool exact_packing = false;
  int exact_max_sequences = 12;
  MilpOptions milp;
  double util_threshold = 0.85;
  bool serial_optimization = true;
  ProposalOptions proposal;
  /// The proposal reads the whole dataset (the paper, Sec. 7), or only the planned window (lcsim before 2026-11-27;
  /// option "proposal_from": "window", which the runs measured then still replay).
  bool proposal_from_dataset = true;
  std::optional<Recompute> recompute;
  std::vector<std::vector<SchemeCount>> strategies;  ///< empty: use the proposal
  std::string where;                                 ///< "file: path.options" for messages
};

/// What the policy decided for one iteration, for tests and benchmarks.
struct IterationChoice {
  Strategy strategy;
  double estimate = 0;  ///< the two-stage estimate of the chosen strategy, seconds
  int candidates = 0;   ///< candidates that held the batch
};

class HydraulisPolicy : public Policy {
 public:
  explicit HydraulisPolicy(HydraulisOptions options) : options_(std::move(options)) {}
  std::string kind() const override { return "hydraulis"; }
  std::vector<IterationPlan> plan(const PlanningContext& context, std::span<const GlobalBatch> batches) override;
  static constexpr bool kPlansUnderLayout = false;  // chooses its <TP, PP> strategies per iteration
  /// The strategy proposal reads the whole dataset's distribution (Sec. 7), not only the window.
  bool plans_from_dataset() const { return options_.strategies.empty() && options_.proposal_from_dataset; }
  /// Exact packing solves MILPs with CBC under a time limit on the process's CPU time, which other threads would
  /// spend too.
  bool needs_own_process() const { return options_.exact_packing; }

  /// Filled by plan(): the candidates and per-iteration choices.
  const std::vector<Strategy>& candidates() const { return candidates_; }
  const std::vector<IterationChoice>& choices() const { return choices_; }

 private:
  /// One global batch: candidates holding it, screened, dispatched and packed; the best that fits memory.
  IterationPlan plan_batch(const GlobalBatch& batch, const SchemeSpace& space, const CostModel& cost,
                           std::uint64_t seed, IterationChoice& choice) const;
  struct Finalist {
    const Strategy* strategy;
    double screened;  ///< Eq. 3's objective after screen_trials trials; -inf when there was no screening
  };
  /// The candidates that go through the full two-stage estimate: all of them when there are at most
  /// `finalists` (or finalists is 0), else the `finalists` best by Eq. 3's objective after `screen_trials`
  /// greedy trials, in candidate order.
  std::vector<Finalist> screen(const std::vector<const Strategy*>& holding, DispatchBatch& batch) const;

  HydraulisOptions options_;
  std::vector<Strategy> candidates_;
  std::vector<IterationChoice> choices_;
};

std::unique_ptr<Policy> make_hydraulis_policy(const PolicySpec& spec);

/// The two-stage estimate of one strategy on one batch: dispatch, then packing per pipeline. `pipelines` from
/// lay_out(). Returns per pipeline the micro-batches (indices into `lengths`) and the largest pipeline cost.
struct Assignment {
  double estimate = 0;
  std::vector<std::vector<std::vector<std::size_t>>> micro_batches;  ///< per pipeline, per micro-batch
};
Assignment assign(std::span<const Tokens> lengths, const std::vector<Pipeline>& pipelines, const SchemeSpace& space,
                  const HydraulisOptions& options, std::uint64_t seed);
/// assign(), unless its estimate cannot end below `give_up_at`: no dispatch trial ends below it (nothing is
/// packed then), or a pipeline's packing bound or packing reaches it (the packing stops there). The selection
/// skips a strategy that cannot beat a plan it already has.
std::optional<Assignment> assign_below(std::span<const Tokens> lengths, const std::vector<Pipeline>& pipelines,
                                       const SchemeSpace& space, const HydraulisOptions& options, std::uint64_t seed,
                                       double give_up_at);
/// The same on a batch every dispatch of the selection shares (its lengths and seed).
std::optional<Assignment> assign_below(DispatchBatch& batch, const std::vector<Pipeline>& pipelines,
                                       const HydraulisOptions& options, double give_up_at);

}  // namespace lcsim::hydraulis
