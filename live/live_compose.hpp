#pragma once
// Rank-serial composition (host logic): the iteration a cluster would have run, from each distinct job's measured
// times on one GPU. The work list is replayed (program/replay.hpp) with every compute step's measured seconds
// -- a whole forward + backward, or its forward or backward part for pipelines -- and the profile's collective and
// transfer times; strategy switches keep the cost model's seconds. A GPU whose job ran out of memory makes the
// iteration an out-of-memory one (no time); per-GPU memory is its static bytes plus the largest activation peak of
// the micro-batches it holds at once.
#include <string>
#include <vector>

#include "live/live_report.hpp"
#include "live/live_work.hpp"

namespace lcsim {

/// What one DeviceJob measured.
struct JobResult {
  double forward_s = 0;  ///< median: layers' forward and the LM head's forward
  double backward_s = 0;
  double total_s = 0;                ///< median of the whole run (not forward + backward: medians apart)
  double activation_peak_bytes = 0;  ///< largest over its runs
  bool oom = false;
  std::string oom_error;
};

MeasuredIteration compose_rank_serial(const program::IterationProgram& program, const ProgramJobs& mapped,
                                      const std::vector<DeviceJob>& jobs, const std::vector<JobResult>& results,
                                      bool record_spans);

}  // namespace lcsim
