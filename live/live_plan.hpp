#pragma once
// `lcsim-gpu live`, before any GPU is touched: the scenario's policies plan the same global batches with the same
// code as `lcsim plan` / `lcsim simulate`, and every plan becomes its per-GPU work list (program/iteration_program.hpp,
// folded blocks as the simulator's default) -- the list the live executor runs and the predictions replay.
#include <string>
#include <vector>

#include "formats/scenario_loader.hpp"
#include "live/live_options.hpp"
#include "model/plan.hpp"
#include "program/iteration_program.hpp"
#include "program/replay.hpp"

namespace lcsim {

struct LivePolicyPlans {
  std::string label;
  std::string kind;
  double planning_ms = 0;
  std::vector<IterationPlan> plans;
  std::vector<program::IterationProgram> programs;      ///< per plan, with the cost model's seconds
  std::vector<program::IterationOutcome> model_replay;  ///< per plan: the program replayed as the cost model times it
};

struct LivePlans {
  LoadedScenario loaded;
  std::vector<LivePolicyPlans> policies;  ///< in scenario order, the baseline always among them
};

/// Loads the scenario (--iterations, --layers applied), plans and validates the selected policies (plan_policy)
/// and builds each plan's program. Throws InputError / PlanningError as `lcsim simulate` does, and InputError for
/// ring, zigzag or all-gather CP attention (parallel.cp_attention other than "ulysses"), which the layer proxy does
/// not run.
LivePlans plan_live(const LiveOptions& options);
/// The same from a loaded scenario (tests).
LivePlans plan_live(LoadedScenario loaded, const std::vector<std::string>& policies);

/// Static bytes (parameters, gradients, optimizer states) each GPU holds in `program`: the largest of its
/// SetStatic steps (phases may differ), 0 for a GPU the plan does not use.
std::vector<double> static_bytes_per_gpu(const program::IterationProgram& program);

/// Throws InputError when a plan cannot run in parallel mode (live/gpu/live_parallel.hpp): a pipelined
/// replica (the layer proxy runs a micro-batch's forward and backward together) or several phases (strategy
/// switches are not executed). Rank-serial mode runs both.
void check_parallel_plans(const LivePlans& live);

}  // namespace lcsim
