#include "studies/validate.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include "base/errors.hpp"
#include "base/suggest.hpp"
#include "formats/results_io.hpp"
#include "formats/scenario_loader.hpp"
#include "studies/sampled_worlds.hpp"
#include "studies/sweep.hpp"

namespace lcsim {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr const char* kShippedCatalogueName = "scenarios/validation/catalogue.json";

/// --profile files by the GPU kind they describe; a second file for the same kind is an error.
std::map<std::string, std::string> profiles_by_gpu(const std::vector<std::string>& files) {
  std::map<std::string, std::string> by_gpu;
  for (const auto& file : files) {
    const Profile profile = load_profile(file);
    const auto [it, added] = by_gpu.emplace(profile.gpu, fs::absolute(file).lexically_normal().string());
    if (!added)
      throw InputError("--profile: " + file + " and " + it->second + " both describe GPU kind " + profile.gpu);
  }
  return by_gpu;
}

/// The point's scenario, with its profile replaced when --profile gave one for its cluster's GPU kind. A framework
/// benchmark keeps its own: its stack preset is part of what the entry describes.
Json scenario_for(const ValidationEntry& entry, const ValidationPoint& point, const std::string& where,
                  const std::map<std::string, std::string>& profiles) {
  Json scenario = point_scenario(point, where);
  if (entry.framework) return scenario;
  if (scenario.contains("cluster") && scenario["cluster"].is_object() && scenario["cluster"].contains("gpu") &&
      scenario["cluster"]["gpu"].is_string()) {
    const auto found = profiles.find(scenario["cluster"]["gpu"].get<std::string>());
    if (found != profiles.end()) scenario["profile"] = found->second;
  }
  return scenario;
}

std::string run_key(const std::string& mode, const Json& scenario) {
  return mode + "\n" + scenario.dump();
}

double collective_seconds(const ValidationEntry& entry, const ValidationPoint& point, const std::string& where,
                          const std::map<std::string, std::string>& profiles) {
  const LoadedScenario loaded = load_and_prepare(scenario_for(entry, point, where, profiles), point.scenario, 1);
  const CollectiveQuery& q = *point.collective;
  const LinkClass link =
      q.group_size <= loaded.scenario.cluster.topology().domain_size() ? LinkClass::NvLink : LinkClass::InfiniBand;
  const CollectiveCall call{q.op, q.group_size, q.bytes, 1.0};
  return loaded.cost->collective_time(std::span<const CollectiveCall>(&call, 1), link).seconds();
}

/// What the profiles `entry`'s points are predicted with fitted on it (fitted_parameters), "; "-joined.
std::string fitted_by_profiles(const ValidationEntry& entry, const std::string& catalogue_file,
                               const std::map<std::string, std::string>& profiles,
                               std::map<std::string, Profile>& loaded) {
  std::set<std::string> parameters;
  for (const auto& point : entry.points) {
    const Json scenario = scenario_for(entry, point, catalogue_file + ": entry " + entry.id, profiles);
    const std::string file = scenario.at("profile").get<std::string>();
    auto it = loaded.find(file);
    if (it == loaded.end()) it = loaded.emplace(file, load_profile(file)).first;
    const std::string fitted = fitted_parameters(it->second, entry.id);
    if (!fitted.empty()) parameters.insert(fitted);
  }
  std::string out;
  for (const auto& p : parameters) out += (out.empty() ? "" : "; ") + p;
  return out;
}

constexpr int kModelFormDraws = 64;  // model-form draws per world: smooth quantiles from a few worlds

/// A collective's time in every world: the scenario's profile perturbed as `lcsim plan --samples` would.
std::vector<double> collective_seconds_worlds(const ValidationEntry& entry, const ValidationPoint& point,
                                              const std::string& where,
                                              const std::map<std::string, std::string>& profiles, int samples) {
  const LoadedScenario loaded = load_and_prepare(scenario_for(entry, point, where, profiles), point.scenario, 1);
  const CollectiveQuery& q = *point.collective;
  const LinkClass link =
      q.group_size <= loaded.scenario.cluster.topology().domain_size() ? LinkClass::NvLink : LinkClass::InfiniBand;
  const CollectiveCall call{q.op, q.group_size, q.bytes, 1.0};
  std::vector<double> out;
  for (int w = 0; w < samples; ++w) {
    const Scenario& s = loaded.scenario;
    const CostModel cost(s.model, s.cluster, w == 0 ? loaded.profile : world_profile(loaded.profile, s.seed, w),
                         loaded.cost->options());
    out.push_back(cost.collective_time(std::span<const CollectiveCall>(&call, 1), link).seconds());
  }
  return out;
}

/// Every held-out entry with a numeric error, predicted in each world of its runs (its combine applied per
/// world); a world where a point has no prediction (e.g. an idle GPU's unbounded rank gap) is left out.
std::vector<EntryIntervalInput> interval_inputs(
    const std::vector<EntryOutcome>& outcomes,
    const std::map<std::pair<const ValidationEntry*, std::size_t>, std::size_t>& run_of_point,
    const std::vector<Json>& results, const std::vector<int>& gpus_of_run, int samples,
    const std::string& catalogue_file, const std::map<std::string, std::string>& profiles) {
  std::vector<EntryIntervalInput> inputs;
  for (const EntryOutcome& o : outcomes) {
    const ValidationEntry& e = *o.entry;
    if (entry_status(o) != "held out" || !o.error || family_of(e.quantity) == ModelFormFamily::None) continue;
    int worlds = samples;
    std::vector<std::vector<double>> collective(e.points.size());
    for (std::size_t i = 0; i < e.points.size(); ++i) {
      if (e.quantity == ValidationQuantity::CollectiveSeconds)
        collective[i] =
            collective_seconds_worlds(e, e.points[i], catalogue_file + ": entry " + e.id, profiles, samples);
      else
        worlds = std::min(worlds, results_worlds(results[run_of_point.at({&e, i})]));
    }
    EntryIntervalInput input;
    input.id = e.id;
    input.quantity = e.quantity;
    input.measured = !e.measured.empty();
    input.kind = entry_kind(e);
    input.source = e.source.paper;
    input.calibrated_profile = e.quantity != ValidationQuantity::CollectiveSeconds;
    for (std::size_t i = 0; i < e.points.size() && input.calibrated_profile; ++i) {
      const Json& profile = results[run_of_point.at({&e, i})].at("profile");
      input.calibrated_profile = profile.at("calibrated").get<bool>();
    }
    const bool per_point = !e.published.value && !e.published.low;
    input.checks.resize(per_point ? e.points.size() : 1);
    for (std::size_t c = 0; c < input.checks.size(); ++c) {
      IntervalCheck& check = input.checks[c];
      if (per_point) {
        check.published = e.points[c].published;
      } else {
        check.published = e.published.value;
        check.low = e.published.low;
        check.high = e.published.high;
      }
    }
    for (int w = 0; w < worlds; ++w) {
      std::vector<PointPrediction> predictions;
      for (std::size_t i = 0; i < e.points.size(); ++i) {
        PointPrediction p;
        if (e.quantity == ValidationQuantity::CollectiveSeconds)
          p.value = collective[i][static_cast<std::size_t>(w)];
        else
          p = predict_from_results(e, e.points[i], results_in_world(results[run_of_point.at({&e, i})], w),
                                   gpus_of_run[run_of_point.at({&e, i})]);
        predictions.push_back(std::move(p));
      }
      const EntryOutcome world = evaluate_entry(e, std::move(predictions));
      if (!world.failed.empty()) continue;
      for (std::size_t c = 0; c < input.checks.size(); ++c)
        input.checks[c].worlds.push_back(per_point ? *world.points[c].value : *world.predicted);
    }
    inputs.push_back(std::move(input));
  }
  return inputs;
}

nlohmann::ordered_json intervals_to_json(const std::vector<EntryInterval>& intervals, const IntervalSummary& s) {
  nlohmann::ordered_json j;
  j["samples"] = s.samples;
  j["entries"] = s.entries;
  j["covered"] = results_number(s.covered);
  j["coverage"] = results_number(s.coverage);
  j["median_relative_width"] = results_number(s.median_relative_width);
  j["measured_entries"] = s.measured_entries;
  j["measured_covered"] = results_number(s.measured_covered);
  j["by_kind"] = nlohmann::ordered_json::object();
  for (const auto& [kind, k] : s.kinds)
    j["by_kind"][kind] = {{"entries", k.entries},
                          {"coverage", results_number(k.coverage)},
                          {"median_relative_width", results_number(k.median_relative_width)}};
  j["families"] = nlohmann::ordered_json::object();
  for (const auto& [family, sigma] : s.families)
    j["families"][to_string(family)] = {{"entries", sigma.entries}, {"log_sigma", results_number(sigma.log_sigma)}};
  j["by_entry"] = nlohmann::ordered_json::array();
  for (const EntryInterval& e : intervals) {
    nlohmann::ordered_json entry;
    entry["id"] = e.id;
    entry["family"] = to_string(e.family);
    entry["model_form_log_sigma"] = results_number(e.model_form_sigma);
    entry["sampled_log_sd"] = results_number(std::sqrt(e.sampled_log_var));
    entry["covered"] = results_number(e.covered);
    entry["relative_width"] = results_number(e.relative_width);
    entry["p10_p50_p90"] = nlohmann::ordered_json::array();
    for (const Quantiles& q : e.quantiles)
      entry["p10_p50_p90"].push_back({results_number(q.p10), results_number(q.p50), results_number(q.p90)});
    j["by_entry"].push_back(std::move(entry));
  }
  return j;
}

const char* mode_name(RunMode mode) {
  return mode == RunMode::Simulate ? "simulate" : "plan";
}

}  // namespace

std::string shipped_catalogue_file() {
  return LCSIM_SOURCE_DIR "/scenarios/validation/catalogue.json";
}

std::string validation_run_name(std::size_t i, const char* suffix) {
  std::ostringstream name;
  name << "run-" << std::setw(4) << std::setfill('0') << i << suffix;
  return name.str();
}

ValidationPlan plan_validation(const ValidateSettings& settings) {
  ValidationPlan plan;
  plan.shipped_catalogue = settings.catalogue_file.empty();
  plan.catalogue_file = plan.shipped_catalogue ? shipped_catalogue_file() : settings.catalogue_file;
  plan.catalogue = std::make_shared<const ValidationCatalogue>(load_catalogue(plan.catalogue_file));
  plan.profiles = profiles_by_gpu(settings.profile_files);
  plan.samples = checked_samples(settings.samples);
  plan.jobs = settings.jobs;
  const auto& entries = plan.catalogue->entries;
  for (const auto& id : settings.only)
    if (std::none_of(entries.begin(), entries.end(), [&](const auto& e) { return e.id == id; })) {
      std::vector<std::string> ids;
      for (const auto& e : entries) ids.push_back(e.id);
      throw InputError("--only: " + plan.catalogue_file + " has no entry '" + id + "'" + did_you_mean(id, ids));
    }
  for (const auto& e : entries)
    if (settings.only.empty() || std::find(settings.only.begin(), settings.only.end(), e.id) != settings.only.end())
      plan.entries.push_back(&e);

  // Every point's run, deduplicated: entries reading the same scenario in the same mode share one run.
  std::map<std::string, std::size_t> run_of_key;
  for (const ValidationEntry* e : plan.entries) {
    if (!e->not_expressible.empty() || e->quantity == ValidationQuantity::CollectiveSeconds) continue;
    for (std::size_t i = 0; i < e->points.size(); ++i) {
      const std::string where = plan.catalogue_file + ": entry " + e->id + ", point " + std::to_string(i);
      Json scenario = scenario_for(*e, e->points[i], where, plan.profiles);
      const bool measured = !e->measured.empty();
      const auto [it, added] =
          run_of_key.emplace(run_key(e->mode, scenario) + (measured ? " fixed-data" : ""), plan.runs.size());
      if (added) {
        const int gpus = scenario_from_json(scenario, where).cluster.world_size();  // a bad entry is named first
        plan.runs.push_back({e->mode == "simulate" ? RunMode::Simulate : RunMode::Plan,
                             std::move(scenario),
                             {},
                             where,
                             measured,
                             gpus});
      }
      ValidationRun& run = plan.runs[it->second];
      for (const auto& label : point_labels(e->points[i]))
        if (std::find(run.labels.begin(), run.labels.end(), label) == run.labels.end()) run.labels.push_back(label);
      plan.run_of_point[{e, i}] = it->second;
    }
  }
  return plan;
}

std::vector<std::string> validation_inputs(const ValidationPlan& plan) {
  std::vector<std::string> inputs{plan.catalogue_file};
  for (const auto& [gpu, file] : plan.profiles) inputs.push_back(file);
  for (const auto& e : plan.catalogue->entries) {
    for (const auto& point : e.points) inputs.push_back(point.scenario);
    if (!e.measured.empty()) inputs.push_back(e.measured);
  }
  for (const ValidationEntry* e : plan.entries)
    if (e->not_expressible.empty())
      for (const auto& point : e->points)
        for (auto& file :
             scenario_document_files(scenario_for(*e, point, plan.catalogue_file + ": entry " + e->id, plan.profiles)))
          inputs.push_back(std::move(file));
  return inputs;
}

ValidationReport run_validation(const ValidationPlan& plan, Runner& runner, const RunsProgress& progress) {
  std::vector<RunRequest> requests;
  for (std::size_t i = 0; i < plan.runs.size(); ++i) {
    const ValidationRun& run = plan.runs[i];
    RunRequest request;
    request.mode = run.mode;
    request.scenario = run.scenario;
    request.file = validation_run_name(i, ".json");
    request.samples = plan.samples;
    request.policies = run.labels;
    request.draw_data = !run.measured;
    requests.push_back(std::move(request));
  }
  ValidationReport report;
  report.run_outcomes = runner.run(requests, plan.jobs, progress);

  const std::string& catalogue_file = plan.catalogue_file;
  std::vector<Json> results(plan.runs.size());
  std::vector<std::string> run_failure(plan.runs.size());
  for (std::size_t i = 0; i < plan.runs.size(); ++i) {
    const RunOutcome& o = report.run_outcomes[i];
    if (o.status != kExitOk) {
      run_failure[i] = "run " + std::to_string(i) + " (" + plan.runs[i].where + ", " + mode_name(plan.runs[i].mode) +
                       ") exited " + std::to_string(o.status) + ": " + o.error;
      continue;
    }
    results[i] = o.results;
    report.profile_labels.insert(results[i].at("profile").value("label", ""));
  }

  std::map<std::string, Profile> loaded;
  for (const ValidationEntry* e : plan.entries) {
    std::vector<PointPrediction> predictions;
    if (e->not_expressible.empty())
      for (std::size_t i = 0; i < e->points.size(); ++i) {
        PointPrediction p;
        if (e->quantity == ValidationQuantity::CollectiveSeconds) {
          p.value = collective_seconds(*e, e->points[i], catalogue_file + ": entry " + e->id, plan.profiles);
        } else {
          const std::size_t run = plan.run_of_point.at({e, i});
          if (!run_failure[run].empty())
            p.failed = run_failure[run];
          else if (std::string drift = plan_drift(*e, results[run]); !drift.empty())
            p.failed = std::move(drift);
          else
            p = predict_from_results(*e, e->points[i], results[run], plan.runs[run].gpus);
        }
        predictions.push_back(std::move(p));
      }
    report.outcomes.push_back(evaluate_entry(*e, std::move(predictions)));
    if (e->not_expressible.empty())
      report.outcomes.back().fitted = fitted_by_profiles(*e, catalogue_file, plan.profiles, loaded);
  }
  report.summary = summarize_validation(report.outcomes);
  std::vector<int> gpus_of_run;
  for (const ValidationRun& run : plan.runs) gpus_of_run.push_back(run.gpus);
  report.intervals = entry_intervals(interval_inputs(report.outcomes, plan.run_of_point, results, gpus_of_run,
                                                     plan.samples, catalogue_file, plan.profiles),
                                     kModelFormDraws, report.interval_summary);
  return report;
}

void check_validation_report(const ValidationPlan& plan, const ValidationReport& report) {
  // A measured entry that no longer predicts the plans that ran is a stale catalogue, not an accuracy figure.
  std::string drifted;
  for (const auto& o : report.outcomes)
    if (!o.entry->measured.empty() && o.failed.rfind(kPlanDrift, 0) == 0) drifted += "\n  " + o.entry->id;
  if (!drifted.empty())
    throw PlanningError(plan.catalogue_file +
                        ": measured entries no longer predict the plans that ran (see above):" + drifted);
  std::string failures;
  for (std::size_t i = 0; i < report.run_outcomes.size(); ++i)
    if (report.run_outcomes[i].status != kExitOk)
      failures += "\n  run " + std::to_string(i) + " (" + plan.runs[i].where + "): " + report.run_outcomes[i].error;
  if (!failures.empty()) throw PlanningError(plan.catalogue_file + ": runs failed:" + failures);
}

nlohmann::ordered_json validation_report_to_json(const ValidationPlan& plan, const ValidationReport& report) {
  nlohmann::ordered_json document = validation_to_json(*plan.catalogue, report.outcomes, report.summary);
  document["intervals"] = intervals_to_json(report.intervals, report.interval_summary);
  return document;
}

nlohmann::ordered_json validation_model_form_to_json(const ValidationPlan& plan, const ValidationReport& report) {
  std::vector<std::string> profile_files;
  for (const auto& [gpu, file] : plan.profiles) profile_files.push_back(file);
  const std::string shown_catalogue = plan.shipped_catalogue ? kShippedCatalogueName : plan.catalogue_file;
  std::string command = "lcsim validate --samples " + std::to_string(plan.samples);
  if (!plan.shipped_catalogue) command += " --catalogue " + plan.catalogue_file;
  for (const auto& file : profile_files) command += " --profile " + file;
  command += " --write-model-form FILE";
  return model_form_to_json(report.interval_summary, shown_catalogue, profile_files, command);
}

}  // namespace lcsim
