// `lcsim sweep`: every point of a sweep file planned or simulated through the Runner (studies/sweep_run.hpp), then
// merged into one CSV and JSON; slices of a sweep (--shard) and their merge.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include <boost/program_options.hpp>

#include "base/files.hpp"
#include "base/json_reader.hpp"
#include "cli/cli.hpp"
#include "cli/command_options.hpp"
#include "cli/progress.hpp"
#include "studies/interrupts.hpp"
#include "studies/sweep_results.hpp"
#include "studies/sweep_run.hpp"
#include "studies/sweep_shard.hpp"

namespace lcsim {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr const char* kSweepUsage =
    "Usage: lcsim sweep SWEEP.json [options]\n"
    "       lcsim sweep SWEEP.json --shard K/N [--out DIR] [--jobs N] [--quiet]\n"
    "       lcsim sweep merge DIR... [--out DIR] [--csv FILE] [--json FILE] [--quiet]\n";

po::options_description sweep_options() {
  po::options_description options("Options", 110, 60);
  options.add_options()              //
      ("help,h", "print this help")  //
      ("jobs,j", po::value<int>()->default_value(1)->value_name("N"),
       "points run at once (plans on threads, simulations in child processes)")  //
      ("out,o", po::value<std::string>()->value_name("DIR"),
       "folder for the points' scenarios, results and logs (default: SWEEP's name + .out in the working folder; "
       "with --shard K/N, that folder's shard-K)")  //
      ("csv", po::value<std::string>()->value_name("FILE"),
       "write one row per point and policy (default DIR/sweep.csv)")(
          "json", po::value<std::string>()->value_name("FILE"), "write the merged results (default DIR/sweep.json)")  //
      ("shard", po::value<std::string>()->value_name("K/N"),
       "run only slice K of N (1 <= K <= N, 1-based like SLURM_ARRAY_TASK_ID): the points i with i mod N = K - 1; "
       "writes DIR/shard.json for `lcsim sweep merge`, no CSV or JSON")  //
      ("quiet,q", "do not print the summary table");
  return options;
}

std::string sweep_help() {
  std::ostringstream text;
  text << kSweepUsage
       << "\nRuns `lcsim plan` or `lcsim simulate` (the sweep's \"mode\") on every point of the cartesian product of\n"
          "the sweep's axes over its base scenario, --jobs points at a time. Writes each\n"
          "point's scenario, results and log under DIR, then one CSV row per point and policy and a merged JSON\n"
          "(schema lcsim-sweep/1). Sweep format: studies/sweep.hpp and scenarios/README.md.\n"
          "\n"
          "On many machines (a Slurm job array: tools/slurm/lcsim-sweep.sbatch, docs/sweeps-and-plots.md), run\n"
          "`--shard K/N` for every K in 1..N, then `lcsim sweep merge` on the N folders: it checks that they are\n"
          "slices 1..N of one sweep, each once, and writes the CSV and JSON that one `lcsim sweep SWEEP --out DIR`\n"
          "writes, byte for byte (give every slice the same SWEEP path, and merge the same --out DIR). A sweep file\n"
          "named merge is ./merge.\n\n"
       << sweep_options();
  return text.str();
}

po::options_description merge_options() {
  po::options_description options("Options", 110, 60);
  options.add_options()              //
      ("help,h", "print this help")  //
      ("out,o", po::value<std::string>()->value_name("DIR"),
       "folder for the points' scenarios, results and logs (default: SWEEP's name + .out in the working folder)")  //
      ("csv", po::value<std::string>()->value_name("FILE"),
       "write one row per point and policy (default DIR/sweep.csv)")(
          "json", po::value<std::string>()->value_name("FILE"), "write the merged results (default DIR/sweep.json)")  //
      ("quiet,q", "do not print the summary table");
  return options;
}

std::string merge_help() {
  std::ostringstream text;
  text << "Usage: lcsim sweep merge DIR... [options]\n"
       << "\nMerges the folders of `lcsim sweep SWEEP --shard K/N` runs, one per K in 1..N, in any order: copies\n"
          "every point's scenario, results and log into DIR and writes the CSV and JSON (schema lcsim-sweep/1)\n"
          "that `lcsim sweep SWEEP --out DIR` writes, byte for byte, or reports the failed points as it does.\n"
          "A missing or duplicated slice, slices of different sweeps or of different N are errors (exit 2).\n\n"
       << merge_options();
  return text.str();
}

/// The files a sweep writes into its folder for `points`: the guard checks them against every input.
std::vector<std::string> point_file_names(const std::vector<SweepPoint>& points) {
  std::vector<std::string> names;
  for (const auto& point : points)
    for (const char* suffix : {".json", ".results.json", ".log"})
      names.push_back(sweep_point_path({}, static_cast<std::size_t>(point.index), suffix).string());
  return names;
}

void print_summary(const Sweep& sweep, const std::vector<SweepPointResult>& results, std::ostream& out) {
  const auto& first = results.front().results;
  out << "sweep     " << sweep.name << " (" << sweep.file << "), mode " << sweep.mode << ", " << results.size()
      << " points\n";
  out << "dataset   " << first.value("dataset", "") << "\n";
  out << "profile   " << first["profile"].value("label", "") << "\n";
  const auto where_of = [](const SweepPointResult& r) {
    std::string where;
    for (const auto& [axis, value] : r.point->coordinates)
      where += (where.empty() ? "" : " ") + axis + "=" + axis_value_text(value);
    return where;
  };
  std::size_t width = 44;  // the point column, wider when a point's coordinates need it
  for (const auto& r : results) width = std::max(width, where_of(r).size() + 2);
  const int point_width = static_cast<int>(width);
  out << std::left << std::setw(point_width) << "point" << std::setw(20) << "policy" << std::right << std::setw(10)
      << "mean s" << std::setw(12) << "tokens/s" << std::setw(9) << "speedup" << std::setw(6) << "OOM";
  // Points run with sampled worlds (the sweep's "samples"): their speedup's 80% interval.
  const bool sampled = sweep.samples > 1;
  if (sampled) out << std::setw(17) << "speedup p10-p90";
  out << "\n";
  for (const auto& r : results) {
    const std::string where = where_of(r);
    for (const auto& policy : r.results.at("policies")) {
      const auto number = [&](const char* key, int precision) {
        std::ostringstream s;
        const auto& v = policy.at(key);
        if (v.is_number())
          s << std::fixed << std::setprecision(precision) << v.get<double>();
        else
          s << "-";
        return s.str();
      };
      out << std::left << std::setw(point_width) << where << std::setw(20) << policy.at("name").get<std::string>()
          << std::right << std::setw(10) << number("mean_iteration_s", 4) << std::setw(12) << number("tokens_per_s", 0)
          << std::setw(8) << number("speedup_vs_baseline", 2) << "x" << std::setw(6)
          << policy.at("oom_iterations").get<int>();
      const auto interval = policy.find("interval");
      if (sampled && interval != policy.end()) {
        std::ostringstream cell;
        cell << std::fixed << std::setprecision(2) << interval->at("speedup").at("p10").get<double>() << "-"
             << interval->at("speedup").at("p90").get<double>() << "x";
        out << std::setw(17) << cell.str();
      }
      out << "\n";
    }
  }
}

void points_progress(std::size_t done, std::size_t total) {
  print_progress(done, total, "points");
}

// The last step of every sweep, on one machine or merged from slices: DIR holds every point's scenario, log and
// (where it ran) results exactly as the one-machine run leaves them, so both write the same bytes from here.
void finish_sweep(const Sweep& sweep, const std::vector<SweepPointRun>& statuses, const fs::path& dir,
                  const fs::path& csv, const fs::path& json, bool quiet, std::ostream& out) {
  throw_if_points_failed(sweep, statuses, dir);
  const std::vector<SweepPointResult> results = sweep_point_results(statuses, dir);
  std::vector<std::string> written;
  write_output(csv.string(), sweep_results_to_csv(sweep, results), written);
  write_output(json.string(), sweep_results_to_json(sweep, results).dump(2) + "\n", written);
  if (!quiet) {
    print_summary(sweep, results, out);
    out << "wrote " << csv.string() << " and " << json.string() << "\n";
  }
}

fs::path default_out(const Sweep& sweep) {
  return fs::path(fs::path(sweep.file).stem().string() + ".out");
}

void create_out(const fs::path& dir) {
  std::error_code made;
  fs::create_directories(dir, made);
  if (made) throw InputError(dir.string() + ": cannot create the output folder: " + made.message());
}

struct CsvJsonOutputs {
  fs::path csv;
  fs::path json;
};

CsvJsonOutputs csv_json_outputs(const po::variables_map& vm, const fs::path& dir) {
  return {vm.count("csv") ? fs::path(vm["csv"].as<std::string>()) : dir / "sweep.csv",
          vm.count("json") ? fs::path(vm["json"].as<std::string>()) : dir / "sweep.json"};
}

// Slice K of N: its points run as in the one-machine sweep, then DIR/shard.json records what merge needs.
void run_shard(const Sweep& sweep, const Json& sweep_document, const std::vector<SweepPoint>& points,
               const SweepShard& shard, const fs::path& dir, int jobs, bool quiet, std::ostream& out) {
  const fs::path manifest_file = dir / kSweepShardFile;
  // A manifest left by an earlier run must not vouch for this one's points should this run not finish.
  std::error_code ignored;
  fs::remove(manifest_file, ignored);
  std::vector<const SweepPoint*> mine;
  for (const auto& point : points)
    if (in_sweep_shard(static_cast<std::size_t>(point.index), shard)) mine.push_back(&point);
  LocalRunner runner;
  const std::vector<SweepPointRun> statuses = run_sweep_points(sweep, mine, dir, jobs, runner, points_progress);

  SweepShardManifest manifest;
  manifest.sweep_file = sweep.file;
  manifest.sweep_digest = sweep_digest(sweep_document, points);
  manifest.shard = shard;
  manifest.points_total = static_cast<int>(points.size());
  manifest.sweep = sweep_document;
  for (const auto& s : statuses)
    manifest.points.push_back({s.point->index, s.exit_status, scenario_digest(s.point->scenario)});
  write_file_atomically(manifest_file.string(), shard_manifest_to_json(manifest).dump(2) + "\n");

  throw_if_points_failed(sweep, statuses, dir);
  if (quiet) return;
  if (!statuses.empty()) print_summary(sweep, sweep_point_results(statuses, dir), out);
  out << "slice " << shard.index << " of " << shard.count << ": " << statuses.size() << " of " << points.size()
      << " points; wrote " << manifest_file.string() << " (merge the " << shard.count
      << " slices with `lcsim sweep merge`)\n";
}

/// The slice folders named on the command line, each with its manifest; checked to be slices 1..N of one sweep.
std::vector<SweepShardFolder> read_slices(const std::vector<std::string>& folders) {
  std::vector<SweepShardFolder> slices;
  for (const auto& folder : folders) {
    const std::string file = (fs::path(folder) / kSweepShardFile).string();
    std::error_code error;
    if (!fs::is_directory(folder, error)) throw InputError(folder + ": not a folder (expected a slice's --out DIR)");
    if (!fs::exists(file, error))
      throw InputError(folder + ": no " + std::string(kSweepShardFile) +
                       ": not the folder of `lcsim sweep --shard K/N`, or its run did not finish");
    slices.push_back({folder, shard_manifest_from_json(parse_json_file(file), file)});
  }
  check_sweep_shards(slices);
  return slices;
}

/// Every point of the merged sweep, its scenario back from the slice that ran it (checked against the digest the
/// slice recorded), the slice and the exit status.
struct MergedPoints {
  std::vector<SweepPoint> points;
  std::vector<const SweepShardFolder*> owner;
  std::vector<int> exit_status;
};

MergedPoints merged_points(const Sweep& sweep, const std::vector<SweepShardFolder>& slices) {
  const SweepShardManifest& reference = slices.front().manifest;
  MergedPoints m;
  m.points.resize(static_cast<std::size_t>(reference.points_total));
  m.owner.resize(m.points.size());
  m.exit_status.resize(m.points.size());
  for (const auto& slice : slices)
    for (const auto& recorded : slice.manifest.points) {
      const auto i = static_cast<std::size_t>(recorded.index);
      const std::string file = sweep_point_path(slice.folder, i, ".json").string();
      SweepPoint& point = m.points[i];
      point.index = recorded.index;
      point.coordinates = sweep_point_coordinates(sweep, i);
      point.scenario = parse_json_file(file);
      if (scenario_digest(point.scenario) != recorded.scenario_digest)
        throw InputError(file + ": not the scenario that " + slice.folder + " ran for point " + std::to_string(i) +
                         " (changed after the run?)");
      m.owner[i] = &slice;
      m.exit_status[i] = recorded.exit_status;
    }
  if (sweep_digest(reference.sweep, m.points) != reference.sweep_digest)
    throw InputError(slices.front().folder + ": the points' scenarios do not make up the sweep its " + kSweepShardFile +
                     " names (" + reference.sweep_digest + ")");
  return m;
}

/// DIR as the one-machine run leaves it; a point's results name its scenario file, which is now DIR's.
std::vector<SweepPointRun> copy_points(const MergedPoints& m, const fs::path& dir) {
  std::vector<SweepPointRun> statuses;
  for (std::size_t i = 0; i < m.points.size(); ++i) {
    const fs::path from = m.owner[i]->folder;
    write_sweep_point_scenario(dir, m.points[i]);
    write_file_atomically(sweep_point_path(dir, i, ".log").string(),
                          read_input_file(sweep_point_path(from, i, ".log").string(), kMaxResultsFileBytes));
    if (m.exit_status[i] != 0) {
      statuses.push_back({&m.points[i], m.exit_status[i], std::nullopt});
      continue;
    }
    const std::string file = sweep_point_path(from, i, ".results.json").string();
    nlohmann::ordered_json results = read_results_file(file);
    if (!results.is_object() || !results.contains("scenario_file"))
      throw InputError(file + ": not a results file (schema lcsim-results/1)");
    results["scenario_file"] = sweep_point_path(dir, i, ".json").string();
    write_file_atomically(sweep_point_path(dir, i, ".results.json").string(), results.dump(2) + "\n");
    statuses.push_back({&m.points[i], m.exit_status[i], std::move(results)});
  }
  return statuses;
}

void run_merge_command(const std::vector<std::string>& args, std::ostream& out) {
  po::options_description hidden;
  hidden.add_options()("dir", po::value<std::vector<std::string>>());
  po::options_description all;
  all.add(merge_options()).add(hidden);
  po::positional_options_description positional;
  positional.add("dir", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(std::string("sweep merge: ") + e.what(), merge_help());
  }
  reject_empty_values("sweep merge", vm, all, merge_help());
  if (vm.count("help")) {
    out << merge_help();
    return;
  }
  if (!vm.count("dir")) throw UsageError("sweep merge: no slice folders given", merge_help());

  const std::vector<SweepShardFolder> slices = read_slices(vm["dir"].as<std::vector<std::string>>());
  const SweepShardManifest& reference = slices.front().manifest;
  const Sweep sweep = sweep_from_json(reference.sweep, reference.sweep_file);
  if (sweep_point_count(sweep) != static_cast<std::size_t>(reference.points_total))
    throw InputError(slices.front().folder + ": " + kSweepShardFile + " counts " +
                     std::to_string(reference.points_total) + " points, its sweep has " +
                     std::to_string(sweep_point_count(sweep)));
  const MergedPoints merged = merged_points(sweep, slices);

  const fs::path dir = vm.count("out") ? fs::path(vm["out"].as<std::string>()) : default_out(sweep);
  for (const auto& slice : slices) {
    std::error_code error;
    if (fs::equivalent(dir, slice.folder, error))
      throw UsageError("sweep merge: --out " + dir.string() + " is the slice folder " + slice.folder +
                           "; merge into a folder of its own",
                       merge_help());
  }
  const CsvJsonOutputs outputs = csv_json_outputs(vm, dir);
  OutputGuard guard;
  guard.add_inputs({reference.sweep_file, sweep.base_file});
  for (const auto& slice : slices) {
    guard.add_input((fs::path(slice.folder) / kSweepShardFile).string());
    for (const auto& recorded : slice.manifest.points)
      for (const char* suffix : {".json", ".results.json", ".log"})
        guard.add_input(sweep_point_path(slice.folder, static_cast<std::size_t>(recorded.index), suffix).string());
  }
  for (const auto& point : merged.points) guard.add_inputs(scenario_document_files(point.scenario));
  guard.add_folder("--out " + dir.string(), dir.string(), point_file_names(merged.points));
  guard.add_output("--csv", outputs.csv.string());
  guard.add_output("--json", outputs.json.string());
  guard.check();
  create_out(dir);
  finish_sweep(sweep, copy_points(merged, dir), dir, outputs.csv, outputs.json, vm.count("quiet") > 0, out);
}

}  // namespace

void run_sweep_command(const std::vector<std::string>& args, std::ostream& out) {
  const InterruptScope interrupts;  // Ctrl-C and SIGTERM reach the children, then the work folders go
  if (!args.empty() && args.front() == "merge") {
    run_merge_command(std::vector<std::string>(args.begin() + 1, args.end()), out);
    return;
  }
  const auto parsed = parse_file_command("sweep", "SWEEP", args, sweep_options(), sweep_help(), out);
  if (!parsed) return;
  const po::variables_map& vm = parsed->options;
  const int jobs = vm["jobs"].as<int>();
  if (jobs < 1) throw UsageError("sweep: --jobs must be at least 1, got " + std::to_string(jobs), sweep_help());
  std::optional<SweepShard> shard;
  if (vm.count("shard")) {
    const std::string text = vm["shard"].as<std::string>();
    shard = parse_sweep_shard(text);
    if (!shard)
      throw UsageError(
          "sweep: --shard expects K/N with 1 <= K <= N (K 1-based, like SLURM_ARRAY_TASK_ID), got \"" + text + "\"",
          sweep_help());
    if (vm.count("csv") || vm.count("json"))
      throw UsageError("sweep: --csv and --json are written by `lcsim sweep merge`, not by a --shard slice",
                       sweep_help());
  }

  const Json sweep_document = parse_json_file(parsed->file);
  const Sweep sweep = sweep_from_json(sweep_document, parsed->file);
  const std::vector<SweepPoint> points = expand_sweep(sweep);
  fs::path dir = vm.count("out") ? fs::path(vm["out"].as<std::string>()) : default_out(sweep);
  if (shard && !vm.count("out")) dir /= "shard-" + std::to_string(shard->index);
  const CsvJsonOutputs outputs = csv_json_outputs(vm, dir);
  OutputGuard guard;
  guard.add_inputs({sweep.file, sweep.base_file});
  for (const auto& point : points) guard.add_inputs(scenario_document_files(point.scenario));
  guard.add_folder("--out " + dir.string(), dir.string(), point_file_names(points));
  if (shard) {
    guard.add_output("--out", (dir / kSweepShardFile).string());
  } else {
    guard.add_output("--csv", outputs.csv.string());
    guard.add_output("--json", outputs.json.string());
  }
  guard.check();
  create_out(dir);
  if (shard) {
    run_shard(sweep, sweep_document, points, *shard, dir, jobs, vm.count("quiet") > 0, out);
    return;
  }

  std::vector<const SweepPoint*> all;
  for (const auto& point : points) all.push_back(&point);
  LocalRunner runner;
  finish_sweep(sweep, run_sweep_points(sweep, all, dir, jobs, runner, points_progress), dir, outputs.csv, outputs.json,
               vm.count("quiet") > 0, out);
}

}  // namespace lcsim
