#include "formats/results_io.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "base/errors.hpp"
#include "base/files.hpp"

namespace lcsim {
namespace {

using Json = nlohmann::ordered_json;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string format(const char* spec, double value) {
  char text[64];
  std::snprintf(text, sizeof text, spec, value);
  return text;
}

Json number(double value) {
  return results_number(value);
}

/// `over_run`: a policy's metrics over its iterations, which add abr_work (per iteration it is abr).
Json metrics_json(const BalanceMetrics& m, bool over_run) {
  Json j;
  j["dbr"] = number(m.dbr);
  j["pr"] = number(m.pr);
  j["abr"] = number(m.abr);
  if (over_run) j["abr_work"] = number(m.abr_work);
  j["cr"] = number(m.cr);
  j["max_min_time_ratio"] = number(m.max_min_time_ratio);
  j["pipeline_gap"] = number(m.pipeline_gap);
  return j;
}

Json iteration_json(const IterationResult& it) {
  Json j;
  j["index"] = it.index;
  j["label"] = it.label;
  j["seconds"] = number(it.seconds);
  j["tokens"] = it.tokens;
  j["sequences"] = it.sequences;
  // Only where a plan splits per sequence, so files of plans that never do stay as they were.
  if (it.per_sequence_micro_batches > 0) j["per_sequence_micro_batches"] = it.per_sequence_micro_batches;
  j["oom"] = it.oom;
  j["peak_GiB"] = number(it.peak_bytes / kGiB);
  j["metrics"] = metrics_json(it.metrics, false);
  Json busy = Json::array();
  for (double s : it.busy_seconds) busy.push_back(number(s));
  j["busy_s"] = std::move(busy);
  return j;
}

Json quantiles_json(const Quantiles& q) {
  return Json{{"p10", number(q.p10)}, {"p50", number(q.p50)}, {"p90", number(q.p90)}};
}

Json numbers_json(const std::vector<double>& values) {
  Json out = Json::array();
  for (double v : values) out.push_back(number(v));
  return out;
}

Json interval_json(const PolicyInterval& in) {
  Json j;
  j["samples"] = in.samples;
  j["iteration_s"] = quantiles_json(in.iteration_s);
  j["speedup"] = quantiles_json(in.speedup);
  j["tokens_per_s"] = quantiles_json(in.tokens_per_s);
  j["p_beats_baseline"] = number(in.p_beats_baseline);
  j["world_iteration_s"] = numbers_json(in.world_iteration_s);
  j["world_speedup"] = numbers_json(in.world_speedup);
  j["world_peak_GiB"] = numbers_json(in.world_peak_GiB);
  Json metrics;
  const auto column = [&](double BalanceMetrics::*field) {
    Json values = Json::array();
    for (const BalanceMetrics& m : in.world_metrics) values.push_back(number(m.*field));
    return values;
  };
  metrics["dbr"] = column(&BalanceMetrics::dbr);
  metrics["pr"] = column(&BalanceMetrics::pr);
  metrics["abr"] = column(&BalanceMetrics::abr);
  metrics["abr_work"] = column(&BalanceMetrics::abr_work);
  metrics["cr"] = column(&BalanceMetrics::cr);
  metrics["max_min_time_ratio"] = column(&BalanceMetrics::max_min_time_ratio);
  metrics["pipeline_gap"] = column(&BalanceMetrics::pipeline_gap);
  j["world_metrics"] = std::move(metrics);
  return j;
}

/// Live runs are measured once: they carry no sampled worlds.
bool has_intervals(const RunResults& results) {
  return results.mode != "live";
}

Json policy_json(const PolicyResult& p, bool intervals) {
  Json j;
  j["name"] = p.label;
  j["kind"] = p.kind;
  j["mean_iteration_s"] = number(p.mean_iteration_s);
  j["p50_iteration_s"] = number(p.p50_iteration_s);
  j["p99_iteration_s"] = number(p.p99_iteration_s);
  j["total_s"] = number(p.total_s);
  j["tokens"] = p.tokens;
  j["tokens_per_s"] = number(p.tokens_per_s);
  j["speedup_vs_baseline"] = number(p.speedup_vs_baseline);
  j["oom_iterations"] = p.oom_iterations;
  j["metrics"] = metrics_json(p.metrics, true);
  Json iterations = Json::array();
  for (const auto& it : p.iterations) iterations.push_back(iteration_json(it));
  j["iterations"] = std::move(iterations);
  if (intervals) j["interval"] = interval_json(p.interval);
  return j;
}

void write_text(const std::string& text, const std::string& file) {
  write_file_atomically(file, text);
}

std::string csv_field(const std::string& value) {
  if (value.find_first_of(",\"\n\r") == std::string::npos) return value;
  std::string quoted = "\"";
  for (char c : value) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string csv_number(double value) {
  return std::isfinite(value) ? format("%.9g", value) : std::string();
}

std::string mode_description(const std::string& mode) {
  if (mode == "plan") return "plan (each iteration's program replayed without contention; no simulation)";
  if (mode == "simulate") return "simulate (SimGrid)";
  return mode;
}

}  // namespace

nlohmann::ordered_json results_to_json(const RunResults& results) {
  Json j;
  j["schema"] = kResultsSchema;
  j["mode"] = results.mode;
  j["scenario"] = results.scenario;
  j["scenario_file"] = results.scenario_file;
  j["seed"] = results.seed;
  j["profile"] = Json{{"label", results.profile_label}, {"calibrated", results.calibrated}};
  j["dataset"] = results.dataset_label;
  j["baseline"] = results.baseline;
  // Only when it is not the baseline, so files of runs where the baseline fits stay as they were.
  if (speedup_reference(results) != results.baseline) j["speedup_reference"] = speedup_reference(results);
  j["paper_figures"] = nlohmann::ordered_json::array();
  for (const PaperSpeedup& f : results.paper_figures)
    j["paper_figures"].push_back({{"policy", f.policy}, {"speedup", f.speedup}, {"source", f.source}});
  Json policies = Json::array();
  for (const auto& p : results.policies) policies.push_back(policy_json(p, has_intervals(results)));
  j["policies"] = std::move(policies);
  if (has_intervals(results)) {
    const RunUncertainty& u = results.uncertainty;
    Json uncertainty;
    uncertainty["samples"] = u.samples;
    uncertainty["sources"] = u.sources;
    uncertainty["model_form_log_sigma"] = number(u.model_form_log_sigma);
    uncertainty["model_form_file"] = u.model_form_file;
    uncertainty["winner"] = u.winner.empty() ? Json(nullptr) : Json(u.winner);
    uncertainty["p_winner"] = number(u.p_winner);
    j["uncertainty"] = std::move(uncertainty);
  }
  return j;
}

void write_results_json(const RunResults& results, const std::string& file) {
  write_text(results_to_json(results).dump(2) + "\n", file);
}

std::string results_to_csv(const RunResults& results) {
  std::ostringstream out;
  out << "policy,kind,iteration,label,seconds,tokens,sequences,oom,peak_GiB,dbr,pr,abr,cr,max_min_time_ratio,"
         "pipeline_gap,samples,iteration_s_p10,iteration_s_p50,iteration_s_p90,speedup_p10,speedup_p50,speedup_p90,"
         "p_beats_baseline\n";
  for (const auto& p : results.policies) {
    const PolicyInterval& in = p.interval;
    for (const auto& it : p.iterations) {
      out << csv_field(p.label) << ',' << csv_field(p.kind) << ',' << it.index << ',' << csv_field(it.label) << ','
          << csv_number(it.seconds) << ',' << it.tokens << ',' << it.sequences << ',' << (it.oom ? 1 : 0) << ','
          << csv_number(it.peak_bytes / kGiB) << ',' << csv_number(it.metrics.dbr) << ',' << csv_number(it.metrics.pr)
          << ',' << csv_number(it.metrics.abr) << ',' << csv_number(it.metrics.cr) << ','
          << csv_number(it.metrics.max_min_time_ratio) << ',' << csv_number(it.metrics.pipeline_gap) << ','
          << in.samples << ',' << csv_number(in.iteration_s.p10) << ',' << csv_number(in.iteration_s.p50) << ','
          << csv_number(in.iteration_s.p90) << ',' << csv_number(in.speedup.p10) << ',' << csv_number(in.speedup.p50)
          << ',' << csv_number(in.speedup.p90) << ',' << csv_number(in.p_beats_baseline) << '\n';
    }
  }
  return out.str();
}

void write_results_csv(const RunResults& results, const std::string& file) {
  write_text(results_to_csv(results), file);
}

void print_results_header(const RunResults& results, const std::string& mode_line, std::ostream& out) {
  out << "scenario  " << results.scenario << " (" << results.scenario_file << ")\n";
  out << "mode      " << mode_line << '\n';
  out << "dataset   " << results.dataset_label << '\n';
  out << "baseline  " << results.baseline;
  if (speedup_reference(results) != results.baseline)
    out << " (does not fit in GPU memory: speedups are over " << speedup_reference(results)
        << ", the fastest policy that fits)";
  out << '\n';
  out << "profile   " << results.profile_label << '\n';
}

std::string oom_cell(const PolicyResult& p) {
  const std::string count = std::to_string(p.oom_iterations) + "/" + std::to_string(p.iterations.size());
  return p.fits() ? count : "OOM " + count;
}

std::string speedup_line(const RunResults& results) {
  const std::string& reference = speedup_reference(results);
  if (reference == results.baseline) return "speedup: tokens/s over " + reference + "'s";
  return "speedup: tokens/s over " + reference + "'s, the fastest policy that fits (the baseline " + results.baseline +
         " does not)";
}

std::string out_of_memory_lines(const RunResults& results) {
  std::string names;
  int count = 0;
  for (const auto& p : results.policies)
    if (!p.fits()) {
      names += (names.empty() ? "" : ", ") + p.label;
      ++count;
    }
  if (count == 0) return "";
  if (count == 1)
    return "OOM: " + names +
           " runs out of GPU memory in some iterations (the warnings say where and why): its plans could not run, so "
           "it cannot be the winner\n";
  return "OOM: " + names +
         " run out of GPU memory in some iterations (the warnings say where and why): their plans could not run, "
         "so none of them can be the winner\n";
}

void print_results_table(const RunResults& results, std::ostream& out, std::size_t max_columns) {
  std::ostringstream header_lines;
  print_results_header(results, mode_description(results.mode), header_lines);
  out << wrap_lines(header_lines.str(), max_columns);

  // Which columns go first when the table must fit: planning time, then the balance metrics, then p50 and p99.
  std::vector<std::vector<std::string>> rows;
  const bool sampled = results.uncertainty.samples > 1;
  std::vector<std::string> header{"policy", "mean s", "p50 s", "p99 s", "tokens/s", "speedup"};
  std::vector<int> drop{0, 0, 2, 2, 0, 0};
  if (sampled) {
    header.insert(header.end(), interval_headers().begin(), interval_headers().end());
    drop.insert(drop.end(), {1, 0, 0});
  }
  for (const char* column : {"DBR", "PR", "ABR", "ABRw", "CR", "OOM iters", "plan ms"}) header.push_back(column);
  drop.insert(drop.end(), {3, 3, 3, 3, 3, 0, 4});
  rows.push_back(std::move(header));
  for (const auto& p : results.policies) {
    std::vector<std::string> row{p.label,
                                 format("%.4f", p.mean_iteration_s),
                                 format("%.4f", p.p50_iteration_s),
                                 format("%.4f", p.p99_iteration_s),
                                 format("%.0f", p.tokens_per_s),
                                 format("%.2fx", p.speedup_vs_baseline)};
    if (sampled) {
      const std::vector<std::string> cells = interval_cells(p, speedup_reference(results));
      row.insert(row.end(), cells.begin(), cells.end());
    }
    for (std::string cell :
         {format("%.3f", p.metrics.dbr), format("%.3f", p.metrics.pr), format("%.3f", p.metrics.abr),
          format("%.3f", p.metrics.abr_work), format("%.3f", p.metrics.cr), oom_cell(p), format("%.1f", p.planning_ms)})
      row.push_back(std::move(cell));
    rows.push_back(std::move(row));
  }
  const std::vector<std::string> left_out = print_fitting_rows(rows, drop, max_columns, out);
  const auto shown = [&](const char* column) {
    return std::find(left_out.begin(), left_out.end(), column) == left_out.end();
  };
  std::ostringstream notes;
  notes << speedup_line(results) << " (same tokens for every policy; re-batching ones take other iteration counts)\n";
  if (shown("DBR"))
    notes << "DBR, PR, ABR, CR: HBP balance metrics, mean over iterations; ABRw: ABR over the run, every iteration\n"
             "weighted by its attention work (sum of idle over sum of capacity)"
          << (shown("plan ms") ? "; plan ms: planning wall time (not in files)\n" : "\n");
  notes << out_of_memory_lines(results);
  out << wrap_lines(notes.str(), max_columns);
  out << wrap_lines(left_out_line(left_out), max_columns);
  std::ostringstream uncertainty;
  print_uncertainty_lines(results, uncertainty);
  out << wrap_lines(uncertainty.str(), max_columns);
}

const std::vector<std::string>& interval_headers() {
  static const std::vector<std::string> headers{"s p10-p90", "speedup p10-p90", "P(>base)"};
  return headers;
}

std::vector<std::string> interval_cells(const PolicyResult& p, const std::string& reference) {
  const PolicyInterval& in = p.interval;
  return {format("%.4f", in.iteration_s.p10) + "-" + format("%.4f", in.iteration_s.p90),
          format("%.2f", in.speedup.p10) + "-" + format("%.2fx", in.speedup.p90),
          p.label == reference ? std::string("-") : format("%.2f", in.p_beats_baseline)};
}

void print_uncertainty_lines(const RunResults& results, std::ostream& out) {
  const RunUncertainty& u = results.uncertainty;
  if (u.samples <= 1) return;
  if (u.winner.empty())
    out << "winner: none -- no policy fits in GPU memory in the nominal world\n";
  else
    out << "winner: " << u.winner << ", the highest tokens/s"
        << (std::all_of(results.policies.begin(), results.policies.end(),
                        [](const PolicyResult& p) { return p.fits(); })
                ? ""
                : " of the policies that fit in memory")
        << " in " << format("%.0f", u.p_winner * 100) << "% of " << u.samples
        << " sampled worlds (P(winner) = " << format("%.2f", u.p_winner) << ")\n";
  out << "s p10-p90, speedup p10-p90: mean iteration time and speedup, 10th-90th percentile over the worlds (80%\n"
         "interval); P(>base): share of worlds where the policy beats ";
  if (speedup_reference(results) == results.baseline)
    out << "the baseline. World 0 is the run above; each\nother world draws:\n";
  else
    out << speedup_reference(results) << " (and fits). World 0 is the run above; each\nother world draws:\n";
  for (const std::string& source : u.sources) out << "  " << source << '\n';
}

void print_aligned_rows(const std::vector<std::vector<std::string>>& rows, std::ostream& out) {
  if (rows.empty()) return;
  std::vector<std::size_t> width(rows.front().size(), 0);
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      // The policy column reads left to right; numbers align on the right.
      line += c == 0 ? row[c] + pad : "  " + pad + row[c];
    }
    out << line << '\n';
  }
}

std::size_t aligned_width(const std::vector<std::vector<std::string>>& rows) {
  if (rows.empty()) return 0;
  std::vector<std::size_t> width(rows.front().size(), 0);
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  std::size_t total = 0;
  for (std::size_t c = 0; c < width.size(); ++c) total += width[c] + (c == 0 ? 0 : 2);
  return total;
}

std::vector<std::string> print_fitting_rows(const std::vector<std::vector<std::string>>& rows,
                                            const std::vector<int>& drop, std::size_t max_columns, std::ostream& out) {
  std::vector<std::vector<std::string>> shown = rows;
  std::vector<int> rank = drop;
  std::vector<std::string> left_out;
  std::vector<std::size_t> left_out_at;  // original column index, to list them in table order
  std::vector<std::size_t> original(rank.size());
  for (std::size_t c = 0; c < original.size(); ++c) original[c] = c;
  while (max_columns > 0 && !shown.empty() && aligned_width(shown) > max_columns) {
    const int highest = rank.empty() ? 0 : *std::max_element(rank.begin(), rank.end());
    if (highest <= 0) break;  // nothing more may go: the table is as narrow as it gets
    for (std::size_t c = rank.size(); c-- > 0;) {
      if (rank[c] != highest) continue;
      left_out_at.push_back(original[c]);
      rank.erase(rank.begin() + static_cast<std::ptrdiff_t>(c));
      original.erase(original.begin() + static_cast<std::ptrdiff_t>(c));
      for (auto& row : shown)
        if (c < row.size()) row.erase(row.begin() + static_cast<std::ptrdiff_t>(c));
    }
  }
  print_aligned_rows(shown, out);
  std::sort(left_out_at.begin(), left_out_at.end());
  for (std::size_t c : left_out_at)
    if (!rows.empty() && c < rows.front().size()) left_out.push_back(rows.front()[c]);
  return left_out;
}

std::string left_out_line(const std::vector<std::string>& left_out) {
  if (left_out.empty()) return "";
  std::string names;
  for (const auto& name : left_out) names += (names.empty() ? "" : ", ") + name;
  return "not shown: " + names + " (--wide shows every column)\n";
}

bool known_results_schema(const std::string& schema) {
  return schema == kResultsSchema || schema == kResultsSchemaV1;
}

Json results_number(double value) {
  if (!std::isfinite(value)) return nullptr;
  return std::strtod(format("%.9g", value).c_str(), nullptr);
}

}  // namespace lcsim
