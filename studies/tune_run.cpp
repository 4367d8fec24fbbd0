#include "studies/tune_run.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <iomanip>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "base/errors.hpp"
#include "base/files.hpp"
#include "formats/results_io.hpp"
#include "studies/interrupts.hpp"
#include "studies/tune_candidate.hpp"

namespace lcsim {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using StageProgress = std::function<void(std::size_t, std::size_t, const std::string&)>;

/// The tuned policy's figures from a results file (lcsim-results/2).
void read_results(const Json& results, const std::string& label, bool simulated, TuneOutcome& o) {
  for (const auto& p : results.at("policies")) {
    if (p.at("name") != label) continue;
    const double tokens_per_s = p.at("tokens_per_s").get<double>();
    (simulated ? o.simulated_tokens_per_s : o.estimate_tokens_per_s) = tokens_per_s;
    (simulated ? o.simulated : o.estimated) = true;
    o.p99_iteration_s = p.at("p99_iteration_s").get<double>();
    o.oom_iterations = std::max(o.oom_iterations, p.at("oom_iterations").get<int>());
    for (const auto& it : p.at("iterations")) o.peak_gib = std::max(o.peak_gib, it.at("peak_GiB").get<double>());
    return;
  }
  o.failed = "no results for policy " + label;
}

/// What a candidate that fails in process is recorded as: the words its `lcsim plan` would have ended with.
std::string plan_failure(const std::exception& error) {
  const ErrorReport report = report_error(error);
  return "plan exited " + std::to_string(report.status) + ": " + report.line;
}

/// Estimates `order` (candidates of `space`) in this process, each on whichever of `jobs` threads is free, its
/// scenario named `file_of(index)` in messages. The prune threshold of each policy follows the accepted estimates
/// as they come (those already in `outcomes` included). Stops starting candidates on SIGINT or SIGTERM (then
/// throws Interrupted once the running ones end) or after `budget` seconds since `started`; returns whether the
/// budget stopped it.
bool estimate_in_threads(const TuneSpace& space, const std::vector<const TuneCandidate*>& order, int jobs,
                         CandidateBounds bounds, int keep, std::optional<double> budget,
                         std::chrono::steady_clock::time_point started, const std::function<std::string(int)>& file_of,
                         std::vector<TuneOutcome>& outcomes, const StageProgress& progress) {
  std::mutex mutex;  // guards everything below and `outcomes`
  std::map<std::string, std::vector<double>> accepted;
  for (const auto& c : space.candidates)
    if (const TuneOutcome& o = outcomes[static_cast<std::size_t>(c.index)]; o.accepted())
      accepted[c.policy].push_back(o.estimate_tokens_per_s);
  std::size_t next = 0, done = 0;
  bool budget_hit = false;
  const auto worker = [&] {
    for (;;) {
      const TuneCandidate* c = nullptr;
      {
        const std::lock_guard lock(mutex);
        if (interrupt_signal() != 0 || next == order.size() || budget_hit) return;
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        if (budget && elapsed > *budget) {
          budget_hit = true;
          return;
        }
        c = order[next++];
      }
      const auto threshold = [&] {
        const std::lock_guard lock(mutex);
        return prune_threshold(accepted[c->policy], keep);
      };
      TuneOutcome o = estimate_candidate(*c, file_of(c->index), bounds, threshold, plan_failure);
      const std::lock_guard lock(mutex);
      if (o.accepted()) accepted[c->policy].push_back(o.estimate_tokens_per_s);
      o.capacity_gib = outcomes[static_cast<std::size_t>(c->index)].capacity_gib;
      outcomes[static_cast<std::size_t>(c->index)] = std::move(o);
      if (progress) progress(++done, order.size(), "candidates estimated or pruned");
    }
  };
  {
    std::vector<std::jthread> helpers;
    for (int j = 1; j < jobs && static_cast<std::size_t>(j) < order.size(); ++j) helpers.emplace_back(worker);
    worker();
  }
  if (const int signal = interrupt_signal(); signal != 0) throw Interrupted(signal);
  return budget_hit;
}

double elapsed_s(Clock::time_point started) {
  return std::chrono::duration<double>(Clock::now() - started).count();
}

/// A candidate's run through the Runner: one world (the search compares nominal figures; an interval per
/// candidate would cost --samples times the search), its policy alone beside the baseline.
RunRequest candidate_request(const TuneCandidate& c, RunMode mode) {
  RunRequest request;
  request.mode = mode;
  request.scenario = c.scenario;
  request.file = tune_candidate_name(c.index, ".json");
  request.samples = 1;
  request.policies = {c.policy};
  return request;
}

/// Runs `candidates` in `mode` and records each one's figures or failure.
void run_candidates(const std::vector<const TuneCandidate*>& candidates, RunMode mode, Runner& runner, int jobs,
                    const std::string& what, const StageProgress& progress, std::size_t done_before, std::size_t total,
                    std::vector<TuneOutcome>& outcomes) {
  std::vector<RunRequest> requests;
  for (const auto* c : candidates) requests.push_back(candidate_request(*c, mode));
  const std::vector<RunOutcome> ran = runner.run(requests, jobs, [&](std::size_t done, std::size_t) {
    if (progress) progress(done_before + done, total, what);
  });
  const bool sim = mode == RunMode::Simulate;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    TuneOutcome& o = outcomes[static_cast<std::size_t>(candidates[i]->index)];
    if (ran[i].status != kExitOk) {
      o.failed =
          std::string(sim ? "simulate" : "plan") + " exited " + std::to_string(ran[i].status) + ": " + ran[i].error;
      continue;
    }
    read_results(Json(ran[i].results), candidates[i]->policy, sim, o);
  }
}

}  // namespace

std::string tune_candidate_name(int index, const char* suffix) {
  std::ostringstream name;
  name << "candidate-" << std::setw(5) << std::setfill('0') << index << suffix;
  return name.str();
}

TunePlan plan_tune(const TuneSettings& settings) {
  TunePlan plan;
  plan.settings = settings;
  plan.document = scenario_with_absolute_paths(settings.document ? *settings.document : parse_json_file(settings.file),
                                               settings.file);
  if (settings.iterations) plan.document["training"]["iterations"] = *settings.iterations;
  plan.base = load_and_prepare(plan.document, settings.file);
  const Scenario& scenario = plan.base.scenario;
  for (const auto& label : settings.policies) {
    bool known = false;
    for (const auto& p : scenario.policies) known = known || p.label == label;
    if (!known) throw InputError(settings.file + ": --policy: no policy labelled \"" + label + "\"");
  }
  for (const auto& p : scenario.policies)
    if (settings.policies.empty() ||
        std::find(settings.policies.begin(), settings.policies.end(), p.label) != settings.policies.end())
      plan.policies.push_back(p.label);
  plan.keep = exact_estimates(scenario.tune.simulate_top);
  plan.digest =
      scenario_digest(Json{{"scenario", plan.document}, {"policies", settings.policies}, {"prune", settings.prune}});
  plan.space = expand_tune_space(scenario, plan.document, scenario.tune, settings.policies);
  return plan;
}

TuneReport run_tune(const TunePlan& plan, Runner& runner, const StageProgress& progress) {
  const auto started = Clock::now();
  const TuneSettings& settings = plan.settings;
  const TuneSpace& space = plan.space;
  const Scenario& scenario = plan.base.scenario;
  const int jobs = settings.jobs;
  TuneReport report;
  std::vector<TuneOutcome>& outcomes = report.outcomes;
  outcomes.resize(space.candidates.size());
  const double capacity_gib = plan.base.cost->capacity_bytes() / (1024.0 * 1024 * 1024);
  for (auto& o : outcomes) o.capacity_gib = capacity_gib;

  // Estimate every candidate (of this slice; none when merging slices). A policy that plans only in its own
  // process runs through the Runner, in chunks so that the budget can stop between them; the others run on threads
  // here, the cheapest first (the most replicas: a replica's program grows with the GPUs and micro-batches it
  // holds), so that the incumbents that prune the costly ones come early.
  std::vector<const TuneCandidate*>& mine = report.estimated;
  if (!settings.merge.empty()) {
    std::vector<std::pair<std::string, TuneSlice>> slices;
    for (const auto& file : settings.merge)
      slices.emplace_back(file, tune_slice_from_json(parse_json_file(file), file));
    outcomes = merge_tune_slices(slices, plan.digest, space.candidates.size());
    for (auto& o : outcomes) o.capacity_gib = capacity_gib;
  } else {
    for (const auto& c : space.candidates)
      if (!settings.shard || in_sweep_shard(static_cast<std::size_t>(c.index), *settings.shard)) mine.push_back(&c);
  }
  std::vector<const TuneCandidate*> own_process, in_process;
  for (const auto* c : mine) (c->own_process ? own_process : in_process).push_back(c);
  const std::size_t chunk = static_cast<std::size_t>(jobs) * 8;
  for (std::size_t first = 0; first < own_process.size(); first += chunk) {
    if (settings.budget_s && elapsed_s(started) > *settings.budget_s) {
      report.budget_hit = true;
      break;
    }
    const std::size_t last = std::min(own_process.size(), first + chunk);
    const std::vector<const TuneCandidate*> part(own_process.begin() + static_cast<std::ptrdiff_t>(first),
                                                 own_process.begin() + static_cast<std::ptrdiff_t>(last));
    run_candidates(part, RunMode::Plan, runner, jobs, "candidates estimated (own processes)", progress, first,
                   own_process.size(), outcomes);
  }
  std::stable_sort(in_process.begin(), in_process.end(),
                   [](const TuneCandidate* a, const TuneCandidate* b) { return a->layout.dp > b->layout.dp; });
  // A slice cannot prune, the incumbents being spread over the slices: it bounds every candidate for the merge.
  const CandidateBounds bounds = !settings.prune  ? CandidateBounds::None
                                 : settings.shard ? CandidateBounds::All
                                                  : CandidateBounds::Prune;
  if (!report.budget_hit)
    report.budget_hit = estimate_in_threads(
        space, in_process, jobs, bounds, plan.keep, settings.budget_s, started,
        [](int index) { return tune_candidate_name(index, ".json"); }, outcomes, progress);
  if (settings.shard) {
    report.seconds = elapsed_s(started);
    return report;
  }

  if (settings.prune) prune_candidates(space, outcomes, plan.keep);
  // Simulate the most promising candidates of each policy.
  std::vector<const TuneCandidate*> to_simulate;
  for (const auto& label : plan.policies)
    for (int i : most_promising(space.candidates, outcomes, label, scenario.tune.simulate_top))
      to_simulate.push_back(&space.candidates[static_cast<std::size_t>(i)]);
  run_candidates(to_simulate, RunMode::Simulate, runner, jobs, "candidates simulated", progress, 0, to_simulate.size(),
                 outcomes);
  report.verdict = judge_tune(space, outcomes, plan.policies);
  report.seconds = elapsed_s(started);
  return report;
}

nlohmann::ordered_json tune_report_to_json(const TunePlan& plan, const TuneReport& report) {
  return tune_to_json(plan.base.scenario, plan.base.profile.label(), plan.base.dataset_label, plan.space,
                      report.outcomes, report.verdict,
                      plan.settings.prune ? std::optional<int>(plan.keep) : std::nullopt);
}

nlohmann::ordered_json tune_report_slice_to_json(const TunePlan& plan, const TuneReport& report) {
  TuneSlice slice{plan.digest,
                  plan.settings.shard->index,
                  plan.settings.shard->count,
                  static_cast<int>(plan.space.candidates.size()),
                  {}};
  for (const auto* c : report.estimated)
    slice.estimates.emplace_back(c->index, report.outcomes[static_cast<std::size_t>(c->index)]);
  return tune_slice_to_json(slice);
}

std::string tuned_scenario_text(const TunePlan& plan, const TuneReport& report, const std::string& file) {
  const TuneSettings& s = plan.settings;
  const Json original = scenario_with_absolute_paths(s.document ? *s.document : parse_json_file(s.file), s.file);
  const Json doc = tuned_scenario(original, plan.base.scenario, plan.space, report.verdict);
  scenario_from_json(doc, file);  // lcsim can read what it writes
  return scenario_with_paths_relative_to(doc, file).dump(2) + "\n";
}

}  // namespace lcsim
