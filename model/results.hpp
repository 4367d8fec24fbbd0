#pragma once
// Results of evaluating policies on a scenario, shared by `lcsim plan` (no contention) and
// `lcsim simulate` (SimGrid). JSON schema in formats/results_io.hpp.
#include <cstdint>
#include <string>
#include <vector>

#include "model/metrics.hpp"
#include "model/workload.hpp"

namespace lcsim {

struct IterationResult {
  int index = 0;
  std::string label;
  double seconds = 0;
  Tokens tokens = 0;
  std::size_t sequences = 0;
  std::size_t per_sequence_micro_batches = 0;  ///< micro-batches with a per-sequence CP split (CpSplit)
  bool oom = false;
  double peak_bytes = 0;  ///< largest per-GPU peak of the iteration
  /// The largest per-GPU static bytes of the plan (parameters, gradients, optimizer states; not written to files):
  /// with peak_bytes, what an OOM warning says ran out -- the static part alone or the activations on top of it.
  double static_bytes = 0;
  BalanceMetrics metrics;
  std::vector<double> busy_seconds;  ///< per GPU (written by simulate; plan fills it from the estimate)
};

/// The 10th, 50th and 90th percentiles of a figure over sampled worlds (docs/uncertainty.md).
struct Quantiles {
  double p10 = 0;
  double p50 = 0;
  double p90 = 0;
};

/// A policy's figures over sampled worlds (`--samples N`; world 0 is the nominal run). The quantiles include the
/// model-form term; the per-world figures do not (`lcsim validate` applies its own, leave-one-out).
struct PolicyInterval {
  int samples = 1;
  Quantiles iteration_s;  ///< mean iteration seconds
  Quantiles speedup;      ///< tokens/s over the baseline's in the same world
  Quantiles tokens_per_s;
  double p_beats_baseline = 0;
  std::vector<double> world_iteration_s;  ///< per world, before the model-form term
  std::vector<double> world_speedup;      ///< per world, before the model-form term
  std::vector<double> world_peak_GiB;     ///< per world, the per-iteration largest per-GPU peak, mean over iterations
  std::vector<BalanceMetrics> world_metrics;
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
  BalanceMetrics metrics;  ///< mean over iterations
  double planning_ms = 0;  ///< wall time the policy took to plan all iterations
  std::vector<IterationResult> iterations;
  PolicyInterval interval;  ///< samples == 1: the nominal figures only

  /// Every iteration fits in GPU memory. A policy that does not fit can never be the winner, nor the reference of
  /// the speedups.
  bool fits() const { return oom_iterations == 0; }
};

/// A figure the paper reports for the scenario, carried into results files so plots draw it beside lcsim's.
struct PaperSpeedup {
  std::string policy;  ///< label of a policy of the scenario
  double speedup = 0;
  std::string source;
};

/// What the intervals of a run were sampled from, and how sure its ranking is.
struct RunUncertainty {
  int samples = 1;
  std::vector<std::string> sources;  ///< what varies between worlds, each named with its size
  double model_form_log_sigma = 0;   ///< s_speedup: the spread of log(speedup) the model form adds
  std::string model_form_file;       ///< where it was read ("" when not applied)
  /// The nominal world's highest tokens/s among the policies that fit in memory there; "" when none fits.
  std::string winner;
  double p_winner = 1;  ///< share of worlds where it fits and is the highest of those that fit (0 without a winner)
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
  /// The policy speedups are over: the baseline, or when the baseline runs out of memory in some iteration (and
  /// another policy fits), the fastest policy that fits. "" means the baseline (results that predate it).
  std::string speedup_reference;
  std::vector<PaperSpeedup> paper_figures;
  std::vector<PolicyResult> policies;
  RunUncertainty uncertainty;
};

/// Fills mean/p50/p99/total/tokens/tokens_per_s/oom/metrics of `result` from its iterations.
void summarize(PolicyResult& result);
/// Sets speedup_reference (the baseline, or the fastest policy that fits when the baseline does not) and
/// speedup_vs_baseline of every policy over it; throws InputError when the baseline label is absent.
void apply_baseline(RunResults& results);
/// The label speedups are over: speedup_reference, or the baseline when it is unset.
const std::string& speedup_reference(const RunResults& results);
/// The index in results.policies of the policy with the highest tokens/s among those that fit (ties: the earlier),
/// or -1 when none fits.
int fastest_fitting(const RunResults& results);

}  // namespace lcsim
