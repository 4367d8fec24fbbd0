#pragma once
// The command line of `lcsim-gpu live` (host logic, unit-tested without a GPU):
//   lcsim-gpu live SCENARIO [--policy LABEL]... [--iterations N] [--layers N] [--predicted SIM.json]
//                  [--mode auto|rank-serial|parallel] [--warmup N] [--repetitions N] [--trace FILE] [--json FILE]
#include <optional>
#include <string>
#include <vector>

namespace lcsim {

enum class LiveMode {
  Auto,        ///< parallel when the node has a GPU for every GPU of the scenario's cluster, else rank-serial
  RankSerial,  ///< every GPU's compute in turn on one GPU; collectives from the profile
  Parallel,    ///< one thread per GPU, real NCCL collectives
};
const char* to_string(LiveMode mode);

struct LiveOptions {
  std::string scenario;
  std::vector<std::string> policies;  ///< labels (the baseline is always added); empty: all
  std::optional<int> iterations;
  std::optional<int> layers;   ///< scale the model down to this many layers
  std::string predicted_file;  ///< `lcsim simulate --json` results of the same scenario; empty: program replay
  LiveMode mode = LiveMode::Auto;
  int warmup = 2;       ///< untimed runs before the timed ones (per distinct compute, or per iteration in parallel)
  int repetitions = 5;  ///< timed runs; the median counts
  std::string trace_file;
  std::string json_file;
};

/// Parses the arguments after `live`. Throws InputError naming the option for anything wrong (unknown option,
/// missing value, a number that is not one, a count out of range, no or several SCENARIO files).
LiveOptions parse_live_options(const std::vector<std::string>& args);

/// The output guard of `lcsim-gpu live`: --json and --trace may be neither one of `scenario_files` (the scenario,
/// its profile and trace), nor --predicted, nor each other. InputError naming the option.
void check_live_outputs(const LiveOptions& options, const std::vector<std::string>& scenario_files);

/// The help text of `lcsim-gpu live`.
const char* live_usage();

}  // namespace lcsim
