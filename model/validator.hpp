#pragma once
// Checks a plan against the global batch it was built from and the cluster. Violations are reported, never
// repaired: a structural problem is a policy bug; an out-of-memory GPU is a property of the plan (an OOM
// iteration), reported with the GPU and its estimated peak.
#include <span>
#include <string>
#include <vector>

#include "model/cost_model.hpp"
#include "model/plan.hpp"
#include "model/training.hpp"

namespace lcsim {

struct PlanIssue {
  enum class Kind {
    MissingSequence,    ///< a sequence of the batch is not placed
    DuplicateSequence,  ///< placed more than once
    UnknownSequence,    ///< not in the batch, or with a different token count
    BadRank,            ///< cp_rank outside [-1, cp)
    BadGpu,             ///< GPU index outside the cluster, used twice in a phase, or wrong count for the scheme
    BadScheme,          ///< degrees < 1, pp not dividing layers, TP group crossing nodes, ...
    EmptyMicroBatch,    ///< a micro-batch without placements
    OutOfMemory,        ///< estimated peak above capacity
  };
  Kind kind;
  std::string message;
};

struct ValidationReport {
  std::vector<PlanIssue> issues;
  std::vector<double> peak_bytes;  ///< per GPU, from estimate_peak_bytes
  bool structurally_valid() const;
  bool out_of_memory() const;
  /// All issues, one per line.
  std::string summary() const;
};

ValidationReport validate_plan(const IterationPlan& plan, std::span<const Sequence> batch, const CostModel& cost);
/// validate_plan's structural issues alone (every kind but OutOfMemory), in the same order: what planning checks of
/// each plan. It skips the peak-memory estimate, which the iteration program's replay gives the results.
std::vector<PlanIssue> check_plan_structure(const IterationPlan& plan, std::span<const Sequence> batch,
                                            const CostModel& cost);

/// The sequences a plan places, in placement order: what a re-batching policy's plan is validated against.
std::vector<Sequence> plan_sequences(const IterationPlan& plan);
/// For policies that re-batch (keeps_global_batches() false): every sequence of the window is placed exactly
/// once across all plans, with its token count. Structural checks of each plan stay with validate_plan.
std::vector<PlanIssue> validate_window(std::span<const IterationPlan> plans, std::span<const GlobalBatch> batches);

}  // namespace lcsim
