#pragma once
// What `lcsim-gpu live` measured, and its reports: the predicted-vs-measured table, the results file (schema
// lcsim-results/2, mode "live") and the Chrome trace (the simulator's track layout, formats/timeline.hpp).
//
// Results file: `lcsim plan`'s schema with the measured figures in its fields (seconds, busy_s, peak_GiB: static
// bytes as the plan's plus measured activations; an iteration that ran out of memory has seconds null and oom
// true, and its policy's time summaries are null), plus
//   top level        "live": {"execution", "device", "collectives", "prediction", "notes": [...]}
//   per policy       "predicted_mean_s", "mape", "predicted_speedup" (measured speedup: speedup_vs_baseline)
//   per iteration    "predicted_s", "error" ((predicted - measured) / measured), "predicted_peak_GiB",
//                    "oom_gpus" (GPUs whose work failed to allocate), "oom_error" (the allocation failure)
//   top level        "jobs" (rank-serial runs): each distinct job -- its shape, the policies and steps that run it,
//                    the cost model's seconds for those steps ("predicted_s": whole, forward, backward) and the
//                    measured medians ("measured_s"), so that a mispriced micro-batch shape shows by itself
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "live/live_compare.hpp"
#include "live/live_plan.hpp"
#include "live/live_predicted.hpp"
#include "live/live_work.hpp"
#include "model/results.hpp"

namespace lcsim {

struct MeasuredIteration {
  double seconds = 0;                     ///< NaN when not measured (out of memory)
  std::vector<double> busy_seconds;       ///< per GPU
  std::vector<double> propagation_end_s;  ///< per GPU: end of its last micro-batch step (pipeline_gap)
  std::vector<double> peak_bytes;         ///< per GPU: static bytes (as the plan's) + measured activation peak
  std::vector<int> oom_gpus;              ///< GPUs whose work failed to allocate
  std::string oom_error;                  ///< the first allocation failure's message
  std::vector<program::GpuSpan> spans;    ///< from time 0 of the iteration
};

/// One distinct job of a rank-serial run: what ran, what the cost model charged the steps that run it, and what it
/// measured (medians; NaN for a memory probe's times or an out-of-memory job).
struct MeasuredJob {
  DeviceJob job;
  JobUse use;
  double forward_s = 0;
  double backward_s = 0;
  double total_s = 0;
  double activation_peak_bytes = 0;
  bool oom = false;
};

struct LiveExecution {
  std::string execution;    ///< e.g. "rank-serial: every GPU's compute in turn on GPU 0"
  std::string device;       ///< e.g. "1 x NVIDIA H100 80GB HBM3"
  std::string collectives;  ///< "from the profile (not run)" or "NCCL on this node"
  std::vector<std::string> notes;
  std::vector<std::vector<MeasuredIteration>> iterations;  ///< [policy][iteration], parallel to LivePlans
  std::vector<MeasuredJob> jobs;  ///< rank-serial runs: every distinct job, use tags = policy indices
};

/// The series compare_live() takes, from the plans, prediction and measurements.
std::vector<LiveSeries> live_series(const LivePlans& live, const Prediction& prediction,
                                    const LiveExecution& execution);

/// The measured results in the `lcsim plan` shape (mode "live"); speedups are the measured ones of `comparisons`.
RunResults live_results(const LivePlans& live, const LiveExecution& execution,
                        const std::vector<LiveComparison>& comparisons);

nlohmann::ordered_json live_results_json(const LivePlans& live, const Prediction& prediction,
                                         const LiveExecution& execution);
void write_live_results_json(const LivePlans& live, const Prediction& prediction, const LiveExecution& execution,
                             const std::string& file);

/// Header lines (saying how the run was executed and where the prediction comes from), one row per iteration
/// (predicted and measured seconds, error, predicted and measured peak memory) and one per policy (means, MAPE,
/// tokens/s, predicted and measured speedup), then each out-of-memory iteration with its predicted peak.
void print_live_report(const LivePlans& live, const Prediction& prediction, const LiveExecution& execution,
                       std::ostream& out);

/// The measured iterations, one after another on one time axis, in the simulator's track layout.
void write_live_trace(const LivePlans& live, const LiveExecution& execution, const std::string& file);

}  // namespace lcsim
