#pragma once
// `lcsim simulate` without the command line: every selected policy of a scenario plans the same data window
// (the plans `lcsim plan` validates and estimates), then all plans run in one SimGrid simulation, policy after
// policy. Results use the schema of `lcsim plan` (formats/results_io.hpp) with mode "simulate", plus per-GPU idle
// time; the table adds what only a simulation knows (busy time of the slowest and fastest GPU) next to the
// estimate of the same plans (their programs without contention).
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/executor.hpp"
#include "formats/scenario_loader.hpp"
#include "model/results.hpp"
#include "studies/sampled_worlds.hpp"

namespace lcsim::sim {

struct SimulateSettings {
  std::vector<std::string> policies;  ///< labels to simulate (the baseline is always added); empty: all
  program::ProgramOptions program;
  std::string trace_file;             ///< Chrome trace JSON to write; empty: none
  bool exclusive_closed_form = true;  ///< SimulationOptions::exclusive_closed_form
  /// Called after each simulated iteration with (iterations done, iterations in total, policy label).
  std::function<void(std::size_t, std::size_t, const std::string&)> progress;
  /// Called as the sampled worlds are estimated (attach_sampled_worlds).
  WorldProgress world_progress;
  bool draw_data = true;      ///< false (--fixed-data): the sampled worlds keep the scenario's data
  int world_jobs = 1;         ///< sampled worlds estimated at once (threads)
  bool record_spans = false;  ///< keep every GPU's spans in the outcomes on_outcome sees (a report's timeline)
  /// Called with (policy index, iteration index, outcome) after each simulated iteration, before the next runs.
  std::function<void(std::size_t, std::size_t, const program::IterationOutcome&)> on_outcome;
};

/// What the simulation adds to a policy's results, beyond PolicyResult.
struct SimulatedPolicyExtras {
  double estimate_mean_s = 0;                     ///< the same plans without contention, mean iteration seconds
  double busy_max_mean_s = 0;                     ///< busy time of the busiest GPU, mean over iterations
  double busy_min_mean_s = 0;                     ///< ... of the least busy GPU (0 when a plan leaves a GPU unused)
  double wall_s = 0;                              ///< wall time simulating its iterations (not in files)
  double cpu_s = 0;                               ///< CPU time of the same (not in files)
  double build_cpu_s = 0;                         ///< of cpu_s, building the iterations' programs
  std::vector<std::vector<double>> idle_seconds;  ///< per iteration, per GPU: iteration time - busy time
};

struct SimulationReport {
  RunResults results;
  std::vector<SimulatedPolicyExtras> extras;  ///< parallel to results.policies
  int layers_per_block = 0;
  int world_size = 0;
};

/// The most GPUs `lcsim simulate` takes: scenarios/scale/sim-65536gpu.json runs within 2 GiB on a 2-core machine
/// (docs/simulation.md, "Scale"); the platform and its routes grow faster than the GPUs, so 131,072 nodes would
/// not finish. `lcsim plan` estimates larger clusters.
inline constexpr int kMaxSimulatedGpus = 65536;

/// Plans, validates (plan_policy) and simulates. Throws like plan_policy, InputError when the cluster has more than
/// kMaxSimulatedGpus GPUs (before anything is planned) or when the trace file cannot be written.
SimulationReport simulate_scenario(const LoadedScenario& loaded, const SimulateSettings& settings);

/// The results JSON of `lcsim plan`'s schema, mode "simulate", with "idle_s" (per GPU) after each iteration's
/// "busy_s".
nlohmann::ordered_json simulation_to_json(const SimulationReport& report);
void write_simulation_json(const SimulationReport& report, const std::string& file);
/// Header lines and one row per policy: mean/p50/p99 iteration seconds, tokens/s, speedup over the baseline,
/// busiest and least busy GPU's busy seconds, OOM iterations, the estimate and the wall time. `max_columns` above
/// 0: lines of at most that many columns, leaving out the wall and CPU times, then the estimate, then the busy
/// times, then the interval of the iteration time as needed; 0 prints every column.
void print_simulation_table(const SimulationReport& report, std::ostream& out, std::size_t max_columns = 0);

/// The intervals of a simulation (`--samples`): world 0 is the simulation; worlds 1..samples-1 are estimated and
/// scaled to it (transfer_world: t_sim(w) = t_sim(0) t_est(w) / t_est(0)), since simulating every world at
/// scale would cost samples times the simulation.
void attach_sampled_worlds(SimulationReport& report, const LoadedScenario& loaded, const SimulateSettings& settings,
                           int samples, const ModelForm& model_form);

}  // namespace lcsim::sim
