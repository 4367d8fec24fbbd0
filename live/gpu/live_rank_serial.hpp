#pragma once
// Rank-serial execution of `lcsim-gpu live` (fewer GPUs than the scenario's cluster): every distinct piece of a GPU's
// compute (live/live_work.hpp) runs on GPU 0 -- warm-up first, then timed repetitions, median kept --
// and each iteration is composed on the host by replaying its work list with the measured compute seconds and the
// profile's collective and transfer times (program/replay.hpp: the simulator's semantics, no contention).
#include <ostream>

#include "live/live_options.hpp"
#include "live/live_plan.hpp"
#include "live/live_report.hpp"

namespace lcsim::gpu {

/// Measures and composes every plan of `live`; progress lines go to `progress`.
LiveExecution run_rank_serial(const LivePlans& live, const LiveOptions& options, std::ostream& progress);

}  // namespace lcsim::gpu
