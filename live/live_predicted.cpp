#include "live/live_predicted.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "base/errors.hpp"
#include "base/json_reader.hpp"
#include "formats/results_io.hpp"

namespace lcsim {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
/// Results files round to 9 significant digits.
constexpr double kPeakTolerance = 1e-8;

double largest(const std::vector<double>& values) {
  return values.empty() ? 0.0 : *std::max_element(values.begin(), values.end());
}

/// Marks keys the prediction does not use as read, after checking they are there.
void skip(JsonObjectReader& r, std::initializer_list<std::string_view> keys) {
  for (auto key : keys) r.value(key);
}

void read_iteration(JsonObjectReader r, const IterationPlan& plan, const program::IterationOutcome& replay,
                    std::size_t index, double& seconds) {
  if (r.required<std::int64_t>("index") != static_cast<std::int64_t>(index))
    r.fail("index", "expected iteration " + std::to_string(index));
  if (r.required<std::string>("label") != plan.label)
    r.fail("label", "this run's plan is labelled '" + plan.label + "'");
  if (r.required<std::int64_t>("tokens") != plan.tokens())
    r.fail("tokens", "this run's plan holds " + std::to_string(plan.tokens()) + " tokens: not the same data");
  if (r.required<std::int64_t>("sequences") != static_cast<std::int64_t>(plan.sequence_count()))
    r.fail("sequences", "this run's plan holds " + std::to_string(plan.sequence_count()) + " sequences");
  const double peak = r.required<double>("peak_GiB");
  const double expected = largest(replay.peak_bytes) / kGiB;
  if (std::abs(peak - expected) > kPeakTolerance * std::max(1.0, expected))
    r.fail("peak_GiB", "this run's plan predicts " + std::to_string(expected) +
                           " GiB: simulated with another model, profile or --layers");
  seconds = r.required<double>("seconds");
  r.required<bool>("oom");
  skip(r, {"metrics", "busy_s"});
  if (r.has("idle_s")) r.value("idle_s");
  r.finish();
}

}  // namespace

Prediction predict_by_replay(const LivePlans& live) {
  Prediction p;
  p.source = Prediction::Source::ProgramReplay;
  p.label = "program replay of the same work lists with the cost model's times (no contention; not the simulator)";
  for (const LivePolicyPlans& policy : live.policies) {
    std::vector<double> seconds;
    for (const auto& outcome : policy.model_replay) seconds.push_back(outcome.seconds);
    p.seconds.push_back(std::move(seconds));
  }
  return p;
}

Prediction predict_from_results(const LivePlans& live, const std::string& file) {
  return predict_from_results(live, parse_json_file(file, kMaxResultsFileBytes), file);
}

Prediction predict_from_results(const LivePlans& live, const nlohmann::json& results, const std::string& file) {
  if (!results.is_object()) throw InputError(file + ": expected a results object, got " + json_type_name(results));
  JsonObjectReader r(results, file);
  if (!known_results_schema(r.required<std::string>("schema")))
    r.fail("schema", std::string("expected ") + kResultsSchema + " or " + kResultsSchemaV1);
  if (r.required<std::string>("mode") != "simulate")
    r.fail("mode", "expected results of `lcsim simulate --json` (mode simulate)");
  const Scenario& scenario = live.loaded.scenario;
  if (r.required<std::string>("scenario") != scenario.name)
    r.fail("scenario", "this run is scenario '" + scenario.name + "' (" + scenario.file + ")");
  if (r.required<std::int64_t>("seed") != static_cast<std::int64_t>(scenario.seed))
    r.fail("seed", "this run's scenario has seed " + std::to_string(scenario.seed));
  skip(r, {"scenario_file", "profile", "dataset", "baseline", "paper_figures"});
  if (results.contains("uncertainty")) skip(r, {"uncertainty"});  // lcsim-results/2: the sampled worlds
  const nlohmann::json& policies = r.value("policies");
  if (!policies.is_array()) r.fail("policies", "expected an array, got " + json_type_name(policies));
  r.finish();

  Prediction p;
  p.source = Prediction::Source::Simulation;
  p.label = "lcsim simulate results " + file;
  for (const LivePolicyPlans& policy : live.policies) {
    const auto match = std::find_if(policies.begin(), policies.end(), [&](const nlohmann::json& j) {
      return j.is_object() && j.contains("name") && j["name"] == policy.label;
    });
    if (match == policies.end())
      r.fail("policies", "no policy '" + policy.label + "': simulate it too (or leave it out with --policy)");
    const std::string path = r.path("policies") + "[" + std::to_string(match - policies.begin()) + "]";
    JsonObjectReader pr = r.child(*match, path);
    pr.required<std::string>("name");
    if (pr.required<std::string>("kind") != policy.kind)
      pr.fail("kind", "this run's policy is a '" + policy.kind + "'");
    skip(pr, {"mean_iteration_s", "p50_iteration_s", "p99_iteration_s", "total_s", "tokens", "tokens_per_s",
              "speedup_vs_baseline", "oom_iterations", "metrics"});
    const nlohmann::json& iterations = pr.value("iterations");
    if (!iterations.is_array()) pr.fail("iterations", "expected an array, got " + json_type_name(iterations));
    if (iterations.size() != policy.plans.size())
      pr.fail("iterations", "holds " + std::to_string(iterations.size()) + " iterations, this run plans " +
                                std::to_string(policy.plans.size()) + " (same --iterations?)");
    if (match->contains("interval")) skip(pr, {"interval"});
    pr.finish();
    std::vector<double> seconds(policy.plans.size(), 0.0);
    for (std::size_t i = 0; i < iterations.size(); ++i) {
      const std::string item = pr.path("iterations") + "[" + std::to_string(i) + "]";
      read_iteration(pr.child(iterations[i], item), policy.plans[i], policy.model_replay[i], i, seconds[i]);
    }
    p.seconds.push_back(std::move(seconds));
  }
  return p;
}

std::vector<std::vector<double>> predicted_peaks(const LivePlans& live) {
  std::vector<std::vector<double>> peaks;
  for (const LivePolicyPlans& policy : live.policies) {
    std::vector<double> per_iteration;
    for (const auto& outcome : policy.model_replay) per_iteration.push_back(largest(outcome.peak_bytes));
    peaks.push_back(std::move(per_iteration));
  }
  return peaks;
}

}  // namespace lcsim
