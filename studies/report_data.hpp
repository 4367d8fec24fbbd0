#pragma once
// What `lcsim report`'s page shows (formats/html_report.hpp draws it), as one JSON document:
//   { "schema": "lcsim-report-data/1", "source": file the figures come from, "scenario", "mode", "dataset",
//     "profile": {"label", "calibrated"}, "baseline", "reference": the policy speedups are over, "samples",
//     "winner": label or null, "p_winner": number or null, "notes": [ lines the page prints under its title ],
//     "policies": [ { "name", "kind", "mean_s", "tokens_per_s", "speedup", "iterations", "oom_iterations",
//                     "iteration_s_p10", "iteration_s_p90", "speedup_p10", "speedup_p90", "p_beats_baseline"
//                     (null without sampled worlds),
//                     "gpu_busy_s", "gpu_idle_s": [ per GPU, mean over iterations ],
//                     "gpu_exposed_comm_s": [ per GPU ] or null when the input has no spans } ],
//     "sweep": null or { "axis", "numeric": bool, "points": [ { "label", "x", "gpus",
//                        "policies": { name: { "speedup", "p10", "p90", "oom" } } } ] },
//     "timeline": null or { "iteration", "gpus_shown", "gpus", "kinds": [ names ], "communication": [ bool per kind ],
//                           "panels": [ { "policy", "seconds", "spans": [ [gpu, start_s, end_s, kind], ... ] } ] } }
// Per-GPU busy time includes communication that overlaps compute; exposed communication is the part of it when the
// GPU communicates and does not compute. A sweep's table, breakdown and timeline are of its last point.
#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "program/outcome.hpp"

namespace lcsim {

/// GPUs a report's timeline draws (the first ones): more would make the page heavy and every row a hairline.
inline constexpr int kReportTimelineGpus = 64;

/// Collects, as a simulation runs (SimulateSettings::on_outcome), each policy's exposed communication per GPU and
/// the spans of its first iteration for the timeline.
class ReportSpans {
 public:
  void add(std::size_t policy, std::size_t iteration, const program::IterationOutcome& outcome);
  /// Per policy, per GPU: exposed communication seconds summed over iterations.
  const std::vector<std::vector<double>>& exposed_comm_s() const { return exposed_; }
  /// Per policy: the first iteration's spans on the first kReportTimelineGpus GPUs, from that iteration's start.
  const std::vector<std::vector<program::GpuSpan>>& first_spans() const { return spans_; }
  const std::vector<double>& first_seconds() const { return seconds_; }
  const std::vector<std::size_t>& iterations() const { return iterations_; }

 private:
  std::vector<std::vector<double>> exposed_;
  std::vector<std::vector<program::GpuSpan>> spans_;
  std::vector<double> seconds_;
  std::vector<std::size_t> iterations_;
};

/// The report data of a results document (`lcsim plan|simulate --json`, schema lcsim-results/1 or /2) or a sweep's
/// (`lcsim sweep --json`, lcsim-sweep/1). InputError naming `file` and the JSON path of anything missing or of the
/// wrong type.
nlohmann::ordered_json report_data_from_results(const nlohmann::json& document, const std::string& file);

/// Adds what only the simulation's spans give: per-GPU exposed communication and the timeline of the winner beside
/// the baseline (or the speedups' reference when the baseline does not fit).
void add_report_spans(nlohmann::ordered_json& data, const ReportSpans& spans);

}  // namespace lcsim
