#pragma once
// A sweep's results: every point's results document (schema lcsim-results/2) merged into one JSON document
// (schema lcsim-sweep/1) and one CSV table with a row per point and policy.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "studies/sweep.hpp"

namespace lcsim {

struct SweepPointResult {
  const SweepPoint* point = nullptr;
  std::string scenario_file;
  nlohmann::ordered_json results;  ///< the point's lcsim-results/2 document
};

/// {schema, sweep, sweep_file, mode, axes[], points[{index, coordinates{}, scenario_file, results}]}
nlohmann::ordered_json sweep_results_to_json(const Sweep& sweep, const std::vector<SweepPointResult>& points);
/// Columns: point, one per axis, gpus, policy, kind, mean_iteration_s, p50_iteration_s, p99_iteration_s,
/// tokens_per_s, speedup_vs_baseline, oom_iterations.
std::string sweep_results_to_csv(const Sweep& sweep, const std::vector<SweepPointResult>& points);

}  // namespace lcsim
