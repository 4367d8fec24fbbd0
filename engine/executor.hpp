#pragma once
// The SimGrid executor: one actor per lane -- a GPU, or the GPUs that run identical steps (program::GpuSteps), one
// state and one stack for all of them -- runs its share of each iteration (program/iteration_program.hpp) on the
// platform of the cost model's cluster (engine/platform.hpp). Iterations run one after another in a single
// simulation; an iteration starts when the last GPU has ended the previous one (its queued compute included), so
// an iteration's time is the gap between two such ends. Compute is kept as each GPU's ready time and waited for
// only where the GPU meets others (engine/executor.cpp): a GPU never runs two computations at once here, so that is
// exact, and far cheaper than a SimGrid activity per compute. Communication runs as flows
// (engine/simgrid_collectives.hpp), except the collectives of groups whose links nothing else uses: timed in closed
// form, as their flows alone.
//
// Per GPU and iteration it measures busy time (the union of its compute and collective intervals: overlapped
// communication counts once; waiting for other GPUs, pipeline transfers and pipeline bubbles are idle, as in the
// no-contention replay) and peak memory (static bytes plus the activations of the micro-batches in flight).
#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "model/cost_model.hpp"
#include "model/plan.hpp"
#include "program/iteration_program.hpp"
#include "program/outcome.hpp"

namespace lcsim::sim {

struct SimulationOptions {
  program::ProgramOptions program;
  bool record_spans = false;  ///< keep every GPU's spans (for timelines)
  /// Merge the links that the run's flows always cross together (engine/platform.hpp): exact, so off only to check
  /// that it changes no result.
  bool merge_links = true;
  /// Time the collectives of groups whose links nothing else uses (exclusive_groups) in closed form, as their
  /// flows would take alone, instead of simulating the flows: the same times (to rounding), far fewer events.
  /// Off only to check that.
  bool exclusive_closed_form = true;
  /// Also replay each iteration's program without contention (program/replay.hpp) into
  /// IterationOutcome::estimate_s: the estimate of the very program simulated, built once for both.
  bool estimate = false;
};

using IterationCallback = std::function<void(program::IterationOutcome&&)>;

/// Simulates `plans` in order on the cluster of `cost`; `on_iteration` receives each iteration as soon as it
/// completes. Exceptions from building an iteration (bad plan, profile without a collective) or from the callback
/// stop the simulation and are rethrown. The SimGrid engine is a process-wide singleton: one process runs one
/// simulation (a second call throws std::logic_error), which is why tests that simulate run in their own process.
void simulate(std::span<const IterationPlan* const> plans, const CostModel& cost, const SimulationOptions& options,
              const IterationCallback& on_iteration);

}  // namespace lcsim::sim
