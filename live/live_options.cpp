#include "live/live_options.hpp"

#include <stdexcept>

#include "base/errors.hpp"
#include "base/files.hpp"

namespace lcsim {
namespace {

int parse_count(const std::string& option, const std::string& text, int minimum) {
  int value = 0;
  try {
    std::size_t used = 0;
    value = std::stoi(text, &used);
    if (used != text.size()) throw std::invalid_argument(text);
  } catch (const std::logic_error&) {  // std::invalid_argument, std::out_of_range
    throw InputError("live: " + option + ": not a valid integer: '" + text + "'");
  }
  if (value < minimum)
    throw InputError("live: " + option + ": must be at least " + std::to_string(minimum) + ", got " + text);
  return value;
}

LiveMode parse_mode(const std::string& text) {
  if (text == "auto") return LiveMode::Auto;
  if (text == "rank-serial") return LiveMode::RankSerial;
  if (text == "parallel") return LiveMode::Parallel;
  throw InputError("live: --mode: expected auto, rank-serial or parallel, got '" + text + "'");
}

}  // namespace

const char* to_string(LiveMode mode) {
  switch (mode) {
    case LiveMode::Auto:
      return "auto";
    case LiveMode::RankSerial:
      return "rank-serial";
    case LiveMode::Parallel:
      return "parallel";
  }
  return "unknown";
}

LiveOptions parse_live_options(const std::vector<std::string>& args) {
  LiveOptions o;
  std::vector<std::string> files;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw InputError("live: missing value for " + arg);
      return args[++i];
    };
    if (arg == "--policy") {
      o.policies.push_back(value());
    } else if (arg == "--iterations") {
      o.iterations = parse_count(arg, value(), 1);
    } else if (arg == "--layers") {
      o.layers = parse_count(arg, value(), 1);
    } else if (arg == "--predicted") {
      o.predicted_file = value();
    } else if (arg == "--mode") {
      o.mode = parse_mode(value());
    } else if (arg == "--warmup") {
      o.warmup = parse_count(arg, value(), 0);
    } else if (arg == "--repetitions") {
      o.repetitions = parse_count(arg, value(), 1);
    } else if (arg == "--trace") {
      o.trace_file = value();
    } else if (arg == "--json") {
      o.json_file = value();
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw InputError("live: unknown option '" + arg + "'");
    } else {
      files.push_back(arg);
    }
  }
  if (o.mode == LiveMode::Parallel && o.warmup == 0)
    throw InputError(
        "live: --warmup 0 with --mode parallel: the first iteration sets up NCCL's connections and "
        "buffers, so at least one untimed iteration is needed");
  if (files.size() != 1)
    throw InputError(files.empty() ? std::string("live: missing SCENARIO file")
                                   : "live: expected one SCENARIO file, got " + std::to_string(files.size()));
  o.scenario = files.front();
  return o;
}

void check_live_outputs(const LiveOptions& options, const std::vector<std::string>& scenario_files) {
  OutputGuard guard;
  guard.add_inputs(scenario_files);
  guard.add_input(options.predicted_file);
  if (!options.json_file.empty()) guard.add_output("--json", options.json_file);
  if (!options.trace_file.empty()) guard.add_output("--trace", options.trace_file);
  guard.check();
}

const char* live_usage() {
  return "  live SCENARIO [--policy LABEL]... [--iterations N] [--layers N] [--predicted SIM.json]\n"
         "       [--mode auto|rank-serial|parallel] [--warmup N] [--repetitions N] [--trace FILE] [--json FILE]\n"
         "      Plans the scenario's policies with the same code as `lcsim plan` and executes every GPU's share of\n"
         "      each plan on real GPUs with the layer proxy (forward + backward of each micro-batch's sequences, LM\n"
         "      head, optimizer step). parallel (a GPU per GPU of the scenario's cluster): one thread per GPU, NCCL\n"
         "      collectives per CP, TP and gradient group, pipeline send/recv. rank-serial (fewer GPUs): each GPU's\n"
         "      compute runs in turn on GPU 0 and the iteration is composed with the profile's collective times.\n"
         "      Prints predicted vs measured time per iteration (error, MAPE) and the speedups between policies.\n"
         "      --predicted: the results of `lcsim simulate --json` on the same scenario (and --layers); without it\n"
         "      the prediction is the same work list replayed with the cost model's times, without contention.\n"
         "      --layers N: the model with N layers (prediction and measurement alike), for GPUs that cannot hold\n"
         "      it whole. --warmup, --repetitions: untimed and timed runs of each distinct compute (rank-serial) or\n"
         "      of each iteration (parallel), median kept (default 2 and 5). --trace: Chrome trace with the\n"
         "      simulator's track layout; --json: results (schema lcsim-results/2, mode live).\n";
}

}  // namespace lcsim
