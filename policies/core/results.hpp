#pragma once
// Results of evaluating policies on a scenario, shared by `lcsim plan` (no contention) and
// `lcsim simulate` (SimGrid). JSON schema in traces/results_io.hpp.
#include <cstdint>
#include <string>
#include <vector>

#include "policies/core/metrics.hpp"
#include "policies/core/workload.hpp"

namespace lcsim {

struct IterationResult {
  int index = 0;
  std::string label;
  double seconds = 0;
  Tokens tokens = 0;
  std::size_t sequences = 0;
  bool oom = false;
  double peak_bytes = 0;  ///< largest per-GPU peak of the iteration
  BalanceMetrics metrics;
  std::vector<double> busy_seconds;  ///< per GPU (written by simulate; plan fills it from the estimate)
};

struct PolicyResult {
  std::string label;
  std::string kind;
  double mean_iteration_s = 0;
  double p50_iteration_s = 0;
  double p99_iteration_s = 0;
  double total_s = 0;
  Tokens tokens = 0;
  double tokens_per_s = 0;
  double speedup_vs_baseline = 0;  ///< tokens/s over the baseline's tokens/s (same tokens processed)
  int oom_iterations = 0;
  BalanceMetrics metrics;          ///< mean over iterations
  double planning_ms = 0;          ///< wall time the policy took to plan all iterations
  std::vector<IterationResult> iterations;
};

/// A figure the paper reports for the scenario, carried into results files so plots draw it beside lcsim's.
struct PaperSpeedup {
  std::string policy;  ///< label of a policy of the scenario
  double speedup = 0;
  std::string source;
};

struct RunResults {
  std::string mode;  ///< "plan" or "simulate"
  std::string scenario;
  std::string scenario_file;
  std::uint64_t seed = 0;
  std::string profile_label;  ///< "uncalibrated (derived from public figures)" or "calibrated on ..."
  bool calibrated = false;
  std::string dataset_label;  ///< says "synthetic" for sampled distributions
  std::string baseline;
  std::vector<PaperSpeedup> paper_figures;
  std::vector<PolicyResult> policies;
};

/// Fills mean/p50/p99/total/tokens/tokens_per_s/oom/metrics of `result` from its iterations.
void summarize(PolicyResult& result);
/// Sets speedup_vs_baseline of every policy; throws InputError when the baseline label is absent.
void apply_baseline(RunResults& results);

}  // namespace lcsim
