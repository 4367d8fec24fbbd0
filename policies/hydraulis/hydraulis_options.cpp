// make_hydraulis_policy: the strict reading of the policy's options (documented in hydraulis_policy.hpp).
#include "base/errors.hpp"
#include "policies/hydraulis/hydraulis_policy.hpp"

namespace lcsim::hydraulis {
namespace {

constexpr std::int64_t kMaxCount = 1 << 20;

std::vector<std::vector<SchemeCount>> read_strategies(JsonObjectReader& reader) {
  const nlohmann::json& list = reader.value("strategies");
  if (!list.is_array() || list.empty()) reader.fail("strategies", "expected a non-empty array of strategies");
  std::vector<std::vector<SchemeCount>> strategies;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string at = reader.path("strategies") + "[" + std::to_string(i) + "]";
    const nlohmann::json& entries = list[i];
    if (!entries.is_array() || entries.empty())
      throw InputError(reader.file() + ": " + at + ": expected a non-empty array of {\"tp\", \"pp\", \"count\"}");
    std::vector<SchemeCount> strategy;
    for (std::size_t e = 0; e < entries.size(); ++e) {
      JsonObjectReader entry = reader.child(entries[e], at + "[" + std::to_string(e) + "]");
      SchemeCount sc;
      sc.tp = static_cast<int>(entry.integer_in("tp", 1, kMaxCount));
      sc.pp = static_cast<int>(entry.integer_in("pp", 1, kMaxCount));
      sc.count = static_cast<int>(entry.integer_in("count", 1, kMaxCount));
      entry.finish();
      strategy.push_back(sc);
    }
    strategies.push_back(std::move(strategy));
  }
  return strategies;
}

double fraction(JsonObjectReader& reader, std::string_view key, double fallback) {
  if (!reader.has(key)) return fallback;
  const double v = reader.required<double>(key);
  if (!(v > 0 && v <= 1)) reader.fail(key, "must be in (0, 1], got " + reader.value(key).dump());
  return v;
}

}  // namespace

std::unique_ptr<Policy> make_hydraulis_policy(const PolicySpec& spec) {
  auto reader = policy_options(spec);
  HydraulisOptions o;
  o.where = spec.file + ": " + reader.path();
  if (reader.has("trials")) o.trials = static_cast<int>(reader.integer_in("trials", 1, kMaxCount));
  if (reader.has("finalists")) o.finalists = static_cast<int>(reader.integer_in("finalists", 0, kMaxCount));
  if (reader.has("screen_trials")) o.screen_trials = static_cast<int>(reader.integer_in("screen_trials", 1, kMaxCount));
  if (reader.has("packing")) {
    const auto packing = reader.required<std::string>("packing");
    if (packing != "heuristic" && packing != "exact")
      reader.fail("packing", "expected \"heuristic\" or \"exact\", got \"" + packing + "\"");
    o.exact_packing = packing == "exact";
  }
  if (reader.has("exact_max_sequences"))
    o.exact_max_sequences = static_cast<int>(reader.integer_in("exact_max_sequences", 1, 1024));
  if (reader.has("milp_time_limit_s")) o.milp.time_limit_s = reader.positive("milp_time_limit_s");
  if (reader.has("milp_max_nodes"))
    o.milp.max_nodes = static_cast<int>(reader.integer_in("milp_max_nodes", 1, 1 << 30));
  o.util_threshold = fraction(reader, "util_threshold", o.util_threshold);
  if (reader.has("optimization_phase")) {
    const auto phase = reader.required<std::string>("optimization_phase");
    if (phase != "serial" && phase != "hidden")
      reader.fail("optimization_phase", "expected \"serial\" or \"hidden\", got \"" + phase + "\"");
    o.serial_optimization = phase == "serial";
  }
  if (reader.has("length_step_tokens"))
    o.proposal.length_step = reader.integer_in("length_step_tokens", 1, std::int64_t{1} << 30);
  o.proposal.gpu_step = fraction(reader, "gpu_step", o.proposal.gpu_step);
  if (reader.has("proposal_from")) {
    const auto from = reader.required<std::string>("proposal_from");
    if (from != "dataset" && from != "window")
      reader.fail("proposal_from", "expected \"dataset\" or \"window\", got \"" + from + "\"");
    o.proposal_from_dataset = from == "dataset";
  }
  if (reader.has("proposal_precision")) o.proposal.precision = reader.positive("proposal_precision");
  if (reader.has("roundings_per_length"))
    o.proposal.roundings_per_length = static_cast<int>(reader.integer_in("roundings_per_length", 0, kMaxCount));
  o.recompute = read_recompute(reader, "recompute");
  if (reader.has("strategies")) o.strategies = read_strategies(reader);
  reader.finish();
  return std::make_unique<HydraulisPolicy>(std::move(o));
}

}  // namespace lcsim::hydraulis
