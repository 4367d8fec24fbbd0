#include "studies/validation_intervals.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

#include "base/fnv1a.hpp"
#include "base/random.hpp"
#include "formats/results_io.hpp"
#include "studies/sampled_worlds.hpp"

namespace lcsim {
namespace {

using Json = nlohmann::json;

double world_value(const Json& interval, const char* key, std::size_t world) {
  return interval.at(key).at(world).get<double>();
}

/// log(nominal / published), 0 inside a published range.
double log_error(const IntervalCheck& check) {
  const double nominal = check.worlds.front();
  if (check.published) return std::log(nominal / *check.published);
  if (nominal >= *check.low && nominal <= *check.high) return 0;
  return std::log(nominal / (nominal < *check.low ? *check.low : *check.high));
}

bool positive(const IntervalCheck& check) {
  const double reference = check.published ? *check.published : check.low.value_or(0);
  if (!(reference > 0)) return false;
  return std::all_of(check.worlds.begin(), check.worlds.end(), [](double v) { return v > 0 && std::isfinite(v); });
}

double log_variance(const std::vector<double>& values) {
  if (values.size() < 2) return 0;
  double mean = 0;
  for (double v : values) mean += std::log(v);
  mean /= static_cast<double>(values.size());
  double sum = 0;
  for (double v : values) sum += (std::log(v) - mean) * (std::log(v) - mean);
  return sum / static_cast<double>(values.size() - 1);
}

}  // namespace

std::string to_string(ModelFormFamily family) {
  switch (family) {
    case ModelFormFamily::Time:
      return "time";
    case ModelFormFamily::TimeCalibrated:
      return "time_calibrated";
    case ModelFormFamily::Balance:
      return "balance";
    case ModelFormFamily::RankGap:
      return "rank_gap";
    case ModelFormFamily::PeakGB:
      return "peak_gb";
    case ModelFormFamily::PeakGBCalibrated:
      return "peak_gb_calibrated";
    case ModelFormFamily::Collective:
      return "collective_seconds";
    case ModelFormFamily::Throughput:
      return "throughput";
    case ModelFormFamily::None:
      break;
  }
  return "none";
}

ModelFormFamily family_of(ValidationQuantity quantity, bool calibrated_profile) {
  switch (quantity) {
    case ValidationQuantity::TokensPerGpuSecond:
      // An absolute throughput carries the profile's whole level error (peak, efficiencies), which the two times of
      // a speedup share and cancel; a calibrated profile measured that level.
      return calibrated_profile ? ModelFormFamily::TimeCalibrated : ModelFormFamily::Throughput;
    case ValidationQuantity::Speedup:
    case ValidationQuantity::IterationSeconds:
      return calibrated_profile ? ModelFormFamily::TimeCalibrated : ModelFormFamily::Time;
    case ValidationQuantity::Abr:
    case ValidationQuantity::AbrWork:
    case ValidationQuantity::Cr:
    case ValidationQuantity::Dbr:
    case ValidationQuantity::Pr:
      return ModelFormFamily::Balance;
    case ValidationQuantity::RankGap:
      return ModelFormFamily::RankGap;
    case ValidationQuantity::PeakGB:
      return calibrated_profile ? ModelFormFamily::PeakGBCalibrated : ModelFormFamily::PeakGB;
    case ValidationQuantity::CollectiveSeconds:
      return ModelFormFamily::Collective;
    case ValidationQuantity::Oom:
      break;
  }
  return ModelFormFamily::None;
}

double family_scale(ValidationQuantity quantity) {
  return quantity == ValidationQuantity::IterationSeconds ? 1 / std::numbers::sqrt2 : 1.0;
}

int results_worlds(const Json& results) {
  const auto policies = results.find("policies");
  if (policies == results.end() || !policies->is_array() || policies->empty()) return 1;
  const auto interval = policies->front().find("interval");
  if (interval == policies->front().end()) return 1;
  return interval->at("samples").get<int>();
}

Json results_in_world(const Json& results, int world) {
  if (world == 0) return results;
  Json out = results;
  const auto w = static_cast<std::size_t>(world);
  for (Json& policy : out.at("policies")) {
    const Json& interval = policy.at("interval");
    // Speedups against the baseline keep every ratio between policies, which is all a speedup entry reads.
    // The world's own throughput (tokens_per_gpu_s), on the nominal run's tokens per iteration.
    const double world_iteration_s = world_value(interval, "world_iteration_s", w);
    policy["world_tokens_per_s"] =
        policy.at("tokens_per_s").get<double>() * policy.at("mean_iteration_s").get<double>() / world_iteration_s;
    policy["tokens_per_s"] = world_value(interval, "world_speedup", w);
    policy["mean_iteration_s"] = world_iteration_s;
    Json& metrics = policy["metrics"];
    for (const auto& [key, values] : interval.at("world_metrics").items()) metrics[key] = values.at(w);
    Json iteration = Json::object();
    iteration["peak_GiB"] = world_value(interval, "world_peak_GiB", w);
    policy["iterations"] = Json::array({iteration});
  }
  return out;
}

double family_variance(const std::vector<EntryInterval>& entries, const std::vector<double>& scales,
                       ModelFormFamily family, const std::string& leave_out) {
  double sum = 0;
  int count = 0;
  for (std::size_t j = 0; j < entries.size(); ++j) {
    if (!leave_out.empty() && entries[j].source == leave_out) continue;
    if (entries[j].family != family || !entries[j].usable) continue;
    sum += (entries[j].error_log_sq - entries[j].sampled_log_var) / (scales[j] * scales[j]);
    ++count;
  }
  return count == 0 ? 0 : std::max(0.0, sum / count);
}

bool interval_covers(const IntervalCheck& check, double low_q, double high_q) {
  if (check.published) return *check.published >= low_q && *check.published <= high_q;
  return *check.high >= low_q && *check.low <= high_q;
}

std::vector<EntryInterval> entry_intervals(const std::vector<EntryIntervalInput>& inputs, int draws,
                                           IntervalSummary& summary) {
  std::vector<EntryInterval> out(inputs.size());
  std::vector<double> scales(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const EntryIntervalInput& in = inputs[i];
    if (in.checks.empty()) throw std::logic_error("entry_intervals: entry " + in.id + " has no check");
    EntryInterval& e = out[i];
    e.id = in.id;
    e.source = in.source.empty() ? in.id : in.source;
    e.family = family_of(in.quantity, in.calibrated_profile);
    scales[i] = family_scale(in.quantity);
    e.usable = std::all_of(in.checks.begin(), in.checks.end(), positive);
    if (e.usable) {
      for (const IntervalCheck& c : in.checks) {
        e.error_log_sq += log_error(c) * log_error(c);
        e.sampled_log_var += log_variance(c.worlds);
      }
      e.error_log_sq /= static_cast<double>(in.checks.size());
      e.sampled_log_var /= static_cast<double>(in.checks.size());
    }
  }

  summary.entries = static_cast<int>(inputs.size());
  summary.samples = inputs.empty() ? 1 : static_cast<int>(inputs.front().checks.front().worlds.size());
  summary.covered = 0;
  summary.measured_entries = 0;
  summary.measured_covered = 0;
  std::vector<double> widths;
  std::map<std::string, std::vector<double>> kind_widths;
  summary.kinds.clear();
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    EntryInterval& e = out[i];
    e.model_form_sigma = std::sqrt(family_variance(out, scales, e.family, e.source));
    const double sigma = scales[i] * e.model_form_sigma;
    double covered = 0, width = 0;
    for (const IntervalCheck& c : inputs[i].checks) {
      // The same draws for every check of an entry: its model error is one systematic shift.
      Rng rng(fnv1a(e.id));
      std::vector<double> values;
      for (double v : c.worlds)
        for (int k = 0; k < draws; ++k) values.push_back(v * std::exp(sigma * standard_normal(rng)));
      const Quantiles q = quantiles_of(values);
      e.quantiles.push_back(q);
      if (interval_covers(c, q.p10, q.p90)) covered += 1;
      width += q.p50 != 0 ? (q.p90 - q.p10) / std::abs(q.p50) : 0;
    }
    const auto checks = static_cast<double>(inputs[i].checks.size());
    e.covered = covered / checks;
    e.relative_width = width / checks;
    summary.covered += e.covered;
    if (inputs[i].measured) {
      ++summary.measured_entries;
      summary.measured_covered += e.covered;
    }
    widths.push_back(e.relative_width);
    kind_widths[inputs[i].kind].push_back(e.relative_width);
    IntervalSummary::KindCoverage& kind = summary.kinds[inputs[i].kind];
    ++kind.entries;
    kind.coverage += e.covered;
  }
  for (auto& [name, kind] : summary.kinds) {
    kind.coverage /= kind.entries;
    kind.median_relative_width = quantile(kind_widths[name], 0.5);
  }
  summary.coverage = inputs.empty() ? 0 : summary.covered / static_cast<double>(inputs.size());
  summary.median_relative_width = widths.empty() ? 0 : quantile(widths, 0.5);
  summary.families.clear();
  for (ModelFormFamily f : {ModelFormFamily::Time, ModelFormFamily::TimeCalibrated, ModelFormFamily::Balance,
                            ModelFormFamily::RankGap, ModelFormFamily::PeakGB, ModelFormFamily::PeakGBCalibrated,
                            ModelFormFamily::Collective, ModelFormFamily::Throughput}) {
    FamilySigma s;
    for (const EntryInterval& e : out)
      if (e.family == f && e.usable) ++s.entries;
    s.log_sigma = std::sqrt(family_variance(out, scales, f, std::string()));
    summary.families[f] = s;
  }
  return out;
}

nlohmann::ordered_json model_form_to_json(const IntervalSummary& summary, const std::string& catalogue,
                                          const std::vector<std::string>& profiles, const std::string& command) {
  nlohmann::ordered_json j;
  j["schema"] = kModelFormSchema;
  j["written_by"] = command;
  j["catalogue"] = catalogue;
  j["profiles"] = profiles;
  j["samples"] = summary.samples;
  j["families"] = nlohmann::ordered_json::object();
  for (const auto& [family, sigma] : summary.families) {
    nlohmann::ordered_json f;
    f["log_sigma"] = results_number(sigma.log_sigma);
    f["entries"] = sigma.entries;
    const bool time = family == ModelFormFamily::Time || family == ModelFormFamily::TimeCalibrated;
    f["unit"] = time ? "log(speedup); one time: log_sigma / sqrt(2)" : "log(value)";
    j["families"][to_string(family)] = std::move(f);
  }
  return j;
}

}  // namespace lcsim
