#pragma once
// FlexSP (Wang et al., ASPLOS 2025, arXiv 2412.01523): heterogeneity-adaptive sequence parallelism. Each global
// batch is cut by the sequence blaster (Sec. 4.2, App. A) into M micro-batches, and each micro-batch runs on SP
// groups of different power-of-two degrees formed for it (Ulysses, ZeRO over every GPU, no TP or PP), sequences
// assigned so that the groups finish together (Sec. 4.1). Groups are regrouped per micro-batch at no cost: the
// model states do not move (every GPU holds the whole model, sharded by ZeRO). docs/policies.md, "FlexSP".
//
// Kinds: `flexsp`; `flexsp-batchada` (the paper's FlexSP-BatchAda: one homogeneous degree per global batch,
// chosen per batch). Options (all optional):
//   microbatch_trials  M': micro-batch counts tried from the fewest that fit memory (default 5, the paper's)
//   max_sp             the largest SP degree (default the cluster's GPUs; degrees are powers of two)
//   allow_sp1          groups of one GPU, pure data parallel (default true: the paper's Table 3 uses them)
//   solver             "heuristic" (default: lcsim's greedy with bisection, groups.hpp) or "milp" (Eq. 5-10 on
//                      CBC for every micro-batch, warm-started with the heuristic; flexsp only)
//   milp_time_limit_s  per micro-batch (default 5, the paper's SCIP limit); milp_max_nodes (default 50000)
//   recompute          "none" | "selective" | "full" (default the training's)
#include <memory>
#include <optional>
#include <string>

#include "policies/core/policy.hpp"
#include "policies/flexsp/groups.hpp"

namespace lcsim::flexsp {

struct FlexSpOptions {
  bool heterogeneous = true;  ///< false: FlexSP-BatchAda
  int microbatch_trials = 5;
  std::optional<int> max_sp;
  bool allow_sp1 = true;
  bool exact = false;  ///< solver "milp"
  ExactOptions milp;
  std::optional<Recompute> recompute;
};

/// One micro-batch's groups and the sequences (indices into the batch) they run.
struct MicroBatchGroups {
  std::vector<std::size_t> sequences;  ///< batch indices, longest first
  GroupPlan groups;                    ///< members index `sequences`
};

/// App. A: the lengths, sorted longest first, cut into `m` contiguous non-empty runs minimising the largest run's
/// tokens (ties: the earlier runs the longer). Returns the m + 1 run boundaries. std::invalid_argument for m < 1 or m >
/// size.
std::vector<std::size_t> blast(std::span<const Tokens> sorted, int m);

class FlexSpPolicy : public Policy {
 public:
  explicit FlexSpPolicy(FlexSpOptions options) : options_(std::move(options)) {}
  std::string kind() const override { return options_.heterogeneous ? "flexsp" : "flexsp-batchada"; }
  std::vector<IterationPlan> plan(const PlanningContext& context, std::span<const GlobalBatch> batches) override;
  static constexpr bool kPlansUnderLayout = false;
  bool needs_own_process() const { return options_.exact; }
  /// Recomputation trades the activations a group holds (so how many micro-batches a batch needs and which
  /// degrees hold its longest sequences) against recomputing them; FlexSP's paper checkpoints to fit 384K.
  std::vector<TuneKnobSpec> tune_knobs(const TuneKnobContext& /*context*/) const {
    return {{"options.recompute", {nullptr, "none", "selective", "full"}}};
  }

  /// One batch's micro-batches, as plan() chooses them (tests, bench). PlanningError when nothing holds it.
  std::vector<MicroBatchGroups> schedule(std::span<const Tokens> lengths, const FlexSpView& view) const;

 private:
  FlexSpOptions options_;
};

std::unique_ptr<Policy> make_flexsp_policy(const PolicySpec& spec);
std::unique_ptr<Policy> make_flexsp_batchada_policy(const PolicySpec& spec);

}  // namespace lcsim::flexsp
