#include "calibrate/kineto/kineto_fit.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <limits>
#include <map>

#include "base/errors.hpp"
#include "base/json_reader.hpp"
#include "calibrate/kineto/kineto_field_fits.hpp"
#include "model/gpu_kind.hpp"

namespace lcsim {
namespace {

double product(const std::vector<std::int64_t>& dims, std::size_t from, std::size_t to) {
  double p = 1;
  for (std::size_t i = from; i < to; ++i) p *= static_cast<double>(dims[i]);
  return p;
}

/// When the trace starts, in ns since the epoch: Kineto writes timestamps in us relative to
/// baseTimeNanoseconds (its traces' first events sit weeks after it), so the start is the base plus the earliest
/// step, op or kernel.
std::uint64_t trace_start_ns(const KinetoTrace& t) {
  double first = std::numeric_limits<double>::infinity();
  for (const auto& s : t.steps) first = std::min(first, s.ts_us);
  for (const auto& o : t.ops) first = std::min(first, o.ts_us);
  for (const auto& k : t.kernels) first = std::min(first, k.ts_us);
  if (!std::isfinite(first) || first <= 0 || first > 1e15) return *t.base_time_ns;  // none, or not relative
  return *t.base_time_ns + static_cast<std::uint64_t>(first * 1e3);
}

/// "YYYY-MM-DDTHH:MM:SSZ" of a time in ns since the epoch.
std::string utc_date(std::uint64_t ns) {
  const std::time_t secs = static_cast<std::time_t>(ns / 1000000000u);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

/// The profile's provenance: where it came from (the traces, their GPU and date), the fitted fields each
/// validation entry in options.fitted_on measured, and the notes.
void record_provenance(Profile& p, const std::vector<KinetoTrace>& traces, const TraceFitOptions& options,
                       const trace_fit::FieldReport& report, const TraceStepSummary& steps, const Profile& prior) {
  auto& pv = p.provenance;
  for (const auto& entry : options.fitted_on)
    for (const auto& field : report.fitted) pv.fitted_on.push_back({entry, field});
  std::string device;
  std::optional<std::uint64_t> base;
  for (const auto& t : traces) {
    if (!t.device_name.empty() && device.empty()) device = t.device_name;
    if (t.base_time_ns && !base) base = trace_start_ns(t);
  }
  pv.calibrated = true;
  pv.source = "PyTorch profiler trace";
  pv.device = device.empty() ? "unknown (the traces have no deviceProperties)" : device;
  pv.date = base ? utc_date(*base) : "unknown (the traces have no baseTimeNanoseconds)";
  pv.tool_version = LCSIM_VERSION;
  pv.driver = pv.cuda = pv.nccl = "";
  pv.model = "";
  pv.notes = trace_fit::provenance_notes(traces, report, steps, prior, p.compute.peak_tflops);
  const std::string kind = match_gpu_kind(device);
  if (!kind.empty()) p.gpu = kind;
}

void check_traces(const std::vector<KinetoTrace>& traces, const TraceFitOptions& options) {
  if (traces.empty()) throw InputError("no trace given");
  if (options.gpus_per_node < 1) throw InputError("--gpus-per-node: must be at least 1");
  for (const auto& t : traces) {
    if (!t.device_name.empty() && !traces.front().device_name.empty() && t.device_name != traces.front().device_name) {
      throw InputError(t.file + ": traced on " + t.device_name + ", " + traces.front().file + " on " +
                       traces.front().device_name + ": one profile describes one GPU kind");
    }
  }
}

}  // namespace

std::optional<GemmShape> gemm_shape(const KinetoCpuOp& op) {
  const auto& d = op.input_dims;
  auto dims = [&](std::size_t i, std::size_t rank) { return i < d.size() && d[i].size() == rank; };
  if (op.name == "aten::mm" && dims(0, 2) && dims(1, 2)) {
    return GemmShape{double(d[0][0]), double(d[1][1]), double(d[0][1])};
  }
  if (op.name == "aten::addmm" && dims(1, 2) && dims(2, 2)) {
    return GemmShape{double(d[1][0]), double(d[2][1]), double(d[1][1])};
  }
  if (op.name == "aten::bmm" && dims(0, 3) && dims(1, 3)) {
    return GemmShape{double(d[0][0]) * double(d[0][1]), double(d[1][2]), double(d[0][2])};
  }
  if (op.name == "aten::baddbmm" && dims(1, 3) && dims(2, 3)) {
    return GemmShape{double(d[1][0]) * double(d[1][1]), double(d[2][2]), double(d[1][2])};
  }
  if ((op.name == "aten::linear" || op.name == "aten::matmul") && d.size() >= 2 && d[0].size() >= 2 &&
      d[1].size() == 2) {
    const auto& x = d[0];
    // linear's weight is [out, in]; matmul's second operand is [in, out].
    const bool linear = op.name == "aten::linear";
    return GemmShape{product(x, 0, x.size() - 1), double(linear ? d[1][0] : d[1][1]), double(x.back())};
  }
  return std::nullopt;
}

TraceFit fit_profile_from_traces(const std::vector<KinetoTrace>& traces, const Profile& prior,
                                 const TraceFitOptions& options) {
  using namespace trace_fit;
  check_traces(traces, options);
  // Each fit reads the profile as the fits before it left it (the cost model prices with their fields), so the
  // order is the report's and matters.
  Profile p = prior;
  FieldReport report;
  const GemmFit gemm = fit_gemm_efficiency(traces, p);
  if (gemm.efficiency) p.compute.gemm_efficiency = gemm.efficiency->curve;
  report_gemm_efficiency(gemm, report);

  const AttentionFit attention = fit_attention(traces, p);
  if (attention.efficiency) p.compute.attention_efficiency = attention.efficiency->curve;
  if (attention.backward_ratio) p.compute.attention_backward_ratio = attention.backward_ratio->slope;
  report_attention(attention, report);

  const CollectivesFit collectives = fit_collectives(traces, options.gpus_per_node);
  apply_collectives(collectives, p);
  report_collectives(collectives, report);

  const ElementwiseShareFit share = fit_elementwise_share(traces, options.model, p);
  if (share.missing == ElementwiseShareFit::Missing::None) {
    p.compute.gemm_work_overhead = share.gemm_work_overhead;
    if (share.joint) {
      p.compute.layer_overhead_us = share.layer_overhead_us;
      p.compute.layer_overhead_fit_mape = share.mape;  // of the element-wise time alone: wider than a whole layer's
    }
  }
  report_elementwise_share(share, options.model ? options.model->name : std::string(), p.gpu, report);
  report_kept_fields(report);

  const StepTimes steps = measure_steps(traces);
  report_steps(steps, report);

  const IssueFloorFit floor = fit_issue_floor(traces, options, steps.first_trace_busy_s, p);
  if (floor.kept == IssueFloorFit::Kept::None) {
    p.compute.layer_issue_us = floor.layer_issue_us;
    p.compute.step_issue_us = 0;
  }
  report_issue_floor(floor, report);

  record_provenance(p, traces, options, report, steps.summary, prior);
  return TraceFit{std::move(p), std::move(report.lines), steps.summary, report.fitted_fields};
}

std::vector<UntracedStep> read_untraced_steps(const std::string& file) {
  const nlohmann::json doc = parse_json_file(file);
  if (!doc.is_object() || !doc.contains("steps") || !doc["steps"].is_array() || doc["steps"].empty())
    throw InputError(file + ": steps: expected a non-empty array (calibrate/torch_trace_step.py --repeats)");
  std::vector<UntracedStep> out;
  for (std::size_t i = 0; i < doc["steps"].size(); ++i) {
    const auto& step = doc["steps"][i];
    const auto positive = [&](const char* key) {
      const std::string where = file + ": steps[" + std::to_string(i) + "]." + key;
      if (!step.is_object() || !step.contains(key))
        throw InputError(where + ": missing (record the steps with calibrate/torch_trace_step.py --repeats N)");
      const auto& v = step[key];
      if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
        throw InputError(where + ": expected a positive number");
      return v.get<double>();
    };
    out.push_back({positive("tokens"), positive("untraced_seconds")});
  }
  return out;
}

nlohmann::ordered_json trace_steps_results(const std::vector<KinetoTrace>& traces, const std::string& scenario_name,
                                           const std::string& scenario_file, const std::string& policy,
                                           std::span<const UntracedStep> untraced) {
  // A step ends when its slowest rank does: per step number, the longest ProfilerStep over the traces.
  std::map<std::int64_t, double> step_s;
  std::string device, files;
  for (const auto& t : traces) {
    for (const auto& s : t.steps) step_s[s.number] = std::max(step_s[s.number], s.dur_us * 1e-6);
    if (device.empty()) device = t.device_name;
    files += (files.empty() ? "" : ", ") + t.file;
  }
  if (step_s.empty()) throw InputError(traces.front().file + ": no ProfilerStep#N: no step time to measure");
  if (!untraced.empty() && untraced.size() != step_s.size())
    throw InputError(traces.front().file + ": " + std::to_string(step_s.size()) + " ProfilerStep numbers, but " +
                     std::to_string(untraced.size()) + " untraced step times");
  nlohmann::ordered_json iterations = nlohmann::ordered_json::array();
  double sum = 0;
  std::size_t k = 0;
  for (const auto& [number, traced_s] : step_s) {
    // Untraced: the job's own step time; a CPU-bound step takes about twice as long while the profiler records it.
    const double seconds = untraced.empty() ? traced_s : untraced[k++].seconds;
    iterations.push_back({{"step", number}, {"seconds", seconds}});
    sum += seconds;
  }
  nlohmann::ordered_json out;
  out["schema"] = "lcsim-results/1";
  out["mode"] = "live";
  out["scenario"] = scenario_name;
  out["scenario_file"] = scenario_file;
  out["baseline"] = policy;
  out["policies"] = nlohmann::ordered_json::array({{{"name", policy},
                                                    {"mean_iteration_s", sum / static_cast<double>(step_s.size())},
                                                    {"speedup_vs_baseline", 1.0},
                                                    {"oom_iterations", 0},
                                                    {"iterations", iterations}}});
  out["live"] = {
      {"execution", "the user's own training job, PyTorch profiler (Kineto) trace"},
      {"device", std::to_string(traces.size()) + " trace(s), " + (device.empty() ? "device unknown" : device)},
      {"notes",
       {"written by lcsim-fit-trace from " + files +
        (untraced.empty() ? "; seconds = the slowest rank's ProfilerStep#N duration, per step number (the profiler's "
                            "own overhead included)"
                          : "; seconds = the job's step times without the profiler (--untraced), in step order")}}};
  return out;
}

}  // namespace lcsim
