#include "studies/tune_candidate.hpp"

#include <algorithm>
#include <optional>
#include <vector>

#include "base/errors.hpp"
#include "formats/results_io.hpp"
#include "formats/scenario_loader.hpp"
#include "program/bound.hpp"
#include "studies/evaluation.hpp"

namespace lcsim {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

/// A figure as the results file writes it and the search used to read it back.
double as_written(double value) {
  return results_number(value).get<double>();
}

/// Tokens over the summed lower bounds of the iteration times: an upper bound of the estimate's tokens/s (which
/// sums the iteration times in the same order). None when the bounds say nothing.
std::optional<double> tokens_per_s_bound(Tokens tokens, const std::vector<double>& lower) {
  double seconds = 0;
  for (double s : lower) seconds += s;
  if (!(seconds > 0)) return std::nullopt;
  return static_cast<double>(tokens) / seconds;
}

const PolicySpec& tuned_policy(const LoadedScenario& loaded, const std::string& label) {
  for (const auto& p : loaded.scenario.policies)
    if (p.label == label) return p;
  throw InputError(loaded.scenario.file + ": no policy labelled \"" + label + "\"");
}

}  // namespace

TuneOutcome estimate_candidate(const TuneCandidate& c, const std::string& file, CandidateBounds bounds,
                               const std::function<double()>& threshold,
                               const std::function<std::string(const std::exception&)>& describe) {
  TuneOutcome o;
  try {
    const LoadedScenario loaded = load_and_prepare(c.scenario, file);
    // The tuned policy alone: the baseline `lcsim plan` also runs only gives the speedup, which tune never reads.
    const PolicyPlans planned = plan_policy(loaded, tuned_policy(loaded, c.policy));
    const CostModel& cost = *loaded.cost;
    if (bounds != CandidateBounds::None) {
      double most = 0;
      for (const auto& plan : planned.plans) {
        const double bytes = program::memory_bound_bytes(plan, cost);
        most = std::max(most, bytes);
        // The same margin as the throughput bounds: the replay sums activations as they come and go.
        if (bytes > cost.capacity_bytes() * (1 + 1e-6)) ++o.memory_oom_iterations;
      }
      o.memory_bound_gib = as_written(most / kGiB);
      if (o.memory_oom_iterations > 0) return o;  // never accepted, whatever its throughput

      const CostModel best = program::at_best_efficiency(cost);
      Tokens tokens = 0;
      std::vector<double> lower;
      for (const auto& plan : planned.plans) {
        tokens += plan.tokens();
        lower.push_back(program::compute_bound_seconds(plan, best));
      }
      o.compute_bound_tokens_per_s = tokens_per_s_bound(tokens, lower);
      const bool prune = bounds == CandidateBounds::Prune;
      if (prune && bound_loses(o.compute_bound_tokens_per_s, threshold())) return o;

      program::Estimator estimator(cost);
      bool replayed = false;
      for (std::size_t i = 0; i < planned.plans.size(); ++i)
        if (const auto seconds = program::replica_bound_seconds(planned.plans[i], estimator)) {
          lower[i] = std::max(lower[i], *seconds);
          replayed = true;
        }
      if (replayed) o.replica_bound_tokens_per_s = tokens_per_s_bound(tokens, lower);
      if (prune && bound_loses(o.replica_bound_tokens_per_s, threshold())) return o;
    }
    const PolicyResult result = estimate_plans(loaded, planned);
    o.estimated = true;
    o.estimate_tokens_per_s = as_written(result.tokens_per_s);
    o.p99_iteration_s = as_written(result.p99_iteration_s);
    o.oom_iterations = result.oom_iterations;
    for (const auto& it : result.iterations) o.peak_gib = std::max(o.peak_gib, as_written(it.peak_bytes / kGiB));
  } catch (const std::exception& e) {
    // The bounds made before the failure stay: pruning then treats the candidate as a run that stopped at them.
    o.estimated = false;
    o.estimate_tokens_per_s = o.p99_iteration_s = o.peak_gib = 0;
    o.oom_iterations = 0;
    o.failed = describe(e);
  }
  return o;
}

}  // namespace lcsim
