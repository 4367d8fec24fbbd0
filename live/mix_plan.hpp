#pragma once
// `lcsim-gpu bench-mix` (host logic, unit-tested without a GPU): micro-batches shaped as Skrull's DACP builds them
// -- k whole short sequences beside one long sequence sharded over the scenario's CP group -- run as the layer
// proxy of the scenario's model, each beside the cost model's price for the same shares. Every mix is also run as
// its two parts alone, so a measurement says both how far the prediction is off and whether the mix costs more
// than its parts (docs/measurements/, docs/validation.md "The over-predicted Skrull gains").
//
//   lcsim-gpu bench-mix SCENARIO [--long L,L,...] [--short S,S,...] [--shorts K,K,...] [--warmup N]
//                       [--repetitions N] [--json FILE]
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/scenario_loader.hpp"
#include "live/live_work.hpp"

namespace lcsim {

struct MixBenchOptions {
  std::string scenario;
  std::vector<int> long_tokens{2048, 8192, 32768};  ///< the sharded sequence's full length
  std::vector<int> short_tokens{64, 256, 1024};     ///< each whole short sequence's length
  std::vector<int> shorts{1, 4, 16, 64};            ///< k: how many short sequences
  int warmup = 2;
  int repetitions = 5;
  std::string json_file;
};

/// Parses the arguments after `bench-mix`. InputError naming the option for anything wrong.
MixBenchOptions parse_mix_options(const std::vector<std::string>& args);
const char* mix_usage();
/// The output guard: --json may not be one of `inputs` (the scenario, its profile and trace). InputError.
void check_mix_outputs(const MixBenchOptions& options, const std::vector<std::string>& inputs);

/// One micro-batch of the sweep. role: "mix" (k shorts + the sharded long one, one job), "local" (the k shorts
/// alone), "sharded" (the long one alone).
struct MixPoint {
  std::string role;
  int short_tokens = 0;
  int shorts = 0;
  int long_tokens = 0;
  DeviceJob job;           ///< the scenario model's layers, no LM head, no static block
  double predicted_s = 0;  ///< CostModel::compute_seconds of the same shares and layers
};

struct MixPlan {
  LoadedScenario loaded;
  int cp = 1;
  std::vector<MixPoint> points;  ///< for each long length: the sharded one alone, then per (short, k) local and mix
};

/// Loads the scenario and builds the points. InputError when its CP degree is 1 (nothing is sharded), a long
/// length is shorter than the CP degree, or a list is empty.
MixPlan plan_mix_bench(const MixBenchOptions& options);
MixPlan plan_mix_bench(LoadedScenario loaded, const MixBenchOptions& options);

/// What one point measured (medians; NaN when it ran out of memory).
struct MixMeasurement {
  double whole_s = 0;
  double forward_s = 0;
  double backward_s = 0;
  bool oom = false;
};

/// Per point: predicted, measured, error; for a mix, also its parts' measured sum and the mix's excess over it.
void print_mix_report(const MixPlan& sweep, const std::vector<MixMeasurement>& measured, const std::string& device,
                      std::ostream& out);
/// Schema "lcsim-mix-sweep/1": scenario, profile label, device, cp, and the points with both times.
nlohmann::ordered_json mix_results_json(const MixPlan& sweep, const std::vector<MixMeasurement>& measured,
                                        const std::string& device);

}  // namespace lcsim
