#pragma once
// The predicted side of `lcsim-gpu live`. lcsim-gpu links no SimGrid, so the simulator's prediction comes as the
// results file `lcsim simulate --json` wrote for the same scenario; it is checked against this run's plans (same
// scenario, seed, policies, iterations, tokens, sequences and predicted peak memory -- the last catches another
// profile or --layers) and refused when anything differs. Without it, the prediction is the program replay with
// the cost model's times (program/replay.hpp): the simulator without contention, and every report says so.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "live/live_plan.hpp"

namespace lcsim {

struct Prediction {
  enum class Source { Simulation, ProgramReplay };
  Source source = Source::ProgramReplay;
  std::string label;                         ///< for tables and files: where the predicted times come from
  std::vector<std::vector<double>> seconds;  ///< [policy][iteration], parallel to LivePlans::policies
};

/// The program replay of every plan with the cost model's times.
Prediction predict_by_replay(const LivePlans& live);

/// The simulator's times from `lcsim simulate --json` results; InputError naming `file` and the JSON path when the
/// file is not such results or does not match `live`.
Prediction predict_from_results(const LivePlans& live, const std::string& file);
Prediction predict_from_results(const LivePlans& live, const nlohmann::json& results, const std::string& file);

/// The largest per-GPU peak of each iteration as the plan predicts it (the replay's; the simulator's is the same).
std::vector<std::vector<double>> predicted_peaks(const LivePlans& live);

}  // namespace lcsim
