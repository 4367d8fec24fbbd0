#pragma once
// A calibration profile from PyTorch profiler (Kineto) traces of the user's own training job: the fields a GPU
// calibration fits, through the same fits (efficiency_curve, fit_collective_segments), from the kernels the
// trace recorded. A field the traces cannot give keeps the prior's value, and the report says why, field by
// field. What each field needs from a trace: docs/calibration.md ("Profiles from PyTorch profiler traces").
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/kineto/kineto_trace.hpp"
#include "model/model.hpp"
#include "model/profile.hpp"

namespace lcsim {

/// One step of the traced job timed without the profiler: the tokens it trained on and its seconds.
struct UntracedStep {
  double tokens = 0;
  double seconds = 0;
};

struct TraceFitOptions {
  /// GPUs a node has: a process group whose global ranks fall in one block of this many is on NVLink, else it
  /// crosses nodes (InfiniBand). Kineto does not record the node layout.
  int gpus_per_node = 8;
  /// The traced model's shape: with it the element-wise share (`gemm_work_overhead`) and a layer's fixed cost
  /// (`layer_overhead_us`) are fitted, from what the step's element-wise kernels take beyond their least HBM
  /// traffic, which depends on the model's widths.
  std::optional<ModelConfig> model;
  /// The traced job's step times without the profiler, in the trace's step order (one trace): with `model`, they
  /// fit the framework's CPU floor (`layer_issue_us`). A trace's own CPU-bound steps are no measure of it: the
  /// profiler's recording costs about as much CPU as the issuing (docs/measurements/h200-2026-11-27.md).
  std::vector<UntracedStep> untraced_steps;
  /// Validation-catalogue entries that measure this very job: every field fitted here is recorded as set from each
  /// (provenance.fitted_on), so `lcsim validate` counts them as fitted, not held out.
  std::vector<std::string> fitted_on;
};

/// One profile field: fitted from the traces, or kept from the prior and why.
struct TraceFieldLine {
  std::string field;
  bool fitted = false;
  int points = 0;    ///< fitted points, held-out ones included
  int held_out = 0;  ///< of which held out
  std::optional<double> held_out_mape;
  std::string detail;  ///< the fitted values, or why the prior was kept
  bool noted = false;  ///< measured, but no profile field holds it: recorded in provenance.notes
};

/// What the traces measured that the profile has no field for.
struct TraceStepSummary {
  int steps = 0;               ///< ProfilerStep#N windows with at least one kernel, over all traces
  double mean_step_s = 0;      ///< mean ProfilerStep duration (CPU annotation)
  double mean_gpu_idle_s = 0;  ///< mean GPU idle time between a step's first and last kernel (all streams)
  double mean_gpu_busy_s = 0;  ///< mean union of the step's kernel intervals
};

struct TraceFit {
  Profile profile;
  std::vector<TraceFieldLine> report;
  TraceStepSummary steps;
  int fitted_fields = 0;
};

/// `traces` must have their kernels classified (classify_kernels). `prior` supplies every field the traces lack
/// and the peak the efficiencies refer to. Throws InputError naming the trace when a kernel ran above the prior's
/// peak (the prior is for another GPU) or the traces are of different GPUs.
TraceFit fit_profile_from_traces(const std::vector<KinetoTrace>& traces, const Profile& prior,
                                 const TraceFitOptions& options = {});

/// The traces' own step times as a measured run (`lcsim-results/1`, mode "live"), so that a `measured` entry of
/// the validation catalogue (studies/validation_catalogue.hpp) compares the scenario describing the traced job with
/// them: `policy` is the policy the job ran, with mean_iteration_s the mean over step numbers of the slowest rank's
/// ProfilerStep duration. `scenario_name` and `scenario_file` name that scenario. InputError when no trace has a
/// step.
/// With `untraced` (one per step number, in order), those seconds replace the traced durations: the job's own.
nlohmann::ordered_json trace_steps_results(const std::vector<KinetoTrace>& traces, const std::string& scenario_name,
                                           const std::string& scenario_file, const std::string& policy,
                                           std::span<const UntracedStep> untraced = {});

/// steps[].tokens and .untraced_seconds of a steps file (calibrate/torch_trace_step.py --repeats), in order;
/// InputError naming the file and key when one is missing or not a positive number.
std::vector<UntracedStep> read_untraced_steps(const std::string& file);

/// The report as a table, one line per field.
std::string format_trace_fit_report(const TraceFit& fit);

/// The GEMM of a matmul CPU op from its recorded input shapes: rows (tokens), n, k; empty for an op that is not
/// a matmul or whose shapes were not recorded. aten::mm, addmm, bmm, baddbmm, linear, matmul (2-D weight).
struct GemmShape {
  double tokens = 0, n = 0, k = 0;
};
std::optional<GemmShape> gemm_shape(const KinetoCpuOp& op);

/// The nccl-tests "size" (bytes) and profile op of a c10d collective; empty with `why` set when it has none
/// (broadcast, barrier, an unknown dtype or missing sizes).
struct CollectiveSize {
  CollectiveOp op = CollectiveOp::AllReduce;
  double bytes = 0;
};
std::optional<CollectiveSize> collective_size(const KinetoCollective& c, std::string& why);

}  // namespace lcsim
