#pragma once
// Parallel execution of `lcsim-gpu live` (a GPU of this node for every GPU of the scenario's cluster): one thread
// per GPU runs its work list in order -- the layer proxy for compute steps on the GPU's compute stream, and every
// collective step as real NCCL calls of the cost model's sizes and counts on a communicator of exactly that
// group (CP all-to-alls, TP all-gathers / reduce-scatters, the ZeRO gradient reduce-scatter and parameter
// all-gather) on a communication stream; Skrull's overlap runs the local compute beside the all-to-all. The
// collectives move buffers of the right size, not the tensors the proxy computes on (its Ulysses attention runs on
// local copies, as in rank-serial mode). Iteration time: CUDA events, the slowest GPU, median of the timed runs.
//
// Before an iteration runs with NCCL, each GPU runs its micro-batches alone once: one that runs out of memory
// there is reported as an out-of-memory iteration instead of leaving the others waiting in a collective.
// Pipelined plans (pp > 1) and plans with several phases (strategy switches) run in rank-serial mode only:
// check_parallel_plans says so before any GPU work.
#include <ostream>

#include "live/live_options.hpp"
#include "live/live_plan.hpp"
#include "live/live_report.hpp"

namespace lcsim::gpu {

LiveExecution run_parallel(const LivePlans& live, const LiveOptions& options, std::ostream& progress);

}  // namespace lcsim::gpu
