#include "model/results.hpp"

#include <algorithm>
#include <cmath>

#include "base/errors.hpp"

namespace lcsim {
namespace {

/// Nearest-rank percentile of sorted values: the ceil(p/100 n)-th smallest (1-based), so p50 of 4 values is the
/// 2nd and p99 of fewer than 100 values is the largest.
double nearest_rank(const std::vector<double>& sorted, double percent) {
  if (sorted.empty()) return 0;
  const auto n = static_cast<double>(sorted.size());
  const auto rank = static_cast<std::size_t>(std::max(1.0, std::ceil(percent * n / 100.0)));
  return sorted[std::min(rank, sorted.size()) - 1];
}

}  // namespace

void summarize(PolicyResult& result) {
  std::vector<double> seconds;
  std::vector<BalanceMetrics> metrics;
  result.total_s = 0;
  result.tokens = 0;
  result.oom_iterations = 0;
  for (const auto& it : result.iterations) {
    seconds.push_back(it.seconds);
    metrics.push_back(it.metrics);
    result.total_s += it.seconds;
    result.tokens += it.tokens;
    if (it.oom) ++result.oom_iterations;
  }
  std::sort(seconds.begin(), seconds.end());
  result.mean_iteration_s = seconds.empty() ? 0 : result.total_s / static_cast<double>(seconds.size());
  result.p50_iteration_s = nearest_rank(seconds, 50);
  result.p99_iteration_s = nearest_rank(seconds, 99);
  result.tokens_per_s = result.total_s > 0 ? static_cast<double>(result.tokens) / result.total_s : 0;
  result.metrics = mean_metrics(metrics);
}

void apply_baseline(RunResults& results) {
  const auto base = std::find_if(results.policies.begin(), results.policies.end(),
                                 [&](const PolicyResult& p) { return p.label == results.baseline; });
  if (base == results.policies.end()) {
    std::string labels;
    for (const auto& p : results.policies) labels += (labels.empty() ? "" : ", ") + p.label;
    throw InputError(results.scenario_file + ": baseline: '" + results.baseline +
                     "' is not the label of a policy of the scenario (labels: " + labels + ")");
  }
  // A baseline that runs out of memory is no reference: the fastest policy that fits is (when one does).
  const PolicyResult* reference = &*base;
  if (!base->fits()) {
    const int fastest = fastest_fitting(results);
    if (fastest >= 0) reference = &results.policies[static_cast<std::size_t>(fastest)];
  }
  results.speedup_reference = reference->label;
  const double base_rate = reference->tokens_per_s;
  for (auto& p : results.policies) p.speedup_vs_baseline = base_rate > 0 ? p.tokens_per_s / base_rate : 0;
}

const std::string& speedup_reference(const RunResults& results) {
  return results.speedup_reference.empty() ? results.baseline : results.speedup_reference;
}

int fastest_fitting(const RunResults& results) {
  int best = -1;
  for (std::size_t p = 0; p < results.policies.size(); ++p) {
    const PolicyResult& candidate = results.policies[p];
    if (!candidate.fits()) continue;
    if (best < 0 || candidate.tokens_per_s > results.policies[static_cast<std::size_t>(best)].tokens_per_s)
      best = static_cast<int>(p);
  }
  return best;
}

}  // namespace lcsim
