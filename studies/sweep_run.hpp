#pragma once
// `lcsim sweep`'s points as a function: each point's run through a Runner, its scenario, results and log written
// into the sweep's folder (the sweep's product, which `lcsim sweep merge` reads from the slices' folders).
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "studies/runner.hpp"
#include "studies/sweep.hpp"
#include "studies/sweep_results.hpp"

namespace lcsim {

/// A point's run: its status as `lcsim plan|simulate` would exit, and its results when it ran here.
struct SweepPointRun {
  const SweepPoint* point = nullptr;
  int exit_status = 0;
  std::optional<nlohmann::ordered_json> results;  ///< none when it failed, or when read from a slice's folder
};

/// A point's results file (lcsim-results/1 or /2), keys in the order written; a truncated or corrupt file is bad
/// input naming it.
nlohmann::ordered_json read_results_file(const std::string& file);
/// Runs `points`, `jobs` at a time, writing each one's scenario, results and log into `dir` as it ends.
std::vector<SweepPointRun> run_sweep_points(const Sweep& sweep, const std::vector<const SweepPoint*>& points,
                                            const std::filesystem::path& dir, int jobs, Runner& runner,
                                            const RunsProgress& progress);
/// InputError (or PlanningError when a policy could not plan) naming the failed points and their logs.
void throw_if_points_failed(const Sweep& sweep, const std::vector<SweepPointRun>& runs,
                            const std::filesystem::path& dir);
/// Every point's results: those held by the runs, the others read from `dir` (a merged slice's).
std::vector<SweepPointResult> sweep_point_results(const std::vector<SweepPointRun>& runs,
                                                  const std::filesystem::path& dir);
/// The whole sweep in `dir` on this machine: every point run, failures raised, the merged lcsim-sweep/1 document.
nlohmann::ordered_json run_sweep(const Sweep& sweep, const std::filesystem::path& dir, int jobs, Runner& runner,
                                 const RunsProgress& progress);

}  // namespace lcsim
