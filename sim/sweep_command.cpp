// `lcsim sweep`: every point of a sweep file run as its own `lcsim plan|simulate` process (the SimGrid engine
// is one per process, and processes give --jobs parallelism for free), then merged into one CSV and JSON.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include <boost/program_options.hpp>

#include "policies/core/files.hpp"
#include "policies/core/json_reader.hpp"
#include "sim/cli.hpp"
#include "sim/command_options.hpp"
#include "sim/process_pool.hpp"
#include "traces/sweep_results.hpp"

namespace lcsim {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr const char* kSweepUsage = "Usage: lcsim sweep SWEEP.json [options]\n";

po::options_description sweep_options() {
  po::options_description options("Options", 110, 60);
  options.add_options()                                                                                      //
      ("help,h", "print this help")                                                                          //
      ("jobs,j", po::value<int>()->default_value(1)->value_name("N"), "points run in parallel (processes)")  //
      ("out,o", po::value<std::string>()->value_name("DIR"),
       "folder for the points' scenarios, results and logs (default: SWEEP's name + .out in the working folder)")  //
      ("csv", po::value<std::string>()->value_name("FILE"),
       "write one row per point and policy (default DIR/sweep.csv)")(
          "json", po::value<std::string>()->value_name("FILE"), "write the merged results (default DIR/sweep.json)")  //
      ("quiet,q", "do not print the summary table");
  return options;
}

std::string sweep_help() {
  std::ostringstream text;
  text << kSweepUsage
       << "\nRuns `lcsim plan` or `lcsim simulate` (the sweep's \"mode\") on every point of the cartesian product of\n"
          "the sweep's axes over its base scenario, each point in its own process, --jobs at a time. Writes each\n"
          "point's scenario, results and log under DIR, then one CSV row per point and policy and a merged JSON\n"
          "(schema lcsim-sweep/1). Sweep format: traces/sweep.hpp and scenarios/README.md.\n\n"
       << sweep_options();
  return text.str();
}

void write_text(const fs::path& file, const std::string& text) {
  write_file_atomically(file.string(), text);
}

void print_summary(const Sweep& sweep, const std::vector<SweepPointResult>& results, std::ostream& out) {
  const auto& first = results.front().results;
  out << "sweep     " << sweep.name << " (" << sweep.file << "), mode " << sweep.mode << ", " << results.size()
      << " points\n";
  out << "dataset   " << first.value("dataset", "") << "\n";
  out << "profile   " << first["profile"].value("label", "") << "\n";
  out << std::left << std::setw(44) << "point" << std::setw(20) << "policy" << std::right << std::setw(10) << "mean s"
      << std::setw(12) << "tokens/s" << std::setw(9) << "speedup" << std::setw(6) << "OOM"
      << "\n";
  for (const auto& r : results) {
    std::string where;
    for (const auto& [axis, value] : r.point->coordinates)
      where += (where.empty() ? "" : " ") + axis + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
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
      out << std::left << std::setw(44) << where << std::setw(20) << policy.at("name").get<std::string>() << std::right
          << std::setw(10) << number("mean_iteration_s", 4) << std::setw(12) << number("tokens_per_s", 0)
          << std::setw(8) << number("speedup_vs_baseline", 2) << "x" << std::setw(6)
          << policy.at("oom_iterations").get<int>() << "\n";
    }
  }
}

}  // namespace

void run_sweep_command(const std::vector<std::string>& args, std::ostream& out) {
  const auto parsed = parse_file_command("sweep", "SWEEP", args, sweep_options(), sweep_help(), out);
  if (!parsed) return;
  const po::variables_map& vm = parsed->options;
  const int jobs = vm["jobs"].as<int>();
  if (jobs < 1) throw UsageError("sweep: --jobs must be at least 1, got " + std::to_string(jobs), sweep_help());

  const Sweep sweep = load_sweep(parsed->file);
  const std::vector<SweepPoint> points = expand_sweep(sweep);
  const fs::path dir =
      vm.count("out") ? fs::path(vm["out"].as<std::string>()) : fs::path(fs::path(sweep.file).stem().string() + ".out");
  std::error_code made;
  fs::create_directories(dir, made);
  if (made) throw InputError(dir.string() + ": cannot create the output folder: " + made.message());
  const fs::path csv = vm.count("csv") ? fs::path(vm["csv"].as<std::string>()) : dir / "sweep.csv";
  const fs::path json = vm.count("json") ? fs::path(vm["json"].as<std::string>()) : dir / "sweep.json";
  std::vector<std::string> inputs{sweep.file, sweep.base_file};
  for (const auto& point : points) {
    const Json& doc = point.scenario;
    if (doc.contains("profile") && doc["profile"].is_string()) inputs.push_back(doc["profile"].get<std::string>());
    if (doc.contains("dataset") && doc["dataset"].contains("trace") && doc["dataset"]["trace"].is_string())
      inputs.push_back(doc["dataset"]["trace"].get<std::string>());
  }
  check_output_files({{"--csv", csv.string()}, {"--json", json.string()}}, inputs);
  const std::string exe = self_executable();

  const auto name_of = [&](std::size_t i, const char* suffix) {
    std::ostringstream name;
    name << "point-" << std::setw(4) << std::setfill('0') << i << suffix;
    return dir / name.str();
  };
  for (std::size_t i = 0; i < points.size(); ++i) write_text(name_of(i, ".json"), points[i].scenario.dump(2) + "\n");

  std::vector<ChildCommand> commands;
  for (std::size_t i = 0; i < points.size(); ++i)
    commands.push_back(
        {{exe, sweep.mode, name_of(i, ".json").string(), "--json", name_of(i, ".results.json").string(), "--quiet"},
         name_of(i, ".log").string()});
  const std::vector<int> status =
      run_children(commands, jobs, [](std::size_t done, std::size_t total) { print_progress(done, total, "points"); });

  std::string failures;
  int worst = 0;
  for (std::size_t i = 0; i < points.size(); ++i)
    if (status[i] != 0) {
      failures += "\n  point " + std::to_string(i) + ": exit " + std::to_string(status[i]) + ", see " +
                  name_of(i, ".log").string();
      worst = std::max(worst, status[i]);
    }
  if (!failures.empty()) {
    const std::string message = sweep.file + ": points failed:" + failures;
    if (worst == kExitPlanning) throw PlanningError(message);
    throw InputError(message);
  }

  std::vector<SweepPointResult> results;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const std::string text = read_input_file(name_of(i, ".results.json").string(), kMaxResultsFileBytes);
    results.push_back({&points[i], name_of(i, ".json").string(), nlohmann::ordered_json::parse(text)});
  }
  std::vector<std::string> written;
  write_output(csv.string(), sweep_results_to_csv(sweep, results), written);
  write_output(json.string(), sweep_results_to_json(sweep, results).dump(2) + "\n", written);
  if (!vm.count("quiet")) {
    print_summary(sweep, results, out);
    out << "wrote " << csv.string() << " and " << json.string() << "\n";
  }
}

}  // namespace lcsim
