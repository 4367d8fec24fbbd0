#include "studies/validation_catalogue.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "base/errors.hpp"
#include "base/json_reader.hpp"
#include "formats/results_io.hpp"
#include "formats/scenario.hpp"
#include "studies/sweep.hpp"

namespace lcsim {
namespace {

using Json = nlohmann::json;

struct QuantityName {
  ValidationQuantity quantity;
  const char* name;
};
constexpr QuantityName kQuantities[] = {
    {ValidationQuantity::Speedup, "speedup"},
    {ValidationQuantity::Abr, "abr"},
    {ValidationQuantity::AbrWork, "abr_work"},
    {ValidationQuantity::Cr, "cr"},
    {ValidationQuantity::Dbr, "dbr"},
    {ValidationQuantity::Pr, "pr"},
    {ValidationQuantity::RankGap, "rank_gap"},
    {ValidationQuantity::IterationSeconds, "iteration_seconds"},
    {ValidationQuantity::PeakGB, "peak_GB"},
    {ValidationQuantity::Oom, "oom"},
    {ValidationQuantity::CollectiveSeconds, "collective_seconds"},
    {ValidationQuantity::TokensPerGpuSecond, "tokens_per_gpu_s"},
};

struct CombineName {
  ValidationCombine combine;
  const char* name;
};
constexpr CombineName kCombines[] = {
    {ValidationCombine::One, "one"}, {ValidationCombine::Mean, "mean"}, {ValidationCombine::Max, "max"},
    {ValidationCombine::Min, "min"}, {ValidationCombine::Each, "each"}, {ValidationCombine::Series, "series"},
};

constexpr CollectiveOp kOps[] = {CollectiveOp::AllGather, CollectiveOp::ReduceScatter, CollectiveOp::AllReduce,
                                 CollectiveOp::AllToAll, CollectiveOp::SendRecv};

/// A step of a series smaller than this (relative) is flat: it keeps no trend.
constexpr double kFlatStep = 0.005;
/// Published values closer than this (relative) are not ranked by Each's ordering.
constexpr double kRankedGap = 0.05;

bool needs_policy(ValidationQuantity q) {
  return q != ValidationQuantity::CollectiveSeconds;
}

std::vector<std::string> labels_of(JsonObjectReader& reader, std::string_view key) {
  const Json& value = reader.value(key);
  std::vector<std::string> labels;
  if (value.is_string()) {
    labels.push_back(value.get<std::string>());
  } else if (value.is_array() && !value.empty()) {
    for (const auto& item : value) {
      if (!item.is_string()) reader.fail(key, "expected a label or a non-empty array of labels");
      labels.push_back(item.get<std::string>());
    }
  } else {
    reader.fail(key, "expected a label or a non-empty array of labels");
  }
  return labels;
}

CollectiveQuery read_collective(JsonObjectReader reader) {
  CollectiveQuery query;
  const auto op = reader.required<std::string>("op");
  const auto* found =
      std::find_if(std::begin(kOps), std::end(kOps), [&](CollectiveOp o) { return to_string(o) == op; });
  if (found == std::end(kOps))
    reader.fail("op",
                "unknown collective '" + op + "' (all_gather, reduce_scatter, all_reduce, all_to_all, send_recv)");
  query.op = *found;
  query.group_size = static_cast<int>(reader.integer_in("group_size", 2, 1 << 20));
  query.bytes = reader.positive("bytes");
  reader.finish();
  return query;
}

/// Entry-level defaults a point inherits.
struct PointDefaults {
  std::string scenario;
  Json set = Json::object();
  std::string policy;
  std::vector<std::string> reference;
};

void check_set(JsonObjectReader& reader, const Json& set) {
  if (!set.is_object()) reader.fail("set", "expected an object of {\"dotted.path\": value}");
  for (const auto& [path, value] : set.items()) {
    if (path.empty() || path.front() == '.' || path.back() == '.' || path.find("..") != std::string::npos)
      reader.fail("set", "'" + path + "' is not a dotted key path (e.g. training.bucket_size_tokens)");
    (void)value;
  }
}

ValidationPoint read_point(JsonObjectReader reader, const PointDefaults& defaults, const std::string& catalogue_file,
                           ValidationEntry& entry, bool per_point_value) {
  ValidationPoint point;
  point.scenario = reader.has("scenario")
                       ? resolve_scenario_path(catalogue_file, reader.required<std::string>("scenario"))
                       : defaults.scenario;
  point.set = defaults.set;
  if (reader.has("set")) {
    const Json& set = reader.value("set");
    check_set(reader, set);
    for (const auto& [path, value] : set.items()) point.set[path] = value;
  }
  point.policy = reader.optional<std::string>("policy", defaults.policy);
  point.reference = reader.has("reference") ? labels_of(reader, "reference") : defaults.reference;
  point.label = reader.optional<std::string>("label", "");
  if (reader.has("collective")) point.collective = read_collective(reader.object("collective"));
  if (per_point_value) point.published = reader.required<double>("published");
  reader.finish();

  if (point.scenario.empty()) reader.fail_here("no scenario (give one on the entry or the point)");
  if (needs_policy(entry.quantity) && point.policy.empty())
    reader.fail_here("no policy (give one on the entry or the point)");
  if (entry.quantity == ValidationQuantity::Speedup && point.reference.empty())
    reader.fail_here("a speedup needs a reference (a label, or several: the best of them)");
  if (entry.quantity == ValidationQuantity::CollectiveSeconds && !point.collective)
    reader.fail_here("collective_seconds needs a collective {op, group_size, bytes}");
  return point;
}

PublishedFigure read_published(JsonObjectReader& entry_reader, const ValidationEntry& entry) {
  PublishedFigure figure;
  const Json& value = entry_reader.value("published");
  const std::string path = entry_reader.path("published");
  if (entry.combine == ValidationCombine::Each) {
    if (!value.is_null()) entry_reader.fail("published", "combine \"each\" takes its values on the points: null here");
    return figure;
  }
  if (entry.combine == ValidationCombine::Series) {
    if (!value.is_string() || (value != "increasing" && value != "decreasing"))
      entry_reader.fail("published", "a series takes \"increasing\" or \"decreasing\" (values go on the points)");
    figure.trend = value == "increasing" ? Trend::Increasing : Trend::Decreasing;
    return figure;
  }
  if (entry.quantity == ValidationQuantity::Oom) {
    if (!value.is_boolean()) entry_reader.fail("published", "an oom figure is true or false");
    figure.yes = value.get<bool>();
    return figure;
  }
  if (value.is_number()) {
    figure.value = value.get<double>();
    if (!(*figure.value > 0)) entry_reader.fail("published", "must be greater than 0");
    return figure;
  }
  if (value.is_object()) {
    JsonObjectReader range = entry_reader.child(value, path);
    figure.low = range.positive("min");
    figure.high = range.positive("max");
    range.finish();
    if (*figure.low > *figure.high) range.fail("max", "must not be below min");
    return figure;
  }
  entry_reader.fail("published", "expected a number or a range {min, max}");
}

const Json* find_policy(const Json& results, const std::string& label) {
  if (!results.contains("policies") || !results["policies"].is_array()) return nullptr;
  for (const auto& p : results["policies"])
    if (p.is_object() && p.contains("name") && p["name"] == label) return &p;
  return nullptr;
}

/// A measured entry's figure: the policy's mean iteration seconds, its speedup over the run's baseline, or its
/// per-iteration peak memory (mean over iterations, GB), from a committed `lcsim-gpu live --json` file of the
/// point's scenario.
PublishedFigure read_measured(JsonObjectReader& reader, ValidationEntry& entry) {
  const std::string& file = entry.measured;
  const auto fail = [&](const std::string& what) { reader.fail("measured", file + ": " + what); };
  if (entry.quantity != ValidationQuantity::IterationSeconds && entry.quantity != ValidationQuantity::Speedup &&
      entry.quantity != ValidationQuantity::PeakGB)
    reader.fail("quantity", "a measured entry compares iteration_seconds, speedup or peak_GB");
  if (entry.combine != ValidationCombine::One || entry.points.size() != 1)
    reader.fail("combine", "a measured entry is one point: the run its file measured");
  if (entry.mode != "plan") reader.fail("mode", "a measured entry is predicted as live replay predicts it: \"plan\"");
  const Json results = parse_json_file(file, kMaxResultsFileBytes);
  if (!results.is_object() || !known_results_schema(results.value("schema", ""))) fail("expected a results file");
  if (results.value("mode", "") != "live") fail("expected mode \"live\" (an lcsim-gpu live --json file)");
  const ValidationPoint& point = entry.points.front();
  const Json scenario = parse_json_file(point.scenario);
  if (!scenario.is_object() || results.value("scenario", "") != scenario.value("name", ""))
    fail("measured scenario '" + results.value("scenario", "") + "', but the entry predicts " + point.scenario);
  const Json* policy = find_policy(results, point.policy);
  if (!policy) fail("no policy '" + point.policy + "'");
  for (const std::string& label : point_labels(point)) {
    const Json* measured = find_policy(results, label);
    if (!measured || !measured->contains("iterations") || !measured->at("iterations").is_array()) continue;
    std::vector<std::string> labels;
    for (const Json& it : measured->at("iterations"))
      if (it.is_object() && it.contains("label") && it.at("label").is_string()) labels.push_back(it.at("label"));
    if (!labels.empty()) entry.measured_plans[label] = std::move(labels);
  }
  if (entry.quantity == ValidationQuantity::PeakGB) {
    // As a prediction's peak_GB: the mean over iterations of each iteration's largest per-GPU peak.
    const Json& iterations = policy->contains("iterations") ? policy->at("iterations") : Json();
    if (!iterations.is_array() || iterations.empty()) fail("policy '" + point.policy + "' has no iterations");
    double sum = 0;
    for (const Json& it : iterations) {
      const Json& peak = it.is_object() && it.contains("peak_GiB") ? it.at("peak_GiB") : Json();
      if (!peak.is_number() || !(peak.get<double>() > 0) || !std::isfinite(peak.get<double>()))
        fail("policy '" + point.policy + "' has an iteration without a measured peak_GiB");
      sum += peak.get<double>() * 1073741824.0 / 1e9;
    }
    PublishedFigure figure;
    figure.value = sum / static_cast<double>(iterations.size());
    return figure;
  }
  const char* key = "mean_iteration_s";
  if (entry.quantity == ValidationQuantity::Speedup) {
    if (point.reference.size() != 1 || point.reference.front() != results.value("baseline", ""))
      reader.fail("reference", "a measured speedup is over the run's baseline '" + results.value("baseline", "") + "'");
    key = "speedup_vs_baseline";
  }
  const Json& value = policy->contains(key) ? policy->at(key) : Json();
  if (!value.is_number() || !(value.get<double>() > 0) || !std::isfinite(value.get<double>()))
    fail("policy '" + point.policy + "' has no measured " + key + " (out of memory, or not measured)");
  PublishedFigure figure;
  figure.value = value.get<double>();
  return figure;
}

ValidationEntry read_entry(JsonObjectReader reader, const std::string& catalogue_file) {
  ValidationEntry entry;
  entry.id = reader.required<std::string>("id");
  if (entry.id.empty()) reader.fail("id", "must not be empty");
  {
    JsonObjectReader source = reader.object("source");
    entry.source.paper = source.required<std::string>("paper");
    entry.source.where = source.required<std::string>("where");
    entry.source.section = source.optional<std::string>("section", "");
    entry.source.framework = source.optional<std::string>("framework", "");
    entry.source.precision = source.optional<std::string>("precision", "");
    if (!entry.source.framework.empty() &&
        (entry.source.framework != "megatron" && entry.source.framework != "pytorch-fsdp" &&
         entry.source.framework != "deepspeed"))
      source.fail("framework", "expected \"megatron\", \"pytorch-fsdp\" or \"deepspeed\"");
    if (!entry.source.precision.empty() && entry.source.precision != "bf16" && entry.source.precision != "fp8")
      source.fail("precision", "expected \"bf16\" or \"fp8\"");
    source.finish();
  }
  if (reader.has("family")) {
    const auto family = reader.required<std::string>("family");
    if (family != "framework")
      reader.fail("family", "expected \"framework\" (papers and measured runs are told apart without it)");
    entry.framework = true;
    if (entry.source.framework.empty() || entry.source.precision.empty())
      reader.fail("source", "a framework-benchmark entry names its framework class and precision");
  }
  entry.claim = reader.required<std::string>("claim");
  const auto quantity = reader.required<std::string>("quantity");
  const auto* q = std::find_if(std::begin(kQuantities), std::end(kQuantities),
                               [&](const QuantityName& n) { return quantity == n.name; });
  if (q == std::end(kQuantities)) {
    std::string known;
    for (const auto& n : kQuantities) known += (known.empty() ? "" : ", ") + std::string(n.name);
    reader.fail("quantity", "unknown quantity '" + quantity + "' (known: " + known + ")");
  }
  entry.quantity = q->quantity;
  if (reader.has("fitted"))
    reader.fail("fitted", "an entry is fitted when the profile it is predicted with says so (provenance.fitted_on)");
  entry.not_expressible = reader.optional<std::string>("not_expressible", "");
  if (reader.has("tolerance")) entry.tolerance = reader.positive("tolerance");
  entry.mode = reader.optional<std::string>("mode", "simulate");
  if (entry.mode != "plan" && entry.mode != "simulate") reader.fail("mode", "expected \"plan\" or \"simulate\"");

  if (!entry.not_expressible.empty()) {
    // Listed with its reason; whatever else it says is kept for the reader of the catalogue, not run.
    for (const char* key : {"points", "scenario", "set", "policy", "reference", "combine", "collective"})
      if (reader.has(key)) (void)reader.value(key);
    if (reader.has("published")) {
      const Json& published = reader.value("published");
      entry.published_text = published.is_string() ? published.get<std::string>() : published.dump();
    }
    reader.finish();
    return entry;
  }

  if (reader.has("measured")) {
    entry.measured = resolve_scenario_path(catalogue_file, reader.required<std::string>("measured"));
    if (entry.measured.empty()) reader.fail("measured", "must name a file");
  }
  const auto combine = reader.optional<std::string>("combine", "one");
  const auto* c =
      std::find_if(std::begin(kCombines), std::end(kCombines), [&](const CombineName& n) { return combine == n.name; });
  if (c == std::end(kCombines)) reader.fail("combine", "expected one, mean, max, min, each or series");
  entry.combine = c->combine;
  if (entry.quantity == ValidationQuantity::Oom &&
      (entry.combine != ValidationCombine::One && entry.combine != ValidationCombine::Max))
    reader.fail("combine", "an oom figure is one point, or \"max\" (any of the points)");

  PointDefaults defaults;
  if (reader.has("scenario"))
    defaults.scenario = resolve_scenario_path(catalogue_file, reader.required<std::string>("scenario"));
  if (reader.has("set")) {
    defaults.set = reader.value("set");
    check_set(reader, defaults.set);
  }
  defaults.policy = reader.optional<std::string>("policy", "");
  if (reader.has("reference")) defaults.reference = labels_of(reader, "reference");

  const bool per_point_value = entry.combine == ValidationCombine::Each || entry.combine == ValidationCombine::Series;
  if (reader.has("points")) {
    const Json& points = reader.value("points");
    if (!points.is_array() || points.empty()) reader.fail("points", "expected a non-empty array");
    for (std::size_t i = 0; i < points.size(); ++i) {
      const std::string path = reader.path("points") + "[" + std::to_string(i) + "]";
      if (!points[i].is_object()) reader.fail("points", "item " + std::to_string(i) + " is not an object");
      // Series values are optional: a trend is checked with or without them.
      const bool value_here =
          per_point_value && (entry.combine == ValidationCombine::Each || points[i].contains("published"));
      entry.points.push_back(read_point(reader.child(points[i], path), defaults, catalogue_file, entry, value_here));
    }
  } else {
    if (reader.has("collective")) {
      ValidationPoint point;
      point.scenario = defaults.scenario;
      point.collective = read_collective(reader.object("collective"));
      entry.points.push_back(point);
    } else {
      static const Json kNoKeys = Json::object();
      entry.points.push_back(
          read_point(JsonObjectReader(kNoKeys, reader.file(), reader.path()), defaults, catalogue_file, entry, false));
    }
    if (entry.points.front().scenario.empty()) reader.fail_here("no scenario");
  }
  if (entry.combine == ValidationCombine::One && entry.points.size() != 1)
    reader.fail("combine", "\"one\" takes exactly one point, got " + std::to_string(entry.points.size()));
  if (entry.combine == ValidationCombine::Series && entry.points.size() < 2)
    reader.fail("points", "a series needs at least two points");
  if (entry.combine == ValidationCombine::Series) {
    const auto with_values = std::count_if(entry.points.begin(), entry.points.end(),
                                           [](const ValidationPoint& p) { return p.published.has_value(); });
    if (with_values != 0 && with_values != static_cast<long>(entry.points.size()))
      reader.fail("points", "a series gives a published value on every point or on none");
  }
  if (!entry.measured.empty()) {
    if (reader.has("published")) reader.fail("published", "a measured entry's figure comes from its measured file");
    entry.published = read_measured(reader, entry);
  } else {
    entry.published = read_published(reader, entry);
  }
  reader.finish();
  return entry;
}

double metric_of(const Json& policy, const char* key, const std::string& where) {
  const Json& metrics = policy.at("metrics");
  if (!metrics.contains(key) || !metrics[key].is_number()) throw InputError(where + ": results have no metric " + key);
  return metrics[key].get<double>();
}

double relative_error(double predicted, const PublishedFigure& figure) {
  if (figure.value) return (predicted - *figure.value) / *figure.value;
  if (predicted < *figure.low) return (predicted - *figure.low) / *figure.low;
  if (predicted > *figure.high) return (predicted - *figure.high) / *figure.high;
  return 0;
}

OrderingVerdict side_of_one(double predicted, const PublishedFigure& figure) {
  const double low = figure.value ? *figure.value : *figure.low;
  const double high = figure.value ? *figure.value : *figure.high;
  if (low > 1) return predicted > 1 ? OrderingVerdict::Held : OrderingVerdict::Broken;
  if (high < 1) return predicted < 1 ? OrderingVerdict::Held : OrderingVerdict::Broken;
  return OrderingVerdict::NotApplicable;  // a published tie (or a range across 1) orders nothing
}

OrderingVerdict series_verdict(const std::vector<double>& values, Trend trend) {
  for (std::size_t i = 1; i < values.size(); ++i) {
    const double step = (values[i] - values[i - 1]) / std::abs(values[i - 1]);
    const bool right_way = trend == Trend::Increasing ? step > kFlatStep : step < -kFlatStep;
    if (!right_way) return OrderingVerdict::Broken;
  }
  return OrderingVerdict::Held;
}

OrderingVerdict ranking_verdict(const std::vector<double>& predicted, const std::vector<double>& published) {
  bool any = false;
  for (std::size_t i = 0; i < published.size(); ++i)
    for (std::size_t j = i + 1; j < published.size(); ++j) {
      const double gap = (published[j] - published[i]) / std::min(published[i], published[j]);
      if (std::abs(gap) <= kRankedGap) continue;
      any = true;
      if ((gap > 0) != (predicted[j] > predicted[i])) return OrderingVerdict::Broken;
    }
  return any ? OrderingVerdict::Held : OrderingVerdict::NotApplicable;
}

nlohmann::ordered_json number_or_null(const std::optional<double>& value) {
  return value ? results_number(*value) : nlohmann::ordered_json(nullptr);
}

std::string verdict_name(OrderingVerdict v) {
  switch (v) {
    case OrderingVerdict::Held:
      return "held";
    case OrderingVerdict::Broken:
      return "broken";
    case OrderingVerdict::NotApplicable:
      break;
  }
  return "n/a";
}

std::string published_text(const ValidationEntry& e) {
  std::ostringstream s;
  s.precision(6);
  const auto& f = e.published;
  if (!e.published_text.empty()) return e.published_text;
  if (f.value) s << *f.value;
  if (f.low) s << *f.low << "-" << *f.high;
  if (f.yes) s << (*f.yes ? "yes" : "no");
  if (f.trend) s << (*f.trend == Trend::Increasing ? "increasing" : "decreasing");
  if (e.combine == ValidationCombine::Each || (e.combine == ValidationCombine::Series && e.points.front().published)) {
    s << (f.trend ? " " : "") << "[";
    for (std::size_t i = 0; i < e.points.size(); ++i) s << (i ? " " : "") << *e.points[i].published;
    s << "]";
  }
  return s.str();
}

std::string csv_field(const std::string& value) {
  if (value.find_first_of(",\"\n\r") == std::string::npos) return value;
  std::string quoted = "\"";
  for (char c : value) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace

std::string fitted_parameters(const Profile& profile, const std::string& id) {
  std::string out;
  for (const auto& f : profile.provenance.fitted_on)
    if (f.entry == id) out += (out.empty() ? "" : "; ") + f.parameter;
  return out;
}

std::string entry_kind(const ValidationEntry& entry) {
  if (!entry.measured.empty()) return "measured";
  return entry.framework ? "framework" : "published";
}

std::string entry_status(const EntryOutcome& o) {
  if (!o.entry->not_expressible.empty()) return "not expressible";
  if (!o.failed.empty()) return "failed";
  return o.fitted.empty() ? "held out" : "fitted";
}

std::string to_string(ValidationQuantity quantity) {
  for (const auto& n : kQuantities)
    if (n.quantity == quantity) return n.name;
  return "?";
}

ValidationCatalogue catalogue_from_json(const Json& document, const std::string& file) {
  JsonObjectReader root(document, file);
  ValidationCatalogue catalogue;
  catalogue.file = file;
  const auto schema = root.required<std::string>("schema");
  if (schema != "lcsim-validation-catalogue/1") root.fail("schema", "expected \"lcsim-validation-catalogue/1\"");
  catalogue.description = root.optional<std::string>("description", "");
  const Json& entries = root.value("entries");
  if (!entries.is_array() || entries.empty()) root.fail("entries", "expected a non-empty array");
  std::set<std::string> ids;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::string path = root.path("entries") + "[" + std::to_string(i) + "]";
    if (!entries[i].is_object()) root.fail("entries", "item " + std::to_string(i) + " is not an object");
    ValidationEntry entry = read_entry(root.child(entries[i], path), file);
    if (!ids.insert(entry.id).second) throw InputError(file + ": " + path + ".id: duplicate id '" + entry.id + "'");
    catalogue.entries.push_back(std::move(entry));
  }
  root.finish();
  return catalogue;
}

ValidationCatalogue load_catalogue(const std::string& file) {
  return catalogue_from_json(parse_json_file(file), file);
}

Json point_scenario(const ValidationPoint& point, const std::string& where) {
  Json doc = scenario_with_absolute_paths(parse_json_file(point.scenario), point.scenario);
  for (const auto& [path, value] : point.set.items()) {
    try {
      set_dotted_path(doc, path, value);
    } catch (const InputError& e) {
      throw InputError(where + ": set " + e.what());
    }
  }
  return doc;
}

std::vector<std::string> point_labels(const ValidationPoint& point) {
  std::vector<std::string> labels;
  if (!point.policy.empty()) labels.push_back(point.policy);
  for (const auto& r : point.reference)
    if (std::find(labels.begin(), labels.end(), r) == labels.end()) labels.push_back(r);
  return labels;
}

std::string plan_drift(const ValidationEntry& entry, const Json& results) {
  for (const auto& [label, measured] : entry.measured_plans) {
    const Json* policy = find_policy(results, label);
    const Json* iterations = policy && policy->contains("iterations") ? &policy->at("iterations") : nullptr;
    std::vector<std::string> now;
    if (iterations && iterations->is_array())
      for (const Json& it : *iterations) now.push_back(it.is_object() ? it.value("label", "") : "");
    const std::string stale = kPlanDrift + entry.measured + " measured it: policy '" + label + "' ";
    if (now.size() != measured.size())
      return stale + "plans " + std::to_string(now.size()) + " iterations, " + std::to_string(measured.size()) +
             " were measured (re-measure it, or set the policy's options to the plan that ran)";
    for (std::size_t i = 0; i < now.size(); ++i)
      if (now[i] != measured[i])
        return stale + "plans \"" + now[i] + "\" where \"" + measured[i] +
               "\" ran (re-measure it, or set the policy's options to the plan that ran)";
  }
  return {};
}

PointPrediction predict_from_results(const ValidationEntry& entry, const ValidationPoint& point, const Json& results,
                                     int gpus) {
  PointPrediction prediction;
  const std::string where = "entry " + entry.id;
  const Json* policy = find_policy(results, point.policy);
  if (!policy) throw InputError(where + ": the results have no policy '" + point.policy + "'");
  switch (entry.quantity) {
    case ValidationQuantity::Speedup: {
      double best = 0;
      for (const auto& label : point.reference) {
        const Json* reference = find_policy(results, label);
        if (!reference) throw InputError(where + ": the results have no policy '" + label + "'");
        best = std::max(best, reference->at("tokens_per_s").get<double>());
      }
      if (!(best > 0)) throw InputError(where + ": the reference processed no tokens");
      prediction.value = policy->at("tokens_per_s").get<double>() / best;
      break;
    }
    case ValidationQuantity::Abr:
      prediction.value = metric_of(*policy, "abr", where);
      break;
    case ValidationQuantity::AbrWork:
      prediction.value = metric_of(*policy, "abr_work", where);
      break;
    case ValidationQuantity::Cr:
      prediction.value = metric_of(*policy, "cr", where);
      break;
    case ValidationQuantity::Dbr:
      prediction.value = metric_of(*policy, "dbr", where);
      break;
    case ValidationQuantity::Pr:
      prediction.value = metric_of(*policy, "pr", where);
      break;
    case ValidationQuantity::RankGap:
      prediction.value = metric_of(*policy, "pipeline_gap", where);
      break;
    case ValidationQuantity::IterationSeconds:
      prediction.value = policy->at("mean_iteration_s").get<double>();
      break;
    case ValidationQuantity::PeakGB: {
      const Json& iterations = policy->at("iterations");
      if (iterations.empty()) throw InputError(where + ": the results have no iterations");
      double sum = 0;
      for (const auto& it : iterations) sum += it.at("peak_GiB").get<double>() * 1073741824.0 / 1e9;
      prediction.value = sum / static_cast<double>(iterations.size());
      break;
    }
    case ValidationQuantity::Oom:
      prediction.yes = policy->at("oom_iterations").get<int>() > 0;
      break;
    case ValidationQuantity::CollectiveSeconds:
      throw std::logic_error("collective_seconds is not read from results");
    case ValidationQuantity::TokensPerGpuSecond:
      if (gpus <= 0) throw std::logic_error("tokens_per_gpu_s needs the run's GPU count");
      // A sampled world's document carries its own throughput beside its speedups (results_in_world).
      prediction.value = policy->value("world_tokens_per_s", policy->at("tokens_per_s").get<double>()) / gpus;
      break;
  }
  return prediction;
}

std::optional<SeriesFactor> series_factor(const std::vector<double>& published, const std::vector<double>& predicted,
                                          Trend trend) {
  if (published.size() < 2 || predicted.size() != published.size()) return std::nullopt;
  for (const auto* series : {&published, &predicted})
    if (!(series->front() > 0) || !(series->back() > 0)) return std::nullopt;
  // The way the trend runs: a decline of 3890 to 548 is a factor 7.10, a rise of 829 to 876 one of 1.06.
  const auto factor = [trend](const std::vector<double>& v) {
    return trend == Trend::Decreasing ? v.front() / v.back() : v.back() / v.front();
  };
  SeriesFactor f;
  f.published = factor(published);
  f.predicted = factor(predicted);
  f.error = f.predicted / f.published - 1;
  return f;
}

EntryOutcome evaluate_entry(const ValidationEntry& entry, std::vector<PointPrediction> points) {
  EntryOutcome outcome;
  outcome.entry = &entry;
  outcome.points = std::move(points);
  if (!entry.not_expressible.empty()) return outcome;
  if (outcome.points.size() != entry.points.size())
    throw std::logic_error("validation: entry " + entry.id + " got a prediction count unlike its points");
  for (const auto& p : outcome.points)
    if (!p.failed.empty()) {
      outcome.failed = p.failed;
      return outcome;
    }

  if (entry.quantity == ValidationQuantity::Oom) {
    bool any = false;
    for (const auto& p : outcome.points) any = any || p.yes.value_or(false);
    outcome.predicted_yes = any;
    const bool same = any == *entry.published.yes;
    outcome.ordering = same ? OrderingVerdict::Held : OrderingVerdict::Broken;
    outcome.within_tolerance = same;
    return outcome;
  }

  std::vector<double> values;
  for (const auto& p : outcome.points) values.push_back(*p.value);
  switch (entry.combine) {
    case ValidationCombine::One:
      outcome.predicted = values.front();
      break;
    case ValidationCombine::Mean: {
      double sum = 0;
      for (double v : values) sum += v;
      outcome.predicted = sum / static_cast<double>(values.size());
      break;
    }
    case ValidationCombine::Max:
      outcome.predicted = *std::max_element(values.begin(), values.end());
      break;
    case ValidationCombine::Min:
      outcome.predicted = *std::min_element(values.begin(), values.end());
      break;
    case ValidationCombine::Each:
    case ValidationCombine::Series:
      break;
  }

  if (outcome.predicted) {
    outcome.error = relative_error(*outcome.predicted, entry.published);
    outcome.abs_error = std::abs(*outcome.error);
    if (entry.quantity == ValidationQuantity::Speedup)
      outcome.ordering = side_of_one(*outcome.predicted, entry.published);
  } else if (entry.points.front().published) {  // Each, or a Series with values
    double signed_sum = 0, abs_sum = 0;
    std::vector<double> published;
    for (std::size_t i = 0; i < values.size(); ++i) {
      const double pub = *entry.points[i].published;
      published.push_back(pub);
      signed_sum += (values[i] - pub) / pub;
      abs_sum += std::abs(values[i] - pub) / pub;
    }
    outcome.error = signed_sum / static_cast<double>(values.size());
    outcome.abs_error = abs_sum / static_cast<double>(values.size());
    if (entry.combine == ValidationCombine::Each) outcome.ordering = ranking_verdict(values, published);
    if (entry.combine == ValidationCombine::Series)
      outcome.series_factor = series_factor(published, values, *entry.published.trend);
  }
  if (entry.combine == ValidationCombine::Series) outcome.ordering = series_verdict(values, *entry.published.trend);

  const bool error_ok = !outcome.abs_error || *outcome.abs_error <= entry.tolerance;
  const bool ordering_ok = outcome.ordering != OrderingVerdict::Broken;
  outcome.within_tolerance = error_ok && ordering_ok;
  return outcome;
}

namespace {

/// Adds a held-out entry's error to `errors` (median_ape is filled by finish_errors).
void add_held_out(HeldOutErrors& errors, std::vector<double>& abs_errors, const EntryOutcome& o) {
  ++errors.entries;
  if (o.within_tolerance) ++errors.within_tolerance;
  if (!o.abs_error) return;
  ++errors.numeric;
  errors.mape += *o.abs_error;
  abs_errors.push_back(*o.abs_error);
}

void finish_errors(HeldOutErrors& errors, std::vector<double>& abs_errors) {
  if (errors.numeric == 0) return;
  errors.mape /= errors.numeric;
  std::sort(abs_errors.begin(), abs_errors.end());
  const std::size_t n = abs_errors.size();
  errors.median_ape = n % 2 ? abs_errors[n / 2] : (abs_errors[n / 2 - 1] + abs_errors[n / 2]) / 2;
}

}  // namespace

MeasuredRanking measured_ranking(const std::vector<EntryOutcome>& outcomes) {
  struct Ranked {
    std::string policy;
    double measured = 0, predicted = 0;
  };
  // A run's policies are its speedup entries' plus the baseline they are measured over, at 1.
  std::map<std::pair<std::string, std::string>, std::vector<Ranked>> runs;
  for (const auto& o : outcomes) {
    const ValidationEntry& e = *o.entry;
    if (e.measured.empty() || e.quantity != ValidationQuantity::Speedup || e.points.size() != 1 ||
        e.points.front().reference.size() != 1 || !o.failed.empty() || !o.fitted.empty() || !o.predicted ||
        !e.published.value)
      continue;
    auto& ranked = runs[{e.measured, e.points.front().reference.front()}];
    if (ranked.empty()) ranked.push_back({e.points.front().reference.front(), 1.0, 1.0});
    ranked.push_back({e.points.front().policy, *e.published.value, *o.predicted});
  }
  MeasuredRanking ranking;
  for (const auto& [key, ranked] : runs)
    for (std::size_t i = 0; i < ranked.size(); ++i)
      for (std::size_t j = i + 1; j < ranked.size(); ++j) {
        const bool i_faster = ranked[i].measured > ranked[j].measured;
        const Ranked& faster = i_faster ? ranked[i] : ranked[j];
        const Ranked& slower = i_faster ? ranked[j] : ranked[i];
        if (faster.measured <= slower.measured * (1 + kMeasuredRankingTie)) {
          ++ranking.ties;
          continue;
        }
        ++ranking.pairs;
        if (faster.predicted > slower.predicted * (1 + kPredictedRankingTie))
          ++ranking.kept;
        else
          ranking.broken.push_back({key.first, faster.policy, slower.policy, faster.measured, slower.measured,
                                    faster.predicted, slower.predicted});
      }
  return ranking;
}

ValidationSummary summarize_validation(const std::vector<EntryOutcome>& outcomes) {
  ValidationSummary s;
  HeldOutErrors published;
  std::vector<double> published_errors, measured_errors, framework_errors;
  for (const auto& o : outcomes) {
    ++s.entries;
    if (!o.entry->not_expressible.empty()) {
      ++s.not_expressible;
      continue;
    }
    if (!o.failed.empty()) {
      ++s.failed;
      continue;
    }
    const std::string kind = entry_kind(*o.entry);
    // Orderings and trend factors count fitted entries too: no parameter is fitted on a ranking or a trend's span.
    HeldOutErrors& family = kind == "measured" ? s.measured : kind == "framework" ? s.framework : published;
    if (o.ordering != OrderingVerdict::NotApplicable) {
      ++family.ordering_checked;
      if (o.ordering == OrderingVerdict::Held) ++family.ordering_held;
    }
    if (o.series_factor) {
      ++family.factor_checked;
      if (o.series_factor->within()) ++family.factor_within;
    }
    if (!o.fitted.empty()) {
      ++s.fitted;
      continue;
    }
    if (kind == "measured")
      add_held_out(s.measured, measured_errors, o);
    else if (kind == "framework")
      add_held_out(s.framework, framework_errors, o);
    else
      add_held_out(published, published_errors, o);
  }
  finish_errors(published, published_errors);
  finish_errors(s.measured, measured_errors);
  finish_errors(s.framework, framework_errors);
  s.held_out = published.entries;
  s.held_out_numeric = published.numeric;
  s.held_out_mape = published.mape;
  s.held_out_median_ape = published.median_ape;
  s.held_out_within_tolerance = published.within_tolerance;
  s.ordering_checked = published.ordering_checked;
  s.ordering_held = published.ordering_held;
  s.factor_checked = published.factor_checked;
  s.factor_within = published.factor_within;
  s.measured_ranking = measured_ranking(outcomes);
  return s;
}

namespace {

nlohmann::ordered_json broken_rankings_json(const MeasuredRanking& ranking) {
  nlohmann::ordered_json broken = nlohmann::ordered_json::array();
  for (const BrokenRanking& b : ranking.broken)
    broken.push_back(
        {{"run", b.run},
         {"faster", b.faster},
         {"slower", b.slower},
         {"measured_speedups", {results_number(b.measured_faster), results_number(b.measured_slower)}},
         {"predicted_speedups", {results_number(b.predicted_faster), results_number(b.predicted_slower)}}});
  return broken;
}

}  // namespace

nlohmann::ordered_json validation_to_json(const ValidationCatalogue& catalogue,
                                          const std::vector<EntryOutcome>& outcomes, const ValidationSummary& summary) {
  using OJson = nlohmann::ordered_json;
  OJson j;
  j["schema"] = "lcsim-validation/4";
  j["catalogue"] = catalogue.file;
  OJson entries = OJson::array();
  for (const auto& o : outcomes) {
    const ValidationEntry& e = *o.entry;
    OJson item;
    item["id"] = e.id;
    item["source"] = {{"paper", e.source.paper}, {"where", e.source.where}, {"section", e.source.section}};
    if (e.framework) {
      item["source"]["framework"] = e.source.framework;
      item["source"]["precision"] = e.source.precision;
    }
    item["claim"] = e.claim;
    item["quantity"] = to_string(e.quantity);
    item["kind"] = entry_kind(e);
    if (!e.measured.empty()) item["measured_file"] = e.measured;
    item["status"] = entry_status(o);
    item["mode"] = e.mode;
    item["published"] = published_text(e);
    item["predicted"] = o.predicted_yes ? OJson(*o.predicted_yes) : OJson(number_or_null(o.predicted));
    OJson points = OJson::array();
    for (std::size_t i = 0; i < o.points.size(); ++i) {
      OJson p;
      p["label"] = i < e.points.size() ? e.points[i].label : "";
      p["predicted"] = o.points[i].yes ? OJson(*o.points[i].yes) : OJson(number_or_null(o.points[i].value));
      if (i < e.points.size() && e.points[i].published) p["published"] = results_number(*e.points[i].published);
      points.push_back(std::move(p));
    }
    item["points"] = std::move(points);
    item["error"] = number_or_null(o.error);
    item["abs_error"] = number_or_null(o.abs_error);
    if (o.series_factor)
      item["series_factor"] = {{"published", results_number(o.series_factor->published)},
                               {"predicted", results_number(o.series_factor->predicted)},
                               {"error", results_number(o.series_factor->error)}};
    item["ordering"] = verdict_name(o.ordering);
    item["tolerance"] = results_number(e.tolerance);
    item["within_tolerance"] = o.within_tolerance;
    item["fitted"] = o.fitted;
    item["not_expressible"] = e.not_expressible;
    item["failed"] = o.failed;
    entries.push_back(std::move(item));
  }
  j["entries"] = std::move(entries);
  j["summary"] = {{"entries", summary.entries},
                  {"not_expressible", summary.not_expressible},
                  {"failed", summary.failed},
                  {"fitted", summary.fitted},
                  {"held_out", summary.held_out},
                  {"held_out_numeric", summary.held_out_numeric},
                  {"held_out_mape", results_number(summary.held_out_mape)},
                  {"held_out_median_ape", results_number(summary.held_out_median_ape)},
                  {"held_out_within_tolerance", summary.held_out_within_tolerance},
                  {"measured_held_out", summary.measured.entries},
                  {"measured_numeric", summary.measured.numeric},
                  {"measured_mape", results_number(summary.measured.mape)},
                  {"measured_median_ape", results_number(summary.measured.median_ape)},
                  {"measured_within_tolerance", summary.measured.within_tolerance},
                  {"measured_ordering_checked", summary.measured.ordering_checked},
                  {"measured_ordering_held", summary.measured.ordering_held},
                  {"measured_factor_checked", summary.measured.factor_checked},
                  {"measured_factor_within", summary.measured.factor_within},
                  {"measured_ranking_pairs", summary.measured_ranking.pairs},
                  {"measured_ranking_kept", summary.measured_ranking.kept},
                  {"measured_ranking_ties", summary.measured_ranking.ties},
                  {"measured_ranking_broken", broken_rankings_json(summary.measured_ranking)},
                  {"ordering_checked", summary.ordering_checked},
                  {"ordering_held", summary.ordering_held},
                  {"factor_checked", summary.factor_checked},
                  {"factor_within", summary.factor_within},
                  {"framework_held_out", summary.framework.entries},
                  {"framework_numeric", summary.framework.numeric},
                  {"framework_mape", results_number(summary.framework.mape)},
                  {"framework_median_ape", results_number(summary.framework.median_ape)},
                  {"framework_within_tolerance", summary.framework.within_tolerance},
                  {"framework_ordering_checked", summary.framework.ordering_checked},
                  {"framework_ordering_held", summary.framework.ordering_held},
                  {"framework_factor_checked", summary.framework.factor_checked},
                  {"framework_factor_within", summary.framework.factor_within}};
  return j;
}

std::string validation_to_csv(const std::vector<EntryOutcome>& outcomes) {
  std::ostringstream out;
  out.precision(9);
  out << "id,paper,where,quantity,kind,status,published,predicted,error,ordering,within_tolerance,"
         "published_factor,predicted_factor,factor_error\n";
  for (const auto& o : outcomes) {
    const ValidationEntry& e = *o.entry;
    out << csv_field(e.id) << ',' << csv_field(e.source.paper) << ',' << csv_field(e.source.where) << ','
        << to_string(e.quantity) << ',' << entry_kind(e) << ',' << csv_field(entry_status(o)) << ','
        << csv_field(published_text(e)) << ',';
    if (o.predicted_yes) out << (*o.predicted_yes ? "yes" : "no");
    if (o.predicted) out << *o.predicted;
    out << ',';
    if (o.error) out << *o.error;
    out << ',' << verdict_name(o.ordering) << ',' << (o.within_tolerance ? 1 : 0) << ',';
    if (o.series_factor)
      out << o.series_factor->published << ',' << o.series_factor->predicted << ',' << o.series_factor->error;
    else
      out << ",,";
    out << '\n';
  }
  return out.str();
}

}  // namespace lcsim
