#pragma once
// How experiments run a scenario: one Runner for validate, tune, sweep and the Python package. A plan (the
// estimate) runs in this process, on threads; a SimGrid simulation runs in a child process, since SimGrid keeps one
// engine per process, and so does a plan whose policy needs a process of its own. Results come back as documents,
// never through files.
#include <cstddef>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "studies/sampled_worlds.hpp"

namespace lcsim {

/// Exit codes `lcsim` returns, and a failed run's status.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitPlanning = 3;

/// What `lcsim` says of an error and the status it ends with: "lcsim: error: ..." (bad input, a policy that cannot
/// plan) or "lcsim: internal error: ...", one line.
struct ErrorReport {
  int status = kExitInternal;
  std::string line;
};
ErrorReport report_error(const std::exception& error);

enum class RunMode { Plan, Simulate };

struct RunRequest {
  RunMode mode = RunMode::Plan;
  nlohmann::json scenario;            ///< the scenario document, its paths absolute
  std::string file;                   ///< the name it goes by in messages and in its results
  int samples = 1;                    ///< sampled worlds (`--samples`)
  std::vector<std::string> policies;  ///< labels to run (the baseline always runs); empty: every policy
  std::optional<int> iterations;      ///< overrides training.iterations
  bool draw_data = true;              ///< false (`--fixed-data`): sampled worlds keep the scenario's data
  int world_jobs = 1;                 ///< sampled worlds evaluated at once within the run (threads)
  std::string trace_file;             ///< simulate: the Chrome trace to write; empty: none
};

/// A run's end: its results document, or the error `lcsim plan|simulate` would have ended with.
struct RunOutcome {
  int status = kExitOk;            ///< kExitOk, kExitBadInput, kExitPlanning or kExitInternal
  std::string error;               ///< report_error's line when status is not kExitOk
  std::string warning;             ///< the warnings the command prints (plans out of memory), one a line; may be empty
  nlohmann::ordered_json results;  ///< lcsim-results/2 when status is kExitOk
  std::string table;               ///< the table the command prints for it
};

/// (runs done, runs in all), as runs end.
using RunsProgress = std::function<void(std::size_t done, std::size_t total)>;
/// (steps done, steps in all, what) within one run: policies planned, iterations simulated, sampled worlds.
using StepsProgress = std::function<void(std::size_t done, std::size_t total, const std::string& what)>;

class Runner {
 public:
  virtual ~Runner() = default;
  /// Runs every request, at most `jobs` at a time, and returns outcome i for request i: a run that fails is an
  /// outcome, not an exception. Throws Interrupted on SIGINT or SIGTERM (an InterruptScope records them), after
  /// stopping its children.
  virtual std::vector<RunOutcome> run(const std::vector<RunRequest>& requests, int jobs,
                                      const RunsProgress& progress) = 0;
};

/// The Runner: plans on up to `jobs` threads of this process; simulations, and plans whose policies need a process
/// of their own (its descriptor's needs_own_process), in up to `jobs` forked children, before the threads start.
class LocalRunner final : public Runner {
 public:
  /// `model_form`: the model-form term sampled worlds draw (the shipped one by default, as `lcsim plan`).
  explicit LocalRunner(ModelForm model_form = shipped_model_form());
  std::vector<RunOutcome> run(const std::vector<RunRequest>& requests, int jobs, const RunsProgress& progress) override;
  /// One run, its steps reported to `steps` as it goes. Bad input and a policy that cannot plan are its outcome;
  /// an exception `steps` raises comes through (and ends a child process).
  RunOutcome run_one(const RunRequest& request, const StepsProgress& steps);

 private:
  ModelForm model_form_;
};

/// What `lcsim plan|simulate --quiet` would have printed for the run: its warning line, its error line.
std::string run_log_text(const RunOutcome& outcome);

/// A failed outcome's message without report_error's "lcsim: error: " prefix.
std::string run_error_message(const RunOutcome& outcome);

/// The run of `request` in this process, whatever its mode (a child of LocalRunner runs this).
RunOutcome run_here(const RunRequest& request, const ModelForm& model_form, const StepsProgress& steps);

}  // namespace lcsim
