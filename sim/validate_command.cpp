// `lcsim validate`: every entry of a catalogue of published figures, predicted by `lcsim plan|simulate` runs (one
// process per distinct run, --jobs at a time) or by the cost model directly, and compared with the paper.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include <boost/program_options.hpp>

#include "base/files.hpp"
#include "base/json_reader.hpp"
#include "sim/cli.hpp"
#include "sim/command_options.hpp"
#include "sim/process_pool.hpp"
#include "traces/results_io.hpp"
#include "traces/scenario_loader.hpp"
#include "traces/sweep.hpp"
#include "traces/uncertainty.hpp"
#include "traces/validation.hpp"
#include "traces/validation_intervals.hpp"

namespace lcsim {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr const char* kValidateUsage = "Usage: lcsim validate [options]\n";

std::string default_catalogue() {
  return LCSIM_SOURCE_DIR "/scenarios/validation/catalogue.json";
}

po::options_description validate_options() {
  po::options_description options("Options", 110, 60);
  options.add_options()              //
      ("help,h", "print this help")  //
      ("catalogue,c", po::value<std::string>()->value_name("FILE"),
       "catalogue of published figures (default: scenarios/validation/catalogue.json of the source tree)")  //
      ("json", po::value<std::string>()->value_name("FILE"),
       "write every entry, its points and the summary (schema lcsim-validation/3) to FILE")         //
      ("csv", po::value<std::string>()->value_name("FILE"), "write one CSV row per entry to FILE")  //
      ("jobs,j", po::value<int>()->default_value(default_jobs())->value_name("N"),
       "runs in parallel (processes); results do not depend on it")  //
      ("profile", po::value<std::vector<std::string>>()->composing()->value_name("FILE"),
       "run every scenario whose cluster has this profile's GPU kind with FILE instead of its own profile "
       "(repeatable, one per GPU kind); an entry is fitted when the profile it runs with lists it in "
       "provenance.fitted_on")  //
      ("only", po::value<std::vector<std::string>>()->composing()->value_name("ID"),
       "validate only the entry with this id (repeatable)")  //
      ("work", po::value<std::string>()->value_name("DIR"),
       "keep every run's scenario, results and log in DIR (default: a temporary folder, removed unless a run "
       "fails)")  //
      ("samples", po::value<int>()->default_value(8)->value_name("N"),
       "sampled worlds per run (lcsim plan|simulate --samples): each held-out entry gets an 80% interval, and "
       "the summary its coverage and median width (docs/uncertainty.md); 1: no intervals")  //
      ("write-model-form", po::value<std::string>()->value_name("FILE"),
       "write each quantity family's model-form log sigma over the whole catalogue to FILE (schema "
       "lcsim-model-form/1; the shipped one is scenarios/validation/model-form.json)")  //
      ("quiet,q", "do not print the table");
  return options;
}

std::string validate_help() {
  std::ostringstream text;
  text << kValidateUsage
       << "\nChecks lcsim's predictions against the figures the Skrull, Hydraulis and HBP papers publish, and against\n"
          "lcsim's own runs on real GPUs (measured entries: a committed lcsim-gpu live --json file, summarized on a\n"
          "line of their own). Each entry of the catalogue names its source, the scenarios (and changes to them)\n"
          "it needs, the quantity (a speedup, a balance metric, OOM or not, a collective's time), and the figure.\n"
          "Every distinct run is one `lcsim plan` or `lcsim simulate` process. Prints, per entry: status (held out,\n"
          "fitted -- the profile it runs with set a parameter from it -- or not expressible, with the reason),\n"
          "published and predicted figures, signed error, whether the ordering holds (the same policy wins, the\n"
          "trend runs the same way) and whether it is within tolerance; then the held-out MAPE. Exit 0 when every\n"
          "run ran, however large the errors: accuracy is a reported number. A measured entry whose policy now\n"
          "plans other iterations than the hardware ran (its file's plan labels) fails the command: re-measure it\n"
          "or pin the policy's options. Catalogue format: docs/validation.md.\n\n"
       << validate_options();
  return text.str();
}

/// A distinct run: one scenario document in one mode, with the policy labels the entries read from it.
struct Run {
  std::string mode;
  Json scenario;
  std::vector<std::string> labels;
  std::string where;      ///< the first entry that needs it, for messages
  bool measured = false;  ///< a measured run's: its worlds keep its data (--fixed-data), which the run measured
};

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

/// The point's scenario, with its profile replaced when --profile gave one for its cluster's GPU kind.
Json scenario_for(const ValidationPoint& point, const std::string& where,
                  const std::map<std::string, std::string>& profiles) {
  Json scenario = point_scenario(point, where);
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

double collective_seconds(const ValidationPoint& point, const std::string& where,
                          const std::map<std::string, std::string>& profiles) {
  const LoadedScenario loaded = load_and_prepare(scenario_for(point, where, profiles), point.scenario, 1);
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
    const Json scenario = scenario_for(point, catalogue_file + ": entry " + entry.id, profiles);
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

std::string fixed(double value, int precision) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(precision) << value;
  return s.str();
}

/// Three significant digits; seconds below 0.1 s in microseconds (collective latencies).
std::string figure(double value, ValidationQuantity quantity) {
  std::ostringstream s;
  if (quantity == ValidationQuantity::CollectiveSeconds) {
    s << std::setprecision(4) << value * 1e6 << "us";
  } else {
    s << std::fixed << std::setprecision(value < 0.1 ? 4 : value < 10 ? 3 : 2) << value;
  }
  return s.str();
}

std::string shown(const EntryOutcome& o, bool predicted) {
  const ValidationEntry& e = *o.entry;
  if (!predicted) {
    std::ostringstream s;
    s << std::setprecision(4);
    const auto& f = e.published;
    if (!e.published_text.empty()) return e.published_text;
    if (e.combine == ValidationCombine::Each || (f.trend && e.points.front().published)) {
      if (f.trend) s << (*f.trend == Trend::Increasing ? "rising " : "falling ");
      for (std::size_t i = 0; i < e.points.size(); ++i)
        s << (i ? " " : "") << figure(*e.points[i].published, e.quantity);
      return s.str();
    }
    if (f.value) s << *f.value;
    if (f.low) s << *f.low << "-" << *f.high;
    if (f.yes) s << (*f.yes ? "OOM" : "fits");
    if (f.trend) s << (*f.trend == Trend::Increasing ? "rising" : "falling");
    return s.str();
  }
  if (!o.failed.empty()) return "failed";
  if (o.predicted_yes) return *o.predicted_yes ? "OOM" : "fits";
  if (o.predicted) return figure(*o.predicted, e.quantity);
  std::string series;
  for (const auto& p : o.points)
    if (p.value) series += (series.empty() ? "" : " ") + figure(*p.value, e.quantity);
  return series;
}

/// An entry's 80% interval as the table shows it: p10-p90 of its one figure, or how many of its per-point figures
/// fall inside theirs; "-" without one (one world, or an entry that is not held out and numeric).
std::string interval_cell(const EntryInterval* interval, ValidationQuantity quantity) {
  if (interval == nullptr || interval->quantiles.empty()) return "-";
  const std::string inside = interval->covered >= 1 ? " in" : interval->covered <= 0 ? " OUT" : "";
  if (interval->quantiles.size() == 1)
    return figure(interval->quantiles.front().p10, quantity) + "-" + figure(interval->quantiles.front().p90, quantity) +
           inside;
  return fixed(100 * interval->covered, 0) + "% of points in";
}

void print_table(const ValidationCatalogue& catalogue, const std::vector<EntryOutcome>& outcomes,
                 const ValidationSummary& summary, const std::vector<EntryInterval>& intervals,
                 const std::string& profile_note, std::ostream& out) {
  out << "catalogue " << catalogue.file << " (" << outcomes.size() << " entries)\n";
  if (!profile_note.empty()) out << "profiles  " << profile_note << "\n";
  std::map<std::string, const EntryInterval*> interval_of;
  for (const auto& interval : intervals) interval_of[interval.id] = &interval;
  std::vector<std::vector<std::string>> rows = {
      {"entry", "source", "status", "published", "predicted", "80% interval", "error", "ordering", "ok"}};
  for (const auto& o : outcomes) {
    const ValidationEntry& e = *o.entry;
    const std::string status = entry_status(o) + (e.measured.empty() ? "" : ", measured");
    const auto found = interval_of.find(e.id);
    rows.push_back({e.id, e.source.paper + " " + e.source.where, status, shown(o, false), shown(o, true),
                    interval_cell(found == interval_of.end() ? nullptr : found->second, e.quantity),
                    o.error ? (*o.error >= 0 ? "+" : "") + fixed(100 * *o.error, 1) + "%" : "-",
                    e.not_expressible.empty() && o.failed.empty() ? (o.ordering == OrderingVerdict::Held     ? "held"
                                                                     : o.ordering == OrderingVerdict::Broken ? "BROKEN"
                                                                                                             : "-")
                                                                  : "-",
                    e.not_expressible.empty() && o.failed.empty() ? (o.within_tolerance ? "yes" : "no") : "-"});
  }
  print_aligned_rows(rows, out);
  out << "\nheld out: " << summary.held_out << " published entries; over the " << summary.held_out_numeric
      << " with a numeric error, MAPE " << fixed(100 * summary.held_out_mape, 1) << "%, median "
      << fixed(100 * summary.held_out_median_ape, 1) << "%; " << summary.held_out_within_tolerance << "/"
      << summary.held_out << " within tolerance (and ordering)\n";
  const HeldOutErrors& m = summary.measured;
  if (m.entries > 0)
    out << "measured: " << m.entries << " entries (real hardware); over the " << m.numeric
        << " with a numeric error, MAPE " << fixed(100 * m.mape, 1) << "%, median " << fixed(100 * m.median_ape, 1)
        << "%; " << m.within_tolerance << "/" << m.entries << " within tolerance (and ordering); ordering "
        << m.ordering_held << "/" << m.ordering_checked << "\n";
  const MeasuredRanking& r = summary.measured_ranking;
  if (r.pairs + r.ties > 0) {
    out << "ranking:  " << r.kept << "/" << r.pairs
        << " pairs of policies of one measured run ranked as the hardware ranked them (" << r.ties
        << " pairs measured within " << fixed(100 * kMeasuredRankingTie, 0) << "% of each other not judged)\n";
    for (const BrokenRanking& b : r.broken)
      out << "  BROKEN " << b.faster << " over " << b.slower << " in " << folder_and_name(b.run) << ": measured "
          << fixed(b.measured_faster, 3) << "x against " << fixed(b.measured_slower, 3) << "x, predicted "
          << fixed(b.predicted_faster, 3) << "x against " << fixed(b.predicted_slower, 3) << "x\n";
  }
  out << "ordering: " << summary.ordering_held << "/" << summary.ordering_checked
      << " published entries keep the published ordering (who wins, which way a trend runs)\n";
  out << "fitted:   " << summary.fitted << " entries (a free parameter was set from them; not in the MAPE)\n";
  out << "not expressible: " << summary.not_expressible << "; failed: " << summary.failed << "\n";
  for (const auto& o : outcomes)
    if (!o.entry->not_expressible.empty()) out << "  " << o.entry->id << ": " << o.entry->not_expressible << "\n";
  for (const auto& o : outcomes)
    if (!o.failed.empty()) out << "  " << o.entry->id << " failed: " << o.failed << "\n";
}

// ---- 80% intervals (traces/validation_intervals.hpp) ----

constexpr int kModelFormDraws = 64;  // model-form draws per world: smooth quantiles from a few worlds
constexpr const char* kShippedCatalogueName = "scenarios/validation/catalogue.json";

/// A collective's time in every world: the scenario's profile perturbed as `lcsim plan --samples` would.
std::vector<double> collective_seconds_worlds(const ValidationPoint& point, const std::string& where,
                                              const std::map<std::string, std::string>& profiles, int samples) {
  const LoadedScenario loaded = load_and_prepare(scenario_for(point, where, profiles), point.scenario, 1);
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
    const std::vector<Json>& results, int samples, const std::string& catalogue_file,
    const std::map<std::string, std::string>& profiles) {
  std::vector<EntryIntervalInput> inputs;
  for (const EntryOutcome& o : outcomes) {
    const ValidationEntry& e = *o.entry;
    if (entry_status(o) != "held out" || !o.error || family_of(e.quantity) == ModelFormFamily::None) continue;
    int worlds = samples;
    std::vector<std::vector<double>> collective(e.points.size());
    for (std::size_t i = 0; i < e.points.size(); ++i) {
      if (e.quantity == ValidationQuantity::CollectiveSeconds)
        collective[i] = collective_seconds_worlds(e.points[i], catalogue_file + ": entry " + e.id, profiles, samples);
      else
        worlds = std::min(worlds, results_worlds(results[run_of_point.at({&e, i})]));
    }
    EntryIntervalInput input;
    input.id = e.id;
    input.quantity = e.quantity;
    input.measured = !e.measured.empty();
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
          p = predict_from_results(e, e.points[i], results_in_world(results[run_of_point.at({&e, i})], w));
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

void print_interval_summary(const IntervalSummary& s, std::ostream& out) {
  if (s.samples <= 1) return;
  out << "intervals: 80% (p10-p90) over " << s.samples
      << " sampled worlds, model form leave-one-out per quantity family (docs/uncertainty.md)\n";
  out << "coverage: " << fixed(100 * s.coverage, 1) << "% (" << fixed(s.covered, 1) << " of " << s.entries
      << " held-out numeric entries inside their interval, " << fixed(s.measured_covered, 1) << " of the "
      << s.measured_entries << " measured ones; target 80%)\n";
  out << "width:    median relative width (p90 - p10) / p50 " << fixed(s.median_relative_width, 3) << "\n";
  out << "model form (whole catalogue, log sigma):";
  for (const auto& [family, sigma] : s.families)
    out << " " << to_string(family) << " " << fixed(sigma.log_sigma, 3) << " (" << sigma.entries << ")";
  out << "\n";
}

}  // namespace

void run_validate_command(const std::vector<std::string>& args, std::ostream& out) {
  const InterruptScope interrupts;  // Ctrl-C and SIGTERM reach the children, then the work folders go
  po::variables_map vm;
  try {
    // No positional argument: an empty description makes a stray one an error instead of being ignored.
    po::store(po::command_line_parser(args).options(validate_options()).positional({}).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(std::string("validate: ") + e.what(), validate_help());
  }
  if (vm.count("help")) {
    out << validate_help();
    return;
  }
  const int jobs = vm["jobs"].as<int>();
  if (jobs < 1) throw UsageError("validate: --jobs must be at least 1, got " + std::to_string(jobs), validate_help());
  const int samples = checked_samples(vm["samples"].as<int>());

  const std::string catalogue_file = vm.count("catalogue") ? vm["catalogue"].as<std::string>() : default_catalogue();
  const ValidationCatalogue catalogue = load_catalogue(catalogue_file);
  const auto profiles =
      profiles_by_gpu(vm.count("profile") ? vm["profile"].as<std::vector<std::string>>() : std::vector<std::string>{});
  std::vector<const ValidationEntry*> entries;
  const auto only = vm.count("only") ? vm["only"].as<std::vector<std::string>>() : std::vector<std::string>{};
  for (const auto& id : only)
    if (std::none_of(catalogue.entries.begin(), catalogue.entries.end(), [&](const auto& e) { return e.id == id; }))
      throw InputError("--only: " + catalogue_file + " has no entry '" + id + "'");
  for (const auto& e : catalogue.entries)
    if (only.empty() || std::find(only.begin(), only.end(), e.id) != only.end()) entries.push_back(&e);
  OutputGuard guard;
  guard.add_input(catalogue_file);
  for (const auto& [gpu, file] : profiles) guard.add_input(file);
  for (const auto& e : catalogue.entries) {
    for (const auto& point : e.points) guard.add_input(point.scenario);
    if (!e.measured.empty()) guard.add_input(e.measured);
  }
  for (const ValidationEntry* e : entries)
    if (e->not_expressible.empty())
      for (const auto& point : e->points)
        guard.add_inputs(scenario_document_files(scenario_for(point, catalogue_file + ": entry " + e->id, profiles)));
  for (const auto& output : output_options(vm, {"json", "csv", "write-model-form"}))
    guard.add_output(output.option, output.file);

  // Every point's run, deduplicated: entries reading the same scenario in the same mode share one process.
  std::vector<Run> runs;
  std::map<std::string, std::size_t> run_of_key;
  std::map<std::pair<const ValidationEntry*, std::size_t>, std::size_t> run_of_point;
  for (const ValidationEntry* e : entries) {
    if (!e->not_expressible.empty() || e->quantity == ValidationQuantity::CollectiveSeconds) continue;
    for (std::size_t i = 0; i < e->points.size(); ++i) {
      const std::string where = catalogue_file + ": entry " + e->id + ", point " + std::to_string(i);
      Json scenario = scenario_for(e->points[i], where, profiles);
      const bool measured = !e->measured.empty();
      const auto [it, added] =
          run_of_key.emplace(run_key(e->mode, scenario) + (measured ? " fixed-data" : ""), runs.size());
      if (added) runs.push_back({e->mode, std::move(scenario), {}, where, measured});
      Run& run = runs[it->second];
      for (const auto& label : point_labels(e->points[i]))
        if (std::find(run.labels.begin(), run.labels.end(), label) == run.labels.end()) run.labels.push_back(label);
      run_of_point[{e, i}] = it->second;
    }
  }

  if (vm.count("work")) {
    std::vector<std::string> names;
    for (std::size_t i = 0; i < runs.size(); ++i)
      for (const char* suffix : {".json", ".results.json", ".log"})
        names.push_back("run-" + std::string(4 - std::min<std::size_t>(4, std::to_string(i).size()), '0') +
                        std::to_string(i) + suffix);
    guard.add_folder("--work " + vm["work"].as<std::string>(), vm["work"].as<std::string>(), names);
  }
  guard.check();

  // A run's folder: --work, or a fresh temporary one kept only when a run failed.
  WorkFolder work(vm.count("work") ? std::optional<std::string>(vm["work"].as<std::string>()) : std::nullopt,
                  "lcsim-validate");
  const fs::path& dir = work.path();
  const auto name_of = [&](std::size_t i, const char* suffix) {
    std::ostringstream name;
    name << "run-" << std::setw(4) << std::setfill('0') << i << suffix;
    return dir / name.str();
  };
  const std::string exe = self_executable();
  std::vector<ChildCommand> commands;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    // Each run's scenario is checked here, so a bad entry is named before anything runs.
    (void)scenario_from_json(runs[i].scenario, runs[i].where);
    write_file_atomically(name_of(i, ".json").string(), runs[i].scenario.dump(2) + "\n");
    ChildCommand command{
        {exe, runs[i].mode, name_of(i, ".json").string(), "--json", name_of(i, ".results.json").string(), "--quiet",
         "--samples", std::to_string(samples), "--jobs", "1"},
        name_of(i, ".log").string()};
    for (const auto& label : runs[i].labels) {
      command.argv.push_back("--policy");
      command.argv.push_back(label);
    }
    if (runs[i].measured) command.argv.push_back("--fixed-data");
    commands.push_back(std::move(command));
  }
  const std::vector<int> status =
      run_children(commands, jobs, [](std::size_t done, std::size_t total) { print_progress(done, total, "runs"); });

  std::vector<Json> results(runs.size());
  std::vector<std::string> run_failure(runs.size());
  bool any_failed = false;
  std::set<std::string> profile_labels;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (status[i] != 0) {
      any_failed = true;
      run_failure[i] = "run " + name_of(i, ".json").string() + " exited " + std::to_string(status[i]) + ": " +
                       last_line_of(name_of(i, ".log"));
      continue;
    }
    results[i] = parse_json_file(name_of(i, ".results.json").string(), kMaxResultsFileBytes);
    profile_labels.insert(results[i].at("profile").value("label", ""));
  }

  std::vector<EntryOutcome> outcomes;
  std::map<std::string, Profile> loaded;
  for (const ValidationEntry* e : entries) {
    std::vector<PointPrediction> predictions;
    if (e->not_expressible.empty())
      for (std::size_t i = 0; i < e->points.size(); ++i) {
        PointPrediction p;
        if (e->quantity == ValidationQuantity::CollectiveSeconds) {
          p.value = collective_seconds(e->points[i], catalogue_file + ": entry " + e->id, profiles);
        } else {
          const std::size_t run = run_of_point.at({e, i});
          if (!run_failure[run].empty())
            p.failed = run_failure[run];
          else if (std::string drift = plan_drift(*e, results[run]); !drift.empty())
            p.failed = std::move(drift);
          else
            p = predict_from_results(*e, e->points[i], results[run]);
        }
        predictions.push_back(std::move(p));
      }
    outcomes.push_back(evaluate_entry(*e, std::move(predictions)));
    if (e->not_expressible.empty()) outcomes.back().fitted = fitted_by_profiles(*e, catalogue_file, profiles, loaded);
  }
  const ValidationSummary summary = summarize_validation(outcomes);
  IntervalSummary interval_summary;
  const std::vector<EntryInterval> intervals =
      entry_intervals(interval_inputs(outcomes, run_of_point, results, samples, catalogue_file, profiles),
                      kModelFormDraws, interval_summary);

  std::vector<std::string> written;
  if (vm.count("json")) {
    nlohmann::ordered_json document = validation_to_json(catalogue, outcomes, summary);
    document["intervals"] = intervals_to_json(intervals, interval_summary);
    write_output(vm["json"].as<std::string>(), document.dump(2) + "\n", written);
  }
  if (vm.count("write-model-form")) {
    std::vector<std::string> profile_files;
    for (const auto& [gpu, file] : profiles) profile_files.push_back(file);
    const std::string shown_catalogue = vm.count("catalogue") ? catalogue_file : kShippedCatalogueName;
    std::string command = "lcsim validate --samples " + std::to_string(samples);
    if (vm.count("catalogue")) command += " --catalogue " + catalogue_file;
    for (const auto& file : profile_files) command += " --profile " + file;
    command += " --write-model-form FILE";
    write_output(vm["write-model-form"].as<std::string>(),
                 model_form_to_json(interval_summary, shown_catalogue, profile_files, command).dump(2) + "\n", written);
  }
  if (vm.count("csv")) write_output(vm["csv"].as<std::string>(), validation_to_csv(outcomes), written);
  std::string profile_note;
  for (const auto& p : profile_labels) profile_note += (profile_note.empty() ? "" : "; ") + p;
  if (!vm.count("quiet")) {
    print_table(catalogue, outcomes, summary, intervals, profile_note, out);
    print_interval_summary(interval_summary, out);
  }

  // A measured entry that no longer predicts the plans that ran is a stale catalogue, not an accuracy figure.
  std::string drifted;
  for (const auto& o : outcomes)
    if (!o.entry->measured.empty() && o.failed.rfind(kPlanDrift, 0) == 0) drifted += "\n  " + o.entry->id;
  if (!drifted.empty())
    throw PlanningError(catalogue_file +
                        ": measured entries no longer predict the plans that ran (see above):" + drifted);
  if (any_failed) {
    work.keep();
    std::string failures;
    for (const auto& f : run_failure)
      if (!f.empty()) failures += "\n  " + f;
    throw PlanningError(catalogue_file + ": runs failed (their logs are kept in " + dir.string() + "):" + failures);
  }
}

}  // namespace lcsim
