#pragma once
// What running an iteration program yields, whoever runs it: the SimGrid executor (engine/executor.hpp), the
// no-contention replay (program/replay.hpp) or live replay's composition of measured steps.
#include <cstddef>
#include <vector>

#include "program/iteration_program.hpp"

namespace lcsim::program {

/// One interval of a GPU's timeline.
struct GpuSpan {
  int gpu = 0;
  double start_s = 0;
  double end_s = 0;
  WorkKind kind = WorkKind::Compute;
  int replica = -1;
  int micro_batch = -1;
};

struct IterationOutcome {
  std::size_t index = 0;  ///< position in the plans given to simulate()
  double start_s = 0;     ///< simulated clock when the iteration started
  double seconds = 0;
  double wall_s = 0;                 ///< wall time spent running it (building its program included)
  double cpu_s = 0;                  ///< CPU time of the process meanwhile: the wall time on a dedicated core
  double build_cpu_s = 0;            ///< of cpu_s, building the program (the rest runs it)
  std::vector<double> busy_seconds;  ///< per GPU
  std::vector<double> peak_bytes;    ///< per GPU (0 for GPUs the plan does not use)
  /// Per GPU: when its last micro-batch step (compute, or communication of a micro-batch) ends, from the start of
  /// the iteration -- its propagation latency, before gradient sync and the optimizer; 0 when it runs none.
  std::vector<double> propagation_end_s;
  std::vector<GpuSpan> spans;  ///< when SimulationOptions::record_spans
  double estimate_s = 0;       ///< the program without contention, when SimulationOptions::estimate
};

/// Checks (LCSIM_CHECK) that every time and byte count of `outcome` is finite, before it reaches a results file:
/// step times are checked when the program is built, but their sums must not overflow either.
void check_finite(const IterationOutcome& outcome);

}  // namespace lcsim::program
