#pragma once
// `lcsim plan`: every policy of a scenario plans the same data window; each plan is validated, then timed by its
// iteration program replayed without contention, and the per-iteration results are summarized against the baseline.
#include <functional>
#include <string>
#include <vector>

#include "formats/scenario_loader.hpp"
#include "model/plan.hpp"
#include "model/results.hpp"

namespace lcsim {

/// The plans one policy made for the window, with the wall time its plan() call took.
struct PolicyPlans {
  const PolicySpec* spec = nullptr;
  std::string kind;
  std::vector<IterationPlan> plans;
  double planning_ms = 0;
};

/// Labels to evaluate: all policies when `only_labels` is empty, else those plus the baseline (so speedups
/// exist), in scenario order. Throws InputError for a label the scenario does not have.
std::vector<const PolicySpec*> select_policies(const Scenario& scenario, const std::vector<std::string>& only_labels);

/// Runs the policy on the window and checks its plans: one per global batch holding exactly that batch (when the
/// policy keeps global batches), or together exactly the window. A structural problem is a PlanningError naming
/// the policy and the iteration; out-of-memory plans are kept (they are results).
PolicyPlans plan_policy(const LoadedScenario& loaded, const PolicySpec& spec);
/// plan_policy with a policy already built (tests pass their own).
PolicyPlans plan_policy(const LoadedScenario& loaded, const PolicySpec& spec, Policy& policy);

/// Times every plan with program::Estimator and summarizes them (speedup is left to apply_baseline).
PolicyResult estimate_plans(const LoadedScenario& loaded, const PolicyPlans& planned);
/// One iteration in the results schema from its plan and timing (the estimate, or the simulator's
/// figures in the same shape).
IterationResult iteration_result(const IterationPlan& plan, int index, const IterationEstimate& timing, int world);

/// Called before each policy is planned (done policies, total, the label) and once at the end (total, total, "").
using PolicyProgress = std::function<void(std::size_t, std::size_t, const std::string&)>;

/// The no-contention evaluation of all selected policies ("plan" mode).
RunResults evaluate_plans(const LoadedScenario& loaded, const std::vector<std::string>& only_labels,
                          const PolicyProgress& progress = {});

/// A warning when every iteration of every policy exceeds GPU memory, "" otherwise. Such a run still has times,
/// but none of its plans could run: usually a profile reserve or a model too large for the cluster.
std::string out_of_memory_warning(const RunResults& results, const LoadedScenario& loaded);

/// The warnings of a run where some policies do not fit in GPU memory (none when every policy fits): one per such
/// policy -- how many of its iterations run out of memory, the first of them, and what does not fit there (the
/// parameters, gradients and optimizer states alone, or the activations on top of them) -- that it cannot be the
/// winner, and, when the baseline is one of them, which policy the speedups are over instead. When nothing fits:
/// out_of_memory_warning's, then per policy what does not fit in its first iteration. Commands print each as
/// "lcsim: warning: ...".
std::vector<std::string> out_of_memory_warnings(const RunResults& results, const LoadedScenario& loaded);

/// The RunResults header fields (mode, scenario, seed, profile, dataset, baseline) of a loaded scenario.
RunResults results_header(const LoadedScenario& loaded, std::string mode);

}  // namespace lcsim
