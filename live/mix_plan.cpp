#include "live/mix_plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "base/errors.hpp"
#include "base/files.hpp"
#include "formats/results_io.hpp"

namespace lcsim {
namespace {

using Json = nlohmann::ordered_json;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

int parse_int(const std::string& option, const std::string& text, const std::string& whole) {
  try {
    std::size_t used = 0;
    const int value = std::stoi(text, &used);
    if (used == text.size()) return value;
  } catch (const std::logic_error&) {  // std::invalid_argument, std::out_of_range
  }
  throw InputError("bench-mix: " + option + ": not an integer: '" + whole + "'");
}

std::vector<int> parse_lengths(const std::string& option, const std::string& text) {
  std::vector<int> values;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    const int value = parse_int(option, item, text);
    if (value < 1) throw InputError("bench-mix: " + option + ": every value must be at least 1, got " + item);
    values.push_back(value);
    start = comma + 1;
  }
  return values;
}

int parse_count(const std::string& option, const std::string& text, int minimum) {
  const int value = parse_int(option, text, text);
  if (value < minimum)
    throw InputError("bench-mix: " + option + ": must be at least " + std::to_string(minimum) + ", got " + text);
  return value;
}

std::string format(const char* spec, double value) {
  char text[64];
  std::snprintf(text, sizeof text, spec, value);
  return std::isfinite(value) ? std::string(text) : std::string("-");
}

}  // namespace

const char* mix_usage() {
  return "  bench-mix SCENARIO [--long L,L,...] [--short S,S,...] [--shorts K,K,...] [--warmup N] [--repetitions N]\n"
         "            [--json FILE]\n"
         "      Skrull-shaped micro-batches on the scenario's model: K whole sequences of S tokens beside one of L\n"
         "      tokens sharded over the scenario's CP group (defaults 2048,8192,32768 / 64,256,1024 / 1,4,16,64), "
         "each\n"
         "      also run as its two parts alone, measured beside the cost model's prediction.\n";
}

MixBenchOptions parse_mix_options(const std::vector<std::string>& args) {
  MixBenchOptions o;
  std::vector<std::string> files;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw InputError("bench-mix: missing value for " + arg);
      return args[++i];
    };
    if (arg == "--long") {
      o.long_tokens = parse_lengths(arg, value());
    } else if (arg == "--short") {
      o.short_tokens = parse_lengths(arg, value());
    } else if (arg == "--shorts") {
      o.shorts = parse_lengths(arg, value());
    } else if (arg == "--warmup") {
      o.warmup = parse_count(arg, value(), 0);
    } else if (arg == "--repetitions") {
      o.repetitions = parse_count(arg, value(), 1);
    } else if (arg == "--json") {
      o.json_file = value();
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw InputError("bench-mix: unknown option '" + arg + "'");
    } else {
      files.push_back(arg);
    }
  }
  if (files.size() != 1) throw InputError("bench-mix: expected one SCENARIO file, got " + std::to_string(files.size()));
  o.scenario = files.front();
  return o;
}

void check_mix_outputs(const MixBenchOptions& options, const std::vector<std::string>& inputs) {
  if (!options.json_file.empty()) check_output_files({{"--json", options.json_file}}, inputs);
}

MixPlan plan_mix_bench(const MixBenchOptions& options) {
  return plan_mix_bench(load_and_prepare(options.scenario), options);
}

MixPlan plan_mix_bench(LoadedScenario loaded, const MixBenchOptions& options) {
  MixPlan sweep;
  sweep.loaded = std::move(loaded);
  const Scenario& s = sweep.loaded.scenario;
  sweep.cp = s.layout.cp;
  if (sweep.cp < 2) throw InputError(s.file + ": parallel.cp: bench-mix shards the long sequence, so cp must be >= 2");
  if (options.long_tokens.empty() || options.short_tokens.empty() || options.shorts.empty())
    throw InputError("bench-mix: --long, --short and --shorts must each name at least one value");
  const CostModel& cost = *sweep.loaded.cost;
  ParallelScheme scheme;
  scheme.cp = sweep.cp;
  scheme.recompute = s.training.recompute;
  const int layers = s.model.layers;

  const auto point = [&](std::string role, int short_tokens, int k, int long_tokens) {
    program::ComputeWork work;
    for (int i = 0; i < k; ++i) {
      work.shares.push_back({short_tokens, 1});
      work.sequence_ids.push_back(i);
    }
    if (long_tokens > 0) {
      work.shares.push_back({long_tokens, sweep.cp});
      work.sequence_ids.push_back(k);
    }
    work.layers = layers;
    work.recompute = scheme.recompute;
    MixPoint p;
    p.role = std::move(role);
    p.short_tokens = short_tokens;
    p.shorts = k;
    p.long_tokens = long_tokens;
    p.job.shape = proxy_shape(work, s.model);
    p.job.timed = true;
    p.predicted_s = cost.compute_seconds(work.shares, scheme, LayerSpan(layers), false);
    sweep.points.push_back(std::move(p));
  };
  for (int long_tokens : options.long_tokens) {
    if (long_tokens < sweep.cp)
      throw InputError("bench-mix: --long: " + std::to_string(long_tokens) + " tokens cannot be sharded " +
                       std::to_string(sweep.cp) + " ways");
    point("sharded", 0, 0, long_tokens);
    for (int short_tokens : options.short_tokens)
      for (int k : options.shorts) {
        point("local", short_tokens, k, 0);
        point("mix", short_tokens, k, long_tokens);
      }
  }
  return sweep;
}

namespace {

/// The measured sum of a mix's parts (the sharded point of its length and the local point of its shorts), or NaN.
double parts_sum(const MixPlan& sweep, const std::vector<MixMeasurement>& measured, const MixPoint& mix) {
  double sharded = kNaN, local = kNaN;
  for (std::size_t i = 0; i < sweep.points.size(); ++i) {
    const MixPoint& p = sweep.points[i];
    if (p.role == "sharded" && p.long_tokens == mix.long_tokens) sharded = measured[i].whole_s;
    if (p.role == "local" && p.short_tokens == mix.short_tokens && p.shorts == mix.shorts) local = measured[i].whole_s;
  }
  return sharded + local;
}

}  // namespace

void print_mix_report(const MixPlan& sweep, const std::vector<MixMeasurement>& measured, const std::string& device,
                      std::ostream& out) {
  const Scenario& s = sweep.loaded.scenario;
  out << "scenario   " << s.name << " (" << s.file << ")\n"
      << "model      " << s.model.name << ", " << s.model.layers << " layers, CP " << sweep.cp << ", recompute "
      << to_string(s.training.recompute) << '\n'
      << "profile    " << sweep.loaded.profile.label() << '\n'
      << "device     " << device << '\n';
  std::vector<std::vector<std::string>> rows{
      {"role", "long", "short x k", "rows", "predicted ms", "measured ms", "error", "parts ms", "mix / parts"}};
  for (std::size_t i = 0; i < sweep.points.size(); ++i) {
    const MixPoint& p = sweep.points[i];
    const MixMeasurement& m = measured.at(i);
    const double parts = p.role == "mix" ? parts_sum(sweep, measured, p) : kNaN;
    rows.push_back({p.role, p.long_tokens ? std::to_string(p.long_tokens) : "-",
                    p.shorts ? std::to_string(p.short_tokens) + " x " + std::to_string(p.shorts) : "-",
                    std::to_string(p.job.shape.rows()), format("%.3f", p.predicted_s * 1e3),
                    format("%.3f", m.whole_s * 1e3), format("%+.1f%%", (p.predicted_s / m.whole_s - 1) * 100),
                    format("%.3f", parts * 1e3), format("%.3f", m.whole_s / parts)});
  }
  print_aligned_rows(rows, out);
}

Json mix_results_json(const MixPlan& sweep, const std::vector<MixMeasurement>& measured, const std::string& device) {
  const Scenario& s = sweep.loaded.scenario;
  Json points = Json::array();
  for (std::size_t i = 0; i < sweep.points.size(); ++i) {
    const MixPoint& p = sweep.points[i];
    const MixMeasurement& m = measured.at(i);
    points.push_back(Json{{"role", p.role},
                          {"long_tokens", p.long_tokens},
                          {"short_tokens", p.short_tokens},
                          {"shorts", p.shorts},
                          {"rows", p.job.shape.rows()},
                          {"sharded_heads", p.job.shape.sharded_heads},
                          {"predicted_s", results_number(p.predicted_s)},
                          {"measured_s", Json{{"whole", results_number(m.whole_s)},
                                              {"forward", results_number(m.forward_s)},
                                              {"backward", results_number(m.backward_s)}}},
                          {"oom", m.oom}});
  }
  return Json{{"schema", "lcsim-mix-sweep/1"},
              {"scenario", s.name},
              {"scenario_file", s.file},
              {"model", s.model.name},
              {"layers", s.model.layers},
              {"cp", sweep.cp},
              {"recompute", std::string(to_string(s.training.recompute))},
              {"profile", sweep.loaded.profile.label()},
              {"device", device},
              {"points", std::move(points)}};
}

}  // namespace lcsim
