#include "live/job_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "base/errors.hpp"
#include "base/files.hpp"
#include "base/json_reader.hpp"
#include "formats/results_io.hpp"
#include "studies/validation_catalogue.hpp"

namespace lcsim {
namespace {

using Json = nlohmann::json;

Recompute recompute_of(const std::string& text, const std::string& where) {
  for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
    if (text == to_string(r)) return r;
  throw InputError(where + ": expected none, selective or full, got '" + text + "'");
}

/// A number at `key` of `j`, or InputError naming the file and path.
double number_at(const Json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_number()) throw InputError(where + "." + key + ": expected a number");
  return j[key].get<double>();
}

std::vector<int> lengths_at(const Json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_array()) throw InputError(where + "." + key + ": expected an array");
  std::vector<int> out;
  for (const auto& v : j[key]) {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > (1 << 30))
      throw InputError(where + "." + key + ": expected sequence lengths (positive integers)");
    out.push_back(v.get<int>());
  }
  return out;
}

void read_live_jobs(const Json& doc, const std::string& file, std::vector<MeasuredMicroBatch>& out) {
  if (!doc.contains("jobs") || !doc["jobs"].is_array())
    throw InputError(file +
                     ": jobs: a live results file without per-job times (written before 2026-11-26, or a "
                     "parallel run)");
  const Json& jobs = doc["jobs"];
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const Json& j = jobs[i];
    const std::string where = file + ": jobs[" + std::to_string(i) + "]";
    if (j.value("kind", "") != "layers" || !j.value("timed", false) || j.value("oom", false)) continue;
    const Json& measured = j.at("measured_s");
    const Json& predicted = j.at("predicted_s");
    if (!measured["whole"].is_number() || !predicted["whole"].is_number()) continue;  // pipeline parts: not here
    MeasuredMicroBatch m;
    m.file = file;
    m.local = lengths_at(j, "local_tokens", where);
    m.sharded = lengths_at(j, "sharded_tokens", where);
    m.cp = static_cast<int>(number_at(j, "cp", where));
    m.layers = static_cast<int>(number_at(j, "layers", where));
    m.checkpointed_layers = static_cast<int>(number_at(j, "checkpointed_layers", where));
    m.recompute = recompute_of(j.value("recompute", ""), where + ".recompute");
    m.lm_head = j.value("lm_head", false);
    m.steps = static_cast<int>(number_at(j, "steps", where));
    m.shard_heads = static_cast<int>(number_at(j, "heads", where));
    m.measured_s = measured["whole"].get<double>();
    if (measured.contains("forward") && measured["forward"].is_number())
      m.measured_forward_s = measured["forward"].get<double>();
    m.recorded_s = predicted["whole"].get<double>();
    out.push_back(std::move(m));
  }
}

void read_mix_points(const Json& doc, const std::string& file, std::vector<MeasuredMicroBatch>& out) {
  const int cp = static_cast<int>(number_at(doc, "cp", file));
  const int layers = static_cast<int>(number_at(doc, "layers", file));
  const Recompute recompute = recompute_of(doc.value("recompute", ""), file + ": recompute");
  const Json& points = doc.at("points");
  for (std::size_t i = 0; i < points.size(); ++i) {
    const Json& p = points[i];
    const std::string where = file + ": points[" + std::to_string(i) + "]";
    if (p.value("oom", false) || !p["measured_s"]["whole"].is_number()) continue;
    MeasuredMicroBatch m;
    m.file = file;
    const int k = static_cast<int>(number_at(p, "shorts", where));
    const int s = static_cast<int>(number_at(p, "short_tokens", where));
    const int l = static_cast<int>(number_at(p, "long_tokens", where));
    m.local.assign(static_cast<std::size_t>(k), s);
    if (l > 0) m.sharded = {l};
    m.cp = cp;
    m.layers = layers;
    m.recompute = recompute;
    m.measured_s = p["measured_s"]["whole"].get<double>();
    m.recorded_s = number_at(p, "predicted_s", where);
    out.push_back(std::move(m));
  }
}

std::string bucket(int tokens) {
  if (tokens < 1024) return "< 1K";
  if (tokens < 4096) return "1K-4K";
  if (tokens < 16384) return "4K-16K";
  if (tokens < 65536) return "16K-64K";
  return ">= 64K";
}

std::string percent(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%+.1f%%", v * 100);
  return text;
}

}  // namespace

std::string MeasuredMicroBatch::kind() const {
  if (sharded.empty()) return "whole, longest " + bucket(*std::max_element(local.begin(), local.end()));
  const std::string s = "sharded " + bucket(*std::max_element(sharded.begin(), sharded.end()));
  return local.empty() ? s : "whole + " + s;
}

namespace {

std::vector<MeasuredMicroBatch> measured_micro_batches(const Json& doc, const std::string& file) {
  if (!doc.is_object()) throw InputError(file + ": expected a JSON object");
  std::vector<MeasuredMicroBatch> out;
  const std::string schema = doc.value("schema", "");
  if (schema == "lcsim-mix-sweep/1") {
    read_mix_points(doc, file, out);
  } else if (known_results_schema(schema) && doc.value("mode", "") == "live") {
    read_live_jobs(doc, file, out);
  } else {
    throw InputError(file + ": schema: expected an lcsim-gpu live --json file or lcsim-mix-sweep/1, got '" + schema +
                     "'");
  }
  return out;
}

}  // namespace

std::vector<MeasuredMicroBatch> read_measured_micro_batches(const std::string& file) {
  return measured_micro_batches(parse_json_file(file), file);
}

void predict_jobs(const LoadedScenario& loaded, std::span<MeasuredMicroBatch> jobs) {
  const CostModel& cost = *loaded.cost;
  const ModelConfig& model = loaded.scenario.model;
  for (MeasuredMicroBatch& m : jobs) {
    if (m.shard_heads > 0 && model.heads % m.shard_heads != 0)
      throw InputError(m.file + ": a job of " + std::to_string(m.shard_heads) + " heads is no TP shard of " +
                       model.name);
    m.tp = m.shard_heads > 0 ? model.heads / m.shard_heads : 1;
    std::vector<SequenceShare> shares;
    for (int t : m.local) shares.push_back({t, 1});
    for (int t : m.sharded) shares.push_back({t, m.cp});
    ParallelScheme scheme;
    scheme.tp = m.tp;
    scheme.cp = m.cp;
    scheme.recompute = m.recompute;
    scheme.checkpointed_layers = m.checkpointed_layers;
    m.predicted_s = cost.compute_seconds(shares, scheme, LayerSpan(m.layers), m.lm_head);
    m.predicted_forward_s = cost.forward_seconds(shares, scheme, LayerSpan(m.layers), m.lm_head);
  }
}

std::vector<JobCheckRow> summarize_jobs(std::span<const MeasuredMicroBatch> jobs) {
  std::map<std::string, std::vector<const MeasuredMicroBatch*>> by_kind;
  for (const MeasuredMicroBatch& m : jobs) {
    by_kind[m.kind()].push_back(&m);
    by_kind["all"].push_back(&m);
  }
  std::vector<JobCheckRow> rows;
  for (const auto& [kind, list] : by_kind) {
    JobCheckRow row;
    row.kind = kind;
    double recorded = 0, predicted = 0, measured = 0;
    for (const MeasuredMicroBatch* m : list) {
      ++row.jobs;
      row.steps += m->steps;
      row.recorded_mape += std::abs(m->recorded_s / m->measured_s - 1);
      row.mape += std::abs(m->predicted_s / m->measured_s - 1);
      recorded += m->steps * m->recorded_s;
      predicted += m->steps * m->predicted_s;
      measured += m->steps * m->measured_s;
    }
    row.recorded_mape /= row.jobs;
    row.mape /= row.jobs;
    row.recorded_bias = recorded / measured - 1;
    row.bias = predicted / measured - 1;
    rows.push_back(row);
  }
  // "all" last.
  std::stable_partition(rows.begin(), rows.end(), [](const JobCheckRow& r) { return r.kind != "all"; });
  return rows;
}

std::vector<JobCheckRow> check_jobs(const LoadedScenario& loaded, std::vector<MeasuredMicroBatch>& jobs) {
  predict_jobs(loaded, jobs);
  return summarize_jobs(jobs);
}

std::vector<MeasuredRunJobs> catalogue_measured_jobs(const std::string& catalogue_file,
                                                     std::vector<std::string>* skipped) {
  const ValidationCatalogue catalogue = load_catalogue(catalogue_file);
  std::vector<MeasuredRunJobs> runs;
  std::map<std::string, std::shared_ptr<const LoadedScenario>> scenarios;
  std::set<std::string> seen;
  for (const ValidationEntry& e : catalogue.entries) {
    if (e.measured.empty() || e.points.empty() || !seen.insert(e.measured).second) continue;
    const Json doc = parse_json_file(e.measured);
    if (!doc.contains("jobs")) {  // a run written before live kept per-job times, or not a live replay
      if (skipped) skipped->push_back(e.measured);
      continue;
    }
    const std::string& scenario = e.points.front().scenario;
    auto& loaded = scenarios[scenario];
    if (!loaded) loaded = std::make_shared<const LoadedScenario>(load_and_prepare(scenario));
    MeasuredRunJobs run{e.measured, loaded->scenario.model.name, measured_micro_batches(doc, e.measured)};
    predict_jobs(*loaded, run.jobs);
    runs.push_back(std::move(run));
  }
  return runs;
}

namespace {

std::string lengths_text(const std::vector<int>& tokens) {
  if (tokens.empty()) return "-";
  std::string text;
  for (int t : tokens) text += (text.empty() ? "" : ",") + std::to_string(t);
  return text.size() > 40 ? std::to_string(tokens.size()) + " sequences" : text;
}

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", s);
  return text;
}

void print_per_job(const std::vector<MeasuredMicroBatch>& jobs, std::ostream& out) {
  std::vector<std::vector<std::string>> table{{"whole", "sharded", "cp", "kind", "steps", "fwd pred s", "fwd meas s",
                                               "fwd error", "bwd pred s", "bwd meas s", "bwd error", "error"}};
  for (const MeasuredMicroBatch& m : jobs) {
    std::vector<std::string> row{lengths_text(m.local), lengths_text(m.sharded), std::to_string(m.cp), m.kind(),
                                 std::to_string(m.steps)};
    if (m.measured_forward_s > 0) {
      const double backward_pred = m.predicted_s - m.predicted_forward_s;
      const double backward_meas = m.measured_s - m.measured_forward_s;
      row.insert(row.end(), {seconds_text(m.predicted_forward_s), seconds_text(m.measured_forward_s),
                             percent(m.predicted_forward_s / m.measured_forward_s - 1), seconds_text(backward_pred),
                             seconds_text(backward_meas), percent(backward_pred / backward_meas - 1)});
    } else {
      row.insert(row.end(), {"-", "-", "-", "-", "-", "-"});
    }
    row.push_back(percent(m.predicted_s / m.measured_s - 1));
    table.push_back(std::move(row));
  }
  print_aligned_rows(table, out);
}

std::string unsigned_percent(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", v * 100);
  return text;
}

void print_job_rows(const std::vector<JobCheckRow>& rows, std::ostream& out) {
  std::vector<std::vector<std::string>> table{
      {"micro-batches", "jobs", "steps", "recorded MAPE", "recorded bias", "MAPE now", "bias now"}};
  for (const JobCheckRow& r : rows)
    table.push_back({r.kind, std::to_string(r.jobs), std::to_string(r.steps), unsigned_percent(r.recorded_mape),
                     percent(r.recorded_bias), unsigned_percent(r.mape), percent(r.bias)});
  print_aligned_rows(table, out);
  out << "recorded: the prediction in the file (the cost model of the run's day); now: this lcsim's; bias: "
         "steps-weighted sum of predicted over measured - 1\n";
}

/// `check-jobs --catalogue FILE`: every measured run of the catalogue, each with its own scenario.
void run_catalogue_check(const std::string& catalogue, bool per_job, std::ostream& out) {
  std::vector<std::string> skipped;
  std::vector<MeasuredRunJobs> runs = catalogue_measured_jobs(catalogue, &skipped);
  std::vector<MeasuredMicroBatch> all;
  std::vector<std::vector<std::string>> table{{"run", "model", "jobs", "MAPE now", "bias now"}};
  for (const MeasuredRunJobs& run : runs) {
    all.insert(all.end(), run.jobs.begin(), run.jobs.end());
    const JobCheckRow total = summarize_jobs(run.jobs).back();
    table.push_back({folder_and_name(run.file), run.model, std::to_string(total.jobs), unsigned_percent(total.mape),
                     percent(total.bias)});
  }
  if (all.empty()) throw InputError(catalogue + ": no measured run with per-job times");
  out << "catalogue  " << catalogue << ": " << runs.size() << " measured runs with per-job times";
  if (!skipped.empty()) out << " (" << skipped.size() << " without, not checked)";
  out << "\n";
  print_aligned_rows(table, out);
  out << "\nevery run's micro-batches, each re-predicted with its own scenario's model and profile:\n";
  print_job_rows(summarize_jobs(all), out);
  if (per_job) print_per_job(all, out);
}

}  // namespace

const char* check_jobs_usage() {
  return "  check-jobs SCENARIO FILE... [--per-job]\n"
         "  check-jobs --catalogue CATALOGUE [--per-job]\n"
         "      No GPU needed. Re-predicts every micro-batch a live --json or bench-mix --json FILE measured with\n"
         "      SCENARIO's model and profile (today's cost model) and prints, by kind of micro-batch, the error the\n"
         "      file recorded and today's: MAPE over jobs, and bias (steps-weighted predicted / measured - 1).\n"
         "      --catalogue: every measured run of a validation catalogue (scenarios/validation/catalogue.json), each\n"
         "      with the scenario of its entries, one line per run and the kinds over all of them.\n"
         "      --per-job: also every micro-batch, its forward and backward apart (where the file timed them).\n";
}

void run_check_jobs_command(const std::vector<std::string>& args, std::ostream& out) {
  std::vector<std::string> files;
  std::string catalogue;
  bool per_job = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--per-job") {
      per_job = true;
      continue;
    }
    if (a == "--catalogue") {
      if (i + 1 >= args.size()) throw InputError("check-jobs: --catalogue needs a FILE");
      catalogue = args[++i];
      continue;
    }
    if (a.size() > 1 && a[0] == '-') throw InputError("check-jobs: unknown option '" + a + "'");
    files.push_back(a);
  }
  if (!catalogue.empty()) {
    if (!files.empty()) throw InputError("check-jobs: --catalogue takes no SCENARIO or FILE");
    run_catalogue_check(catalogue, per_job, out);
    return;
  }
  if (files.size() < 2) throw InputError("check-jobs: expected SCENARIO and at least one FILE, or --catalogue FILE");
  const LoadedScenario loaded = load_and_prepare(files.front());
  std::vector<MeasuredMicroBatch> jobs;
  for (std::size_t i = 1; i < files.size(); ++i) {
    std::vector<MeasuredMicroBatch> more = read_measured_micro_batches(files[i]);
    jobs.insert(jobs.end(), more.begin(), more.end());
  }
  if (jobs.empty()) throw InputError("check-jobs: no measured micro-batch in the files");
  const std::vector<JobCheckRow> rows = check_jobs(loaded, jobs);
  out << "scenario   " << loaded.scenario.name << " (model " << loaded.scenario.model.name << ")\n"
      << "profile    " << loaded.profile.label() << '\n';
  print_job_rows(rows, out);
  if (per_job) print_per_job(jobs, out);
}

}  // namespace lcsim
