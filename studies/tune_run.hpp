#pragma once
// `lcsim tune` as a function: every candidate of the search space estimated in this process on threads, unless
// its bounds already lose; the most promising of each policy simulated through a Runner; plans out of memory never
// accepted. A candidate's result depends on nothing else and pruning is decided once all estimates are in, so the
// number of jobs changes no result. A slice (`--shard K/N`) estimates part of the candidates for a later merge.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/scenario_loader.hpp"
#include "studies/runner.hpp"
#include "studies/sweep_shard.hpp"
#include "studies/tune.hpp"

namespace lcsim {

struct TuneSettings {
  std::string file;                        ///< the scenario file (or the name `document` goes by)
  std::optional<nlohmann::json> document;  ///< the scenario itself, read from `file` when absent
  std::vector<std::string> policies;       ///< labels to tune; empty: every policy
  int jobs = 1;                            ///< estimates on threads, simulations in child processes
  bool prune = true;                       ///< false: estimate every candidate (no bounds)
  std::optional<int> iterations;           ///< overrides training.iterations
  std::optional<double> budget_s;          ///< stop starting estimates after this many seconds
  std::optional<SweepShard> shard;         ///< estimate only this slice of the candidates
  std::vector<std::string> merge;          ///< slice files whose estimates replace running them
};

/// What the search is, known before anything runs.
struct TunePlan {
  TuneSettings settings;
  nlohmann::json document;  ///< the scenario as run (paths absolute, iterations applied)
  LoadedScenario base;
  std::vector<std::string> policies;  ///< the labels tuned, in scenario order
  TuneSpace space;
  int keep = 0;        ///< estimates kept exact per policy (exact_estimates)
  std::string digest;  ///< what makes two runs the same search (a slice must match it to merge)
};

struct TuneReport {
  std::vector<TuneOutcome> outcomes;            ///< parallel to plan.space.candidates
  std::vector<const TuneCandidate*> estimated;  ///< this slice's candidates (a slice), in candidate order
  TuneVerdict verdict;                          ///< empty for a slice
  double seconds = 0;
  bool budget_hit = false;
};

/// Loads the scenario and expands the search space. InputError for a bad scenario or an unknown policy label.
TunePlan plan_tune(const TuneSettings& settings);
/// A candidate's file name in a work folder ("candidate-00042" + suffix); it also names the candidate in messages.
std::string tune_candidate_name(int index, const char* suffix);
/// Runs the search (or its slice). `progress` gets (done, total, what) per stage. Throws Interrupted.
TuneReport run_tune(const TunePlan& plan, Runner& runner,
                    const std::function<void(std::size_t, std::size_t, const std::string&)>& progress);
/// The lcsim-tune/1 document.
nlohmann::ordered_json tune_report_to_json(const TunePlan& plan, const TuneReport& report);
/// The slice file of a sharded run.
nlohmann::ordered_json tune_report_slice_to_json(const TunePlan& plan, const TuneReport& report);
/// The scenario with each tuned policy at its best, its paths relative to `file` (where it is written); InputError
/// when the verdict is not one scenario.
std::string tuned_scenario_text(const TunePlan& plan, const TuneReport& report, const std::string& file);

}  // namespace lcsim
