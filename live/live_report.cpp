#include "live/live_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "base/errors.hpp"
#include "base/files.hpp"
#include "formats/results_io.hpp"
#include "formats/timeline.hpp"
#include "model/plan_demand.hpp"
#include "studies/evaluation.hpp"

namespace lcsim {
namespace {

using Json = nlohmann::ordered_json;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string format(const char* spec, double value) {
  char text[64];
  std::snprintf(text, sizeof text, spec, value);
  return text;
}

Json number(double value) {
  return results_number(value);  // the results writer's rounding: live files are results files
}

std::string cell(const char* spec, double value) {
  return std::isfinite(value) ? format(spec, value) : std::string("-");
}

double largest(const std::vector<double>& values) {
  return values.empty() ? 0.0 : *std::max_element(values.begin(), values.end());
}

std::string baseline_of(const LivePlans& live) {
  return live.loaded.scenario.baseline;
}

std::vector<LiveComparison> comparisons_of(const LivePlans& live, const Prediction& prediction,
                                           const LiveExecution& execution) {
  return compare_live(live_series(live, prediction, execution), baseline_of(live));
}

}  // namespace

std::vector<LiveSeries> live_series(const LivePlans& live, const Prediction& prediction,
                                    const LiveExecution& execution) {
  std::vector<LiveSeries> series;
  for (std::size_t p = 0; p < live.policies.size(); ++p) {
    const LivePolicyPlans& policy = live.policies[p];
    LiveSeries s;
    s.label = policy.label;
    s.predicted_s = prediction.seconds.at(p);
    for (std::size_t i = 0; i < policy.plans.size(); ++i) {
      s.tokens.push_back(policy.plans[i].tokens());
      s.measured_s.push_back(execution.iterations.at(p).at(i).seconds);
    }
    series.push_back(std::move(s));
  }
  return series;
}

RunResults live_results(const LivePlans& live, const LiveExecution& execution,
                        const std::vector<LiveComparison>& comparisons) {
  RunResults results = results_header(live.loaded, "live");
  const int world = live.loaded.scenario.cluster.world_size();
  for (std::size_t p = 0; p < live.policies.size(); ++p) {
    const LivePolicyPlans& policy = live.policies[p];
    PolicyResult result;
    result.label = policy.label;
    result.kind = policy.kind;
    result.planning_ms = policy.planning_ms;
    bool all_measured = true;
    for (std::size_t i = 0; i < policy.plans.size(); ++i) {
      const MeasuredIteration& m = execution.iterations.at(p).at(i);
      IterationEstimate timing;
      timing.seconds = m.seconds;
      timing.busy_seconds = m.busy_seconds;
      timing.busy_seconds.resize(static_cast<std::size_t>(world), 0.0);
      timing.peak_bytes = m.peak_bytes;
      timing.propagation_end_s = m.propagation_end_s;
      timing.oom_gpus = static_cast<int>(m.oom_gpus.size());
      result.iterations.push_back(iteration_result(policy.plans[i], static_cast<int>(i), timing, world));
      all_measured = all_measured && std::isfinite(m.seconds);
    }
    if (all_measured) {
      summarize(result);
    } else {
      // Tokens, OOM count and metrics from every iteration; no time summary without every iteration's time.
      PolicyResult counted = result;
      for (auto& it : counted.iterations)
        if (!std::isfinite(it.seconds)) it.seconds = 0;
      summarize(counted);
      result.tokens = counted.tokens;
      result.oom_iterations = counted.oom_iterations;
      result.metrics = counted.metrics;
      result.mean_iteration_s = result.p50_iteration_s = result.p99_iteration_s = kNaN;
      result.total_s = result.tokens_per_s = kNaN;
    }
    result.speedup_vs_baseline = comparisons.at(p).measured_speedup;
    results.policies.push_back(std::move(result));
  }
  return results;
}

Json job_json(const MeasuredJob& m, const LivePlans& live) {
  Json policies = Json::array();
  for (int tag : m.use.tags) policies.push_back(live.policies.at(static_cast<std::size_t>(tag)).label);
  Json j{{"kind", m.job.kind == DeviceJob::Kind::Optimizer ? "optimizer" : "layers"},
         {"policies", std::move(policies)},
         {"steps", m.use.steps},
         {"timed", m.job.timed},
         {"static_GiB", number(m.job.static_bytes / kGiB)}};
  if (m.job.kind == DeviceJob::Kind::Optimizer) {
    j["parameters"] = number(m.job.parameters);
  } else {
    const ProxyShape& s = m.job.shape;
    j["heads"] = s.shard.heads;
    j["local_tokens"] = s.local;
    j["sharded_tokens"] = s.sharded;
    j["cp"] = s.cp;
    j["sharded_heads"] = s.sharded_heads;
    j["rows"] = s.rows();
    j["layers"] = s.layers;
    j["checkpointed_layers"] = s.checkpointed_layers;
    j["recompute"] = std::string(to_string(s.recompute));
    j["lm_head"] = s.lm_head;
  }
  j["predicted_s"] = Json{{"whole", number(m.use.predicted_whole_s)},
                          {"forward", number(m.use.predicted_forward_s)},
                          {"backward", number(m.use.predicted_backward_s)}};
  j["predicted_spread"] = number(m.use.predicted_spread);
  j["measured_s"] =
      Json{{"whole", number(m.total_s)}, {"forward", number(m.forward_s)}, {"backward", number(m.backward_s)}};
  j["activation_peak_GiB"] = number(m.activation_peak_bytes / kGiB);
  j["oom"] = m.oom;
  return j;
}

Json live_results_json(const LivePlans& live, const Prediction& prediction, const LiveExecution& execution) {
  const std::vector<LiveComparison> comparisons = comparisons_of(live, prediction, execution);
  const std::vector<std::vector<double>> peaks = predicted_peaks(live);
  Json j = results_to_json(live_results(live, execution, comparisons));
  Json notes = Json::array();
  for (const auto& note : execution.notes) notes.push_back(note);
  j["live"] = Json{{"execution", execution.execution},
                   {"device", execution.device},
                   {"collectives", execution.collectives},
                   {"prediction", prediction.label},
                   {"notes", std::move(notes)}};
  for (std::size_t p = 0; p < live.policies.size(); ++p) {
    Json& policy = j["policies"][p];
    const LiveComparison& c = comparisons[p];
    const auto n = static_cast<double>(std::max<std::size_t>(1, live.policies[p].plans.size()));
    policy["predicted_mean_s"] = number(c.predicted_total_s / n);
    policy["mape"] = number(c.mape);
    policy["predicted_speedup"] = number(c.predicted_speedup);
    for (std::size_t i = 0; i < live.policies[p].plans.size(); ++i) {
      const MeasuredIteration& m = execution.iterations[p][i];
      Json& it = policy["iterations"][i];
      it["predicted_s"] = number(prediction.seconds[p][i]);
      it["error"] = number(c.error[i]);
      it["predicted_peak_GiB"] = number(peaks[p][i] / kGiB);
      it["oom_gpus"] = m.oom_gpus;
      it["oom_error"] = m.oom_error;
    }
  }
  if (!execution.jobs.empty()) {
    Json jobs = Json::array();
    for (const MeasuredJob& m : execution.jobs) jobs.push_back(job_json(m, live));
    j["jobs"] = std::move(jobs);
  }
  return j;
}

void write_live_results_json(const LivePlans& live, const Prediction& prediction, const LiveExecution& execution,
                             const std::string& file) {
  write_file_atomically(file, live_results_json(live, prediction, execution).dump(2) + "\n");
}

void print_live_report(const LivePlans& live, const Prediction& prediction, const LiveExecution& execution,
                       std::ostream& out) {
  const std::vector<LiveComparison> comparisons = comparisons_of(live, prediction, execution);
  const std::vector<std::vector<double>> peaks = predicted_peaks(live);
  const Scenario& s = live.loaded.scenario;
  out << "scenario   " << s.name << " (" << s.file << ")\n"
      << "mode       live, " << execution.execution << "; collectives " << execution.collectives << '\n'
      << "device     " << execution.device << '\n'
      << "model      " << s.model.name << ", " << s.model.layers << " layers\n"
      << "dataset    " << live.loaded.dataset_label << '\n'
      << "profile    " << live.loaded.profile.label() << '\n'
      << "predicted  " << prediction.label << '\n'
      << "baseline   " << s.baseline << '\n';
  for (const auto& note : execution.notes) out << "note       " << note << '\n';

  std::vector<std::vector<std::string>> rows;
  rows.push_back(
      {"policy", "iter", "predicted s", "measured s", "error", "peak pred GiB", "peak meas GiB", "OOM GPUs"});
  for (std::size_t p = 0; p < live.policies.size(); ++p)
    for (std::size_t i = 0; i < live.policies[p].plans.size(); ++i) {
      const MeasuredIteration& m = execution.iterations[p][i];
      rows.push_back({live.policies[p].label, std::to_string(i), cell("%.4f", prediction.seconds[p][i]),
                      std::isfinite(m.seconds) ? format("%.4f", m.seconds) : std::string("OOM"),
                      cell("%+.1f%%", comparisons[p].error[i] * 100), format("%.2f", peaks[p][i] / kGiB),
                      cell("%.2f", largest(m.peak_bytes) / kGiB), std::to_string(m.oom_gpus.size())});
    }
  print_aligned_rows(rows, out);
  out << '\n';

  rows.clear();
  rows.push_back(
      {"policy", "mean pred s", "mean meas s", "MAPE", "tokens/s meas", "speedup pred", "speedup meas", "measured"});
  for (std::size_t p = 0; p < live.policies.size(); ++p) {
    const LiveComparison& c = comparisons[p];
    const auto n = static_cast<double>(std::max<std::size_t>(1, live.policies[p].plans.size()));
    rows.push_back({c.label, cell("%.4f", c.predicted_total_s / n), cell("%.4f", c.measured_total_s / n),
                    cell("%.1f%%", c.mape * 100), cell("%.0f", c.measured_tokens_per_s),
                    cell("%.2fx", c.predicted_speedup), cell("%.2fx", c.measured_speedup),
                    std::to_string(c.measured_iterations) + "/" + std::to_string(live.policies[p].plans.size())});
  }
  print_aligned_rows(rows, out);
  out << "error: (predicted - measured) / measured; MAPE: mean |error| over measured iterations; speedup: tokens/s\n"
         "over "
      << s.baseline
      << "'s; peak: largest per-GPU memory (measured: the plan's static bytes, reserved on the device, plus the\n"
         "activation high-water mark of the GPU's micro-batches)\n";
  const double capacity = live.loaded.cost->capacity_bytes();
  for (std::size_t p = 0; p < live.policies.size(); ++p)
    for (std::size_t i = 0; i < live.policies[p].plans.size(); ++i) {
      const MeasuredIteration& m = execution.iterations[p][i];
      if (m.oom_gpus.empty()) continue;
      out << "OOM: " << live.policies[p].label << " iteration " << i << ", GPU(s)";
      for (int g : m.oom_gpus) out << ' ' << g;
      out << ": the plan predicts a peak of " << format("%.2f", peaks[p][i] / kGiB) << " GiB of "
          << format("%.2f", capacity / kGiB) << " GiB usable; " << m.oom_error << '\n';
    }
}

void write_live_trace(const LivePlans& live, const LiveExecution& execution, const std::string& file) {
  TimelineWriter timeline(file, live.loaded.scenario.cluster);
  double clock = 0;
  for (std::size_t p = 0; p < live.policies.size(); ++p)
    for (std::size_t i = 0; i < live.policies[p].plans.size(); ++i) {
      const MeasuredIteration& m = execution.iterations[p][i];
      if (!std::isfinite(m.seconds)) continue;  // out of memory: nothing to draw
      program::IterationOutcome outcome;
      outcome.index = i;
      outcome.start_s = clock;
      outcome.seconds = m.seconds;
      outcome.busy_seconds = m.busy_seconds;
      outcome.busy_seconds.resize(static_cast<std::size_t>(live.loaded.scenario.cluster.world_size()), 0.0);
      outcome.peak_bytes = m.peak_bytes;
      for (program::GpuSpan span : m.spans) {
        span.start_s += clock;
        span.end_s += clock;
        outcome.spans.push_back(span);
      }
      timeline.add_iteration(live.policies[p].label, i, live.policies[p].plans[i], outcome);
      clock += m.seconds;
    }
  timeline.close();
}

}  // namespace lcsim
