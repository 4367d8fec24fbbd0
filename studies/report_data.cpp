#include "studies/report_data.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "base/json_reader.hpp"
#include "formats/results_io.hpp"
#include "program/iteration_program.hpp"

namespace lcsim {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;
using Interval = std::pair<double, double>;

constexpr const char* kSweepSchema = "lcsim-sweep/1";

/// Sorted, disjoint intervals covering the same time as `spans`.
std::vector<Interval> merged(std::vector<Interval> spans) {
  std::sort(spans.begin(), spans.end());
  std::vector<Interval> out;
  for (const Interval& s : spans) {
    if (!out.empty() && s.first <= out.back().second)
      out.back().second = std::max(out.back().second, s.second);
    else
      out.push_back(s);
  }
  return out;
}

double length(const std::vector<Interval>& spans) {
  double total = 0;
  for (const auto& [a, b] : spans) total += b - a;
  return total;
}

/// Time in `comm` that no interval of `compute` covers (both merged).
double uncovered(const std::vector<Interval>& comm, const std::vector<Interval>& compute) {
  double overlap = 0;
  std::size_t j = 0;
  for (const auto& [a, b] : comm) {
    while (j < compute.size() && compute[j].second <= a) ++j;
    for (std::size_t k = j; k < compute.size() && compute[k].first < b; ++k)
      overlap += std::min(b, compute[k].second) - std::max(a, compute[k].first);
  }
  return length(comm) - overlap;
}

std::vector<double> numbers(JsonObjectReader& r, std::string_view key) {
  const Json& array = r.value(key);
  if (!array.is_array()) r.fail(key, "expected an array of numbers, got " + json_type_name(array));
  std::vector<double> out;
  for (std::size_t i = 0; i < array.size(); ++i) {
    if (!array[i].is_number())
      r.fail(key, "item " + std::to_string(i) + ": expected a number, got " + json_type_name(array[i]));
    out.push_back(array[i].get<double>());
  }
  return out;
}

/// A number or null (results files write null for a figure that is not finite).
OrderedJson number_or_null(JsonObjectReader& r, std::string_view key) {
  const Json& value = r.value(key);
  if (value.is_null()) return nullptr;
  if (!value.is_number()) r.fail(key, "expected a number or null, got " + json_type_name(value));
  return results_number(value.get<double>());
}

const Json& array_of(JsonObjectReader& r, std::string_view key) {
  const Json& array = r.value(key);
  if (!array.is_array()) r.fail(key, "expected an array, got " + json_type_name(array));
  return array;
}

/// {p10, p90} of an interval's `key` (required in an interval object).
std::pair<OrderedJson, OrderedJson> percentiles(JsonObjectReader& interval, std::string_view key) {
  JsonObjectReader q = interval.object(key);
  return {number_or_null(q, "p10"), number_or_null(q, "p90")};
}

/// `p` with "gpu_busy_s", "gpu_idle_s" (per GPU, mean over `iterations`: busy_s, and idle_s where the simulation
/// wrote it, else the iteration's time less the busy time, as the simulation defines it) and "gpu_exposed_comm_s".
OrderedJson with_gpu_times(OrderedJson p, JsonObjectReader& r, const Json& iterations) {
  std::vector<double> busy, idle;
  for (std::size_t i = 0; i < iterations.size(); ++i) {
    JsonObjectReader it = r.child(iterations[i], r.path("iterations") + "[" + std::to_string(i) + "]");
    if (!iterations[i].is_object()) it.fail_here("expected an object, got " + json_type_name(iterations[i]));
    const double seconds = it.required<double>("seconds");
    const std::vector<double> b = numbers(it, "busy_s");
    std::vector<double> d;
    if (it.has("idle_s")) d = numbers(it, "idle_s");
    if (!d.empty() && d.size() != b.size())
      it.fail("idle_s", "holds " + std::to_string(d.size()) + " GPUs, busy_s " + std::to_string(b.size()));
    if (i > 0 && b.size() != busy.size())
      it.fail("busy_s",
              "holds " + std::to_string(b.size()) + " GPUs, the first iteration " + std::to_string(busy.size()));
    busy.resize(b.size(), 0.0);
    idle.resize(b.size(), 0.0);
    for (std::size_t g = 0; g < b.size(); ++g) {
      busy[g] += b[g];
      idle[g] += d.empty() ? std::max(0.0, seconds - b[g]) : d[g];
    }
  }
  const double n = static_cast<double>(std::max<std::size_t>(1, iterations.size()));
  p["gpu_busy_s"] = p["gpu_idle_s"] = OrderedJson::array();
  for (std::size_t g = 0; g < busy.size(); ++g) {
    p["gpu_busy_s"].push_back(results_number(busy[g] / n));
    p["gpu_idle_s"].push_back(results_number(idle[g] / n));
  }
  p["gpu_exposed_comm_s"] = nullptr;
  return p;
}

/// One policy of a results document; an interval only with more than one world (one world's p10 and p90 are its
/// nominal figures: no interval to show).
OrderedJson policy_data(JsonObjectReader& r) {
  OrderedJson p;
  p["name"] = r.required<std::string>("name");
  p["kind"] = r.required<std::string>("kind");
  p["mean_s"] = results_number(r.required<double>("mean_iteration_s"));
  p["tokens_per_s"] = results_number(r.required<double>("tokens_per_s"));
  p["speedup"] = results_number(r.required<double>("speedup_vs_baseline"));
  p["oom_iterations"] = r.required<std::int64_t>("oom_iterations");
  const Json& iterations = array_of(r, "iterations");
  p["iterations"] = iterations.size();
  p["iteration_s_p10"] = p["iteration_s_p90"] = p["speedup_p10"] = p["speedup_p90"] = nullptr;
  p["p_beats_baseline"] = nullptr;
  if (r.has("interval")) {
    JsonObjectReader interval = r.object("interval");
    if (interval.required<std::int64_t>("samples") > 1) {
      std::tie(p["iteration_s_p10"], p["iteration_s_p90"]) = percentiles(interval, "iteration_s");
      std::tie(p["speedup_p10"], p["speedup_p90"]) = percentiles(interval, "speedup");
      p["p_beats_baseline"] = number_or_null(interval, "p_beats_baseline");
    }
  }
  return with_gpu_times(p, r, iterations);
}

OrderedJson results_data(JsonObjectReader& r) {
  const std::string schema = r.required<std::string>("schema");
  if (!known_results_schema(schema))
    r.fail("schema", "expected " + std::string(kResultsSchema) + ", " + kResultsSchemaV1 + " or " + kSweepSchema +
                         ", got \"" + schema + "\"");
  OrderedJson d;
  d["schema"] = "lcsim-report-data/1";
  d["source"] = r.file();
  d["scenario"] = r.required<std::string>("scenario");
  d["mode"] = r.required<std::string>("mode");
  d["dataset"] = r.required<std::string>("dataset");
  JsonObjectReader profile = r.object("profile");
  d["profile"] = {{"label", profile.required<std::string>("label")},
                  {"calibrated", profile.required<bool>("calibrated")}};
  d["baseline"] = r.required<std::string>("baseline");
  d["reference"] = r.optional<std::string>("speedup_reference", d["baseline"].get<std::string>());
  d["samples"] = 1;
  d["winner"] = d["p_winner"] = nullptr;
  d["notes"] = OrderedJson::array();
  const Json& policies = array_of(r, "policies");
  if (policies.empty()) r.fail("policies", "holds no policy");
  d["policies"] = OrderedJson::array();
  for (std::size_t i = 0; i < policies.size(); ++i) {
    JsonObjectReader pr = r.child(policies[i], r.path("policies") + "[" + std::to_string(i) + "]");
    if (!policies[i].is_object()) pr.fail_here("expected an object, got " + json_type_name(policies[i]));
    d["policies"].push_back(policy_data(pr));
  }
  if (r.has("uncertainty")) {
    JsonObjectReader u = r.object("uncertainty");
    d["samples"] = u.required<std::int64_t>("samples");
    const Json& winner = u.value("winner");
    if (!winner.is_null() && !winner.is_string()) u.fail("winner", "expected a policy label or null");
    d["winner"] = winner;
    d["p_winner"] = number_or_null(u, "p_winner");
    if (d["samples"].get<std::int64_t>() <= 1) d["p_winner"] = nullptr;
  } else {
    // A run of one world: the fastest policy that fits in GPU memory wins (formats/results_io.hpp).
    double best = -1;
    for (const auto& p : d["policies"])
      if (p["oom_iterations"].get<std::int64_t>() == 0 && p["tokens_per_s"].get<double>() > best) {
        best = p["tokens_per_s"].get<double>();
        d["winner"] = p["name"];
      }
  }
  if (d["dataset"].get<std::string>().find("synthetic") != std::string::npos)
    d["notes"].push_back("Synthetic lengths: the dataset is sampled from a named distribution, not a trace.");
  if (!d["profile"]["calibrated"].get<bool>())
    d["notes"].push_back("Uncalibrated profile (" + d["profile"]["label"].get<std::string>() +
                         "): times are derived from public figures, not measured on your GPUs.");
  if (d["mode"] == "plan")
    d["notes"].push_back("Mode plan: each iteration's program replayed without contention (no simulation).");
  d["sweep"] = d["timeline"] = nullptr;
  return d;
}

/// The sweep axis whose value changes between points (the first such), else the first axis.
std::string sweep_axis(JsonObjectReader& r, const Json& axes, const Json& points) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    if (!axes[i].is_string()) r.fail("axes", "item " + std::to_string(i) + ": expected an axis name");
    names.push_back(axes[i].get<std::string>());
  }
  if (names.empty()) r.fail("axes", "holds no axis");
  for (const std::string& name : names)
    for (const Json& point : points)
      if (point["coordinates"].value(name, Json()) != points[0]["coordinates"].value(name, Json())) return name;
  return names.front();
}

OrderedJson sweep_data(JsonObjectReader& r) {
  r.required<std::string>("schema");
  const Json& axes = array_of(r, "axes");
  const Json& points = array_of(r, "points");
  if (points.empty()) r.fail("points", "holds no point");
  for (std::size_t i = 0; i < points.size(); ++i) {
    JsonObjectReader pr = r.child(points[i], r.path("points") + "[" + std::to_string(i) + "]");
    if (!points[i].is_object()) pr.fail_here("expected an object, got " + json_type_name(points[i]));
    if (!pr.value("coordinates").is_object()) pr.fail("coordinates", "expected an object");
    if (!pr.value("results").is_object()) pr.fail("results", "expected a results object");
  }
  const std::string axis = sweep_axis(r, axes, points);
  OrderedJson sweep{{"axis", axis}, {"numeric", true}, {"points", OrderedJson::array()}};
  OrderedJson last;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const std::string path = r.path("points") + "[" + std::to_string(i) + "]";
    JsonObjectReader pr = r.child(points[i], path);
    const Json& coordinate = points[i]["coordinates"].value(axis, Json());
    if (coordinate.is_null()) pr.fail("coordinates", "has no value for axis \"" + axis + "\"");
    JsonObjectReader results = pr.object("results");
    OrderedJson point_data = results_data(results);
    OrderedJson entry{{"label", coordinate.is_string() ? coordinate.get<std::string>() : coordinate.dump()},
                      {"x", coordinate.is_number() ? OrderedJson(coordinate.get<double>()) : OrderedJson(i)},
                      {"gpus", pr.optional<std::int64_t>("gpus", 0)},
                      {"policies", OrderedJson::object()}};
    if (!coordinate.is_number()) sweep["numeric"] = false;
    for (const auto& p : point_data["policies"])
      entry["policies"][p["name"].get<std::string>()] = {{"speedup", p["speedup"]},
                                                         {"p10", p["speedup_p10"]},
                                                         {"p90", p["speedup_p90"]},
                                                         {"oom", p["oom_iterations"].get<std::int64_t>() > 0}};
    sweep["points"].push_back(std::move(entry));
    last = std::move(point_data);
  }
  last["source"] = r.file();
  last["notes"].push_back("Sweep over " + axis + " (" + std::to_string(points.size()) +
                          " points): the table, breakdown and speedup chart are of its last point.");
  last["sweep"] = std::move(sweep);
  return last;
}

}  // namespace

void ReportSpans::add(std::size_t policy, std::size_t iteration, const program::IterationOutcome& outcome) {
  if (exposed_.size() <= policy) {
    exposed_.resize(policy + 1);
    spans_.resize(policy + 1);
    seconds_.resize(policy + 1, 0.0);
    iterations_.resize(policy + 1, 0);
  }
  std::vector<double>& exposed = exposed_[policy];
  exposed.resize(std::max(exposed.size(), outcome.busy_seconds.size()), 0.0);
  std::vector<std::vector<Interval>> compute(exposed.size()), comm(exposed.size());
  for (const program::GpuSpan& s : outcome.spans) {
    if (s.gpu < 0 || static_cast<std::size_t>(s.gpu) >= exposed.size()) continue;
    auto& into = program::is_communication(s.kind) ? comm : compute;
    into[static_cast<std::size_t>(s.gpu)].emplace_back(s.start_s, s.end_s);
  }
  for (std::size_t g = 0; g < exposed.size(); ++g) exposed[g] += uncovered(merged(comm[g]), merged(compute[g]));
  ++iterations_[policy];
  if (iteration != 0) return;
  seconds_[policy] = outcome.seconds;
  for (program::GpuSpan s : outcome.spans) {
    if (s.gpu >= kReportTimelineGpus) continue;
    s.start_s -= outcome.start_s;
    s.end_s -= outcome.start_s;
    spans_[policy].push_back(s);
  }
}

nlohmann::ordered_json report_data_from_results(const nlohmann::json& document, const std::string& file) {
  if (!document.is_object()) throw InputError(file + ": expected a results object, got " + json_type_name(document));
  JsonObjectReader r(document, file);
  if (r.required<std::string>("schema") == kSweepSchema) return sweep_data(r);
  return results_data(r);
}

void add_report_spans(nlohmann::ordered_json& data, const ReportSpans& spans) {
  auto& policies = data["policies"];
  for (std::size_t p = 0; p < policies.size() && p < spans.exposed_comm_s().size(); ++p) {
    const double n = static_cast<double>(std::max<std::size_t>(1, spans.iterations()[p]));
    OrderedJson exposed = OrderedJson::array();
    for (double s : spans.exposed_comm_s()[p]) exposed.push_back(results_number(s / n));
    policies[p]["gpu_exposed_comm_s"] = std::move(exposed);
  }
  OrderedJson timeline{{"iteration", 0}, {"gpus_shown", 0}, {"gpus", 0}};
  timeline["kinds"] = timeline["communication"] = OrderedJson::array();
  for (int k = 0; k <= static_cast<int>(program::WorkKind::CpRing); ++k) {
    const auto kind = static_cast<program::WorkKind>(k);
    timeline["kinds"].push_back(program::to_string(kind));
    timeline["communication"].push_back(program::is_communication(kind));
  }
  timeline["panels"] = OrderedJson::array();
  std::vector<std::string> shown{data["baseline"].get<std::string>()};
  if (data["winner"].is_string() && data["winner"] != data["baseline"]) shown.push_back(data["winner"]);
  std::size_t gpus = 0;
  for (const std::string& label : shown) {
    for (std::size_t p = 0; p < policies.size() && p < spans.first_spans().size(); ++p) {
      if (policies[p]["name"] != label) continue;
      gpus = std::max(gpus, policies[p]["gpu_busy_s"].size());
      OrderedJson panel{{"policy", label}, {"seconds", results_number(spans.first_seconds()[p])}};
      panel["spans"] = OrderedJson::array();
      for (const program::GpuSpan& s : spans.first_spans()[p])
        panel["spans"].push_back({s.gpu, results_number(s.start_s), results_number(s.end_s), static_cast<int>(s.kind)});
      timeline["panels"].push_back(std::move(panel));
    }
  }
  timeline["gpus"] = gpus;
  timeline["gpus_shown"] = std::min<std::size_t>(gpus, kReportTimelineGpus);
  data["timeline"] = std::move(timeline);
}

}  // namespace lcsim
