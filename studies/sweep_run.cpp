#include "studies/sweep_run.hpp"

#include <algorithm>
#include <string>

#include "base/errors.hpp"
#include "base/files.hpp"
#include "base/json_reader.hpp"
#include "formats/results_io.hpp"

namespace lcsim {

namespace fs = std::filesystem;

nlohmann::ordered_json read_results_file(const std::string& file) {
  const std::string text = read_input_file(file, kMaxResultsFileBytes);
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::ordered_json::exception& e) {  // syntax, or a number beyond a double (out_of_range)
    throw InputError(file + ": not valid JSON: " + json_error_text(e));
  }
}

std::vector<SweepPointRun> run_sweep_points(const Sweep& sweep, const std::vector<const SweepPoint*>& points,
                                            const fs::path& dir, int jobs, Runner& runner,
                                            const RunsProgress& progress) {
  std::vector<RunRequest> requests;
  for (const SweepPoint* point : points) {
    write_sweep_point_scenario(dir, *point);
    RunRequest request;
    request.mode = sweep.mode == "simulate" ? RunMode::Simulate : RunMode::Plan;
    request.scenario = point->scenario;
    request.file = sweep_point_path(dir, static_cast<std::size_t>(point->index), ".json").string();
    request.samples = sweep.samples;
    requests.push_back(std::move(request));
  }
  const std::vector<RunOutcome> outcomes = runner.run(requests, jobs, progress);
  std::vector<SweepPointRun> runs;
  for (std::size_t k = 0; k < points.size(); ++k) {
    const RunOutcome& o = outcomes[k];
    const auto i = static_cast<std::size_t>(points[k]->index);
    // The log says what `lcsim plan|simulate --quiet` would have printed: its warning, or its error.
    write_file_atomically(sweep_point_path(dir, i, ".log").string(), run_log_text(o));
    SweepPointRun run{points[k], o.status, std::nullopt};
    if (o.status == kExitOk) {
      write_file_atomically(sweep_point_path(dir, i, ".results.json").string(), o.results.dump(2) + "\n");
      run.results = o.results;
    }
    runs.push_back(std::move(run));
  }
  return runs;
}

void throw_if_points_failed(const Sweep& sweep, const std::vector<SweepPointRun>& runs, const fs::path& dir) {
  std::string failures;
  int worst = 0;
  for (const auto& r : runs)
    if (r.exit_status != 0) {
      failures += "\n  point " + std::to_string(r.point->index) + ": exit " + std::to_string(r.exit_status) + ", see " +
                  sweep_point_path(dir, static_cast<std::size_t>(r.point->index), ".log").string();
      worst = std::max(worst, r.exit_status);
    }
  if (failures.empty()) return;
  const std::string message = sweep.file + ": points failed:" + failures;
  if (worst == kExitPlanning) throw PlanningError(message);
  throw InputError(message);
}

std::vector<SweepPointResult> sweep_point_results(const std::vector<SweepPointRun>& runs, const fs::path& dir) {
  std::vector<SweepPointResult> results;
  for (const auto& r : runs) {
    const auto i = static_cast<std::size_t>(r.point->index);
    results.push_back({r.point, sweep_point_path(dir, i, ".json").string(),
                       r.results ? *r.results : read_results_file(sweep_point_path(dir, i, ".results.json").string())});
  }
  return results;
}

nlohmann::ordered_json run_sweep(const Sweep& sweep, const fs::path& dir, int jobs, Runner& runner,
                                 const RunsProgress& progress) {
  const std::vector<SweepPoint> points = expand_sweep(sweep);
  std::vector<const SweepPoint*> all;
  for (const auto& point : points) all.push_back(&point);
  std::error_code made;
  fs::create_directories(dir, made);
  if (made) throw InputError(dir.string() + ": cannot create the output folder: " + made.message());
  const std::vector<SweepPointRun> runs = run_sweep_points(sweep, all, dir, jobs, runner, progress);
  throw_if_points_failed(sweep, runs, dir);
  return sweep_results_to_json(sweep, sweep_point_results(runs, dir));
}

}  // namespace lcsim
