#include "studies/evaluation.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "base/errors.hpp"
#include "base/suggest.hpp"
#include "model/metrics.hpp"
#include "model/plan_demand.hpp"
#include "model/validator.hpp"
#include "program/estimate.hpp"
#include "studies/interrupts.hpp"

namespace lcsim {
namespace {

/// Structural issues only: an out-of-memory plan is a result to report, not a policy bug.
std::string structural_summary(const std::vector<PlanIssue>& issues) {
  std::string out;
  for (const auto& issue : issues) out += (out.empty() ? "" : "; ") + issue.message;
  return out;
}

[[noreturn]] void invalid_plan(const PolicySpec& spec, std::size_t index, const std::string& summary) {
  throw PlanningError("policy " + spec.label + " produced an invalid plan for iteration " + std::to_string(index) +
                      ": " + summary);
}

/// Re-batching policies: together the plans must hold every sequence of the window exactly once.
void check_window_cover(const PolicySpec& spec, const std::vector<GlobalBatch>& batches,
                        const std::vector<IterationPlan>& plans) {
  const std::vector<PlanIssue> issues = validate_window(plans, batches);
  if (issues.empty()) return;
  std::string message = "policy " + spec.label + " produced plans that do not cover the data window exactly: ";
  constexpr std::size_t kShown = 5;
  for (std::size_t i = 0; i < std::min(issues.size(), kShown); ++i) message += (i ? "; " : "") + issues[i].message;
  if (issues.size() > kShown) message += "; and " + std::to_string(issues.size() - kShown) + " more";
  throw PlanningError(message);
}

std::string known_labels(const Scenario& scenario) {
  std::string out;
  for (const auto& p : scenario.policies) out += (out.empty() ? "" : ", ") + p.label;
  return out;
}

}  // namespace

std::vector<const PolicySpec*> select_policies(const Scenario& scenario, const std::vector<std::string>& only_labels) {
  for (const auto& label : only_labels) {
    const bool known = std::any_of(scenario.policies.begin(), scenario.policies.end(),
                                   [&](const PolicySpec& p) { return p.label == label; });
    if (!known) {
      std::vector<std::string> labels;
      for (const auto& p : scenario.policies) labels.push_back(p.label);
      throw InputError("--policy " + label + ": " + scenario.file + " has no policy with that label" +
                       did_you_mean(label, labels) + " (labels: " + known_labels(scenario) + ")");
    }
  }
  std::vector<const PolicySpec*> selected;
  for (const auto& p : scenario.policies) {
    const bool wanted = only_labels.empty() || p.label == scenario.baseline ||
                        std::find(only_labels.begin(), only_labels.end(), p.label) != only_labels.end();
    if (wanted) selected.push_back(&p);
  }
  return selected;
}

PolicyPlans plan_policy(const LoadedScenario& loaded, const PolicySpec& spec) {
  const std::unique_ptr<Policy> policy = make_policy(spec);
  return plan_policy(loaded, spec, *policy);
}

PolicyPlans plan_policy(const LoadedScenario& loaded, const PolicySpec& spec, Policy& policy) {
  PolicyPlans out;
  out.spec = &spec;
  out.kind = policy.kind();
  const PlanningContext context = loaded.planning_context(&spec);
  const auto start = std::chrono::steady_clock::now();
  try {
    out.plans = policy.plan(context, loaded.batches);
  } catch (const PlanningError& e) {
    throw PlanningError("policy " + spec.label + ": " + e.what());
  }
  out.planning_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  if (out.plans.empty()) throw PlanningError("policy " + spec.label + " produced no plans");
  if (policy.keeps_global_batches()) {
    if (out.plans.size() != loaded.batches.size())
      throw PlanningError("policy " + spec.label + " keeps global batches but produced " +
                          std::to_string(out.plans.size()) + " plans for " + std::to_string(loaded.batches.size()) +
                          " batches");
    for (std::size_t i = 0; i < out.plans.size(); ++i) {
      const std::string summary =
          structural_summary(check_plan_structure(out.plans[i], loaded.batches[i], *loaded.cost));
      if (!summary.empty()) invalid_plan(spec, i, summary);
    }
  } else {
    check_window_cover(spec, loaded.batches, out.plans);
    for (std::size_t i = 0; i < out.plans.size(); ++i) {
      const std::string summary =
          structural_summary(check_plan_structure(out.plans[i], plan_sequences(out.plans[i]), *loaded.cost));
      if (!summary.empty()) invalid_plan(spec, i, summary);
    }
  }
  return out;
}

RunResults results_header(const LoadedScenario& loaded, std::string mode) {
  RunResults results;
  results.mode = std::move(mode);
  results.scenario = loaded.scenario.name;
  results.scenario_file = loaded.scenario.file;
  results.seed = loaded.scenario.seed;
  results.profile_label = loaded.profile.label();
  if (!loaded.scenario.training.attention.empty())
    results.profile_label += ", " + loaded.scenario.training.attention + " attention";
  results.calibrated = loaded.profile.provenance.calibrated;
  results.dataset_label = loaded.dataset_label;
  results.baseline = loaded.scenario.baseline;
  for (const PaperFigure& f : loaded.scenario.paper_figures)
    results.paper_figures.push_back({f.policy, f.speedup, f.source});
  return results;
}

IterationResult iteration_result(const IterationPlan& plan, int index, const IterationEstimate& timing, int world) {
  IterationResult it;
  it.index = index;
  it.label = plan.label;
  it.seconds = timing.seconds;
  it.tokens = plan.tokens();
  it.sequences = plan.sequence_count();
  for (const Replica& r : plan.replicas)
    for (const MicroBatch& mb : r.micro_batches)
      if (mb.cp_split == CpSplit::PerSequence && r.scheme.cp > 1) ++it.per_sequence_micro_batches;
  it.oom = timing.out_of_memory();
  it.peak_bytes =
      timing.peak_bytes.empty() ? 0.0 : *std::max_element(timing.peak_bytes.begin(), timing.peak_bytes.end());
  it.metrics = compute_metrics(plan, timing, world);
  it.busy_seconds = timing.busy_seconds;
  return it;
}

PolicyResult estimate_plans(const LoadedScenario& loaded, const PolicyPlans& planned) {
  const int world = loaded.scenario.cluster.world_size();
  PolicyResult result;
  result.label = planned.spec->label;
  result.kind = planned.kind;
  result.planning_ms = planned.planning_ms;
  program::Estimator estimator(*loaded.cost);
  for (std::size_t i = 0; i < planned.plans.size(); ++i) {
    const IterationPlan& plan = planned.plans[i];
    result.iterations.push_back(iteration_result(plan, static_cast<int>(i), estimator.estimate(plan), world));
    result.iterations.back().static_bytes = plan_static_bytes(plan, *loaded.cost);
  }
  summarize(result);
  return result;
}

RunResults evaluate_plans(const LoadedScenario& loaded, const std::vector<std::string>& only_labels,
                          const PolicyProgress& progress) {
  RunResults results = results_header(loaded, "plan");
  const std::vector<const PolicySpec*> selected = select_policies(loaded.scenario, only_labels);
  for (std::size_t i = 0; i < selected.size(); ++i) {
    check_host_signals();  // between policies: Ctrl-C reaches a host (Python) before the next one plans
    if (progress) progress(i, selected.size(), selected[i]->label);
    results.policies.push_back(estimate_plans(loaded, plan_policy(loaded, *selected[i])));
  }
  if (progress) progress(selected.size(), selected.size(), "");
  apply_baseline(results);
  return results;
}

namespace {

std::string gib_text(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return text;
}

/// The first OOM iteration of `policy`, or none.
const IterationResult* first_oom(const PolicyResult& policy) {
  const auto first = std::find_if(policy.iterations.begin(), policy.iterations.end(),
                                  [](const IterationResult& it) { return it.oom; });
  return first == policy.iterations.end() ? nullptr : &*first;
}

/// What does not fit in `it`: "peaks at ... per GPU of ... usable: ... memory (...)".
std::string oom_peak_text(const IterationResult& it, double capacity) {
  std::string text = "peaks at " + gib_text(it.peak_bytes) + " per GPU of " + gib_text(capacity) + " usable: ";
  if (it.static_bytes > capacity)
    return text + "optimizer memory (parameters, gradients and optimizer states alone take " +
           gib_text(it.static_bytes) + "; a higher ZeRO stage or more GPUs per replica shard them)";
  return text + "activation memory (" + gib_text(it.peak_bytes - it.static_bytes) + " of activations on " +
         gib_text(it.static_bytes) + " of parameters, gradients and optimizer states)";
}

/// What does not fit in the first OOM iteration of `policy`.
std::string policy_oom_warning(const PolicyResult& policy, double capacity) {
  std::string text = policy.label + " does not fit in GPU memory and cannot be the winner: OOM in " +
                     std::to_string(policy.oom_iterations) + " of " + std::to_string(policy.iterations.size()) +
                     " iterations";
  const IterationResult* first = first_oom(policy);
  if (first == nullptr) return text;
  return text + "; the first, iteration " + std::to_string(first->index) + ", " + oom_peak_text(*first, capacity);
}

}  // namespace

std::vector<std::string> out_of_memory_warnings(const RunResults& results, const LoadedScenario& loaded) {
  std::vector<std::string> warnings;
  const std::string everything = out_of_memory_warning(results, loaded);
  const double capacity = loaded.cost->capacity_bytes();
  if (!everything.empty()) {  // and by how much each policy's first iteration misses
    warnings.push_back(everything);
    for (const PolicyResult& policy : results.policies)
      if (const IterationResult* first = first_oom(policy))
        warnings.push_back(policy.label + ": iteration " + std::to_string(first->index) + " " +
                           oom_peak_text(*first, capacity));
    return warnings;
  }
  for (const PolicyResult& policy : results.policies)
    if (!policy.fits()) warnings.push_back(policy_oom_warning(policy, capacity));
  const std::string& reference = speedup_reference(results);
  if (reference != results.baseline)
    warnings.push_back("the baseline " + results.baseline + " does not fit in GPU memory: speedups are over " +
                       reference + ", the fastest policy that fits");
  return warnings;
}

std::string out_of_memory_warning(const RunResults& results, const LoadedScenario& loaded) {
  std::size_t iterations = 0;
  for (const auto& policy : results.policies) {
    for (const auto& it : policy.iterations)
      if (!it.oom) return "";
    iterations += policy.iterations.size();
  }
  if (iterations == 0) return "";
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  char usable[160];
  std::snprintf(usable, sizeof usable, "%.1f GiB per GPU (%s's %.1f GiB less the profile's memory.reserve_GiB %.1f)",
                loaded.cost->capacity_bytes() / kGiB, loaded.scenario.cluster.gpu.name.c_str(),
                loaded.scenario.cluster.gpu.memory_bytes / kGiB, loaded.profile.memory.reserve_bytes / kGiB);
  return "no iteration of any policy fits in GPU memory: all " + std::to_string(iterations) +
         " planned iterations are OOM with " + usable +
         "; the times describe plans that could not run (check the profile " + loaded.scenario.profile_path +
         ", the model and the layout of " + loaded.scenario.file + ")";
}

}  // namespace lcsim
