#include "studies/sweep.hpp"

#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <limits>
#include <sstream>

#include "base/errors.hpp"
#include "base/files.hpp"
#include "base/json_reader.hpp"
#include "formats/scenario.hpp"
#include "studies/sampled_worlds.hpp"

namespace lcsim {
namespace {

using Json = nlohmann::json;

std::string describe(const std::vector<std::pair<std::string, Json>>& coordinates) {
  std::string out;
  for (const auto& [axis, value] : coordinates)
    out += (out.empty() ? "" : ", ") + axis + "=" + (value.is_object() ? axis_value_text(value) : value.dump());
  return out;
}

int int_of(const Json& document, const char* a, const char* b, int fallback) {
  return document.contains(a) && document[a].contains(b) ? document[a][b].get<int>() : fallback;
}

// Applies one axis value to a scenario document. Messages about the value name the axis; the scenario parser
// checks everything else afterwards.
void apply_axis(Json& doc, const std::string& axis, const Json& value, const std::string& where) {
  const auto need_number = [&]() {
    // Up to INT_MAX: the scenario's counts are ints, and a larger value must not wrap to a negative one.
    if (!value.is_number_integer() || value.get<std::int64_t>() <= 0 ||
        value.get<std::int64_t>() > std::numeric_limits<int>::max())
      throw InputError(where + ": axis " + axis + " takes positive integers up to " +
                       std::to_string(std::numeric_limits<int>::max()) + ", got " + excerpt(value.dump()));
  };
  if (axis == "cluster") {
    if (!value.is_object() || !value.contains("label") || !value["label"].is_string() ||
        value["label"].get<std::string>().empty())
      throw InputError(where + ": axis cluster takes objects {\"label\": NAME, cluster keys...}, got " +
                       excerpt(value.dump()));
    for (const auto& [key, setting] : value.items()) {
      if (key == "label") continue;
      if (setting.is_null())
        doc["cluster"].erase(key);
      else
        doc["cluster"][key] = setting;
    }
  } else if (axis == "gpus") {
    need_number();
    const int gpus = value.get<int>();
    const int per_node = doc["cluster"].value("gpus_per_node", 8);
    const int cp = int_of(doc, "parallel", "cp", 1), tp = int_of(doc, "parallel", "tp", 1),
              pp = int_of(doc, "parallel", "pp", 1);
    if (gpus < per_node) {
      doc["cluster"]["gpus_per_node"] = gpus;
      doc["cluster"]["nodes"] = 1;
    } else if (gpus % per_node != 0) {
      throw InputError(where + ": gpus=" + std::to_string(gpus) + " is not a multiple of cluster.gpus_per_node (" +
                       std::to_string(per_node) + ")");
    } else {
      doc["cluster"]["nodes"] = gpus / per_node;
    }
    if (gpus % (cp * tp * pp) != 0)
      throw InputError(where + ": gpus=" + std::to_string(gpus) + " is not a multiple of cp x tp x pp (" +
                       std::to_string(cp * tp * pp) + ")");
    doc["parallel"]["dp"] = gpus / (cp * tp * pp);
  } else if (axis == "context_length_tokens" || axis == "bucket_size_tokens") {
    need_number();
    doc["training"][axis] = value;
  } else if (axis == "tokens_per_iteration" || axis == "global_batch_sequences") {
    need_number();
    doc["training"].erase("tokens_per_iteration");
    doc["training"].erase("global_batch_sequences");
    doc["training"][axis] = value;
  } else if (axis == "tokens_per_gpu") {
    need_number();
    doc["training"].erase("global_batch_sequences");
    const auto& cluster = doc["cluster"];
    const double tokens = static_cast<double>(value.get<std::int64_t>()) * cluster.value("nodes", 1.0) *
                          cluster.value("gpus_per_node", 8.0);
    // The scenario parser bounds it further; here the product only must not overflow.
    if (!(tokens < 9e18))
      throw InputError(where + ": axis tokens_per_gpu: " + value.dump() + " tokens x GPUs overflows");
    doc["training"]["tokens_per_iteration"] = static_cast<std::int64_t>(tokens);
  } else if (axis == "batch_size_per_dp") {
    need_number();
    doc["training"].erase("tokens_per_iteration");
    doc["training"]["global_batch_sequences"] = value.get<std::int64_t>() * int_of(doc, "parallel", "dp", 1);
  } else if (axis == "dataset" || axis == "model") {
    if (!value.is_string()) throw InputError(where + ": axis " + axis + " takes names, got " + value.dump());
    if (axis == "dataset") {
      const bool truncate = doc["dataset"].value("truncate_to_context", false);
      doc["dataset"] = Json{{"distribution", value}};
      if (truncate) doc["dataset"]["truncate_to_context"] = true;
    } else {
      doc["model"] = value;
    }
  }
}

}  // namespace

void set_dotted_path(Json& doc, const std::string& path, const Json& value) {
  Json* node = &doc;
  std::size_t start = 0;
  for (;;) {
    const std::size_t dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!node->is_object()) throw InputError("'" + path + "': " + key + " is not inside an object");
    if (dot == std::string::npos) {
      if (value.is_null())
        node->erase(key);
      else
        (*node)[key] = value;
      return;
    }
    if (!node->contains(key)) throw InputError("'" + path + "': the scenario has no '" + path.substr(0, dot) + "'");
    node = &(*node)[key];
    start = dot + 1;
  }
}

namespace {

/// Calls `visit` on every file path a scenario document names (its profile, its dataset trace), where it is a
/// string: the one list of them that making paths absolute or relative and listing the inputs share.
template <typename Document, typename Visit>
void for_each_scenario_path(Document& doc, Visit visit) {
  if (!doc.is_object()) return;
  if (doc.contains("profile") && doc["profile"].is_string()) visit(doc["profile"]);
  if (doc.contains("dataset") && doc["dataset"].is_object() && doc["dataset"].contains("trace") &&
      doc["dataset"]["trace"].is_string())
    visit(doc["dataset"]["trace"]);
}

}  // namespace

Json scenario_with_absolute_paths(Json doc, const std::string& base_file) {
  for_each_scenario_path(doc, [&](Json& path) {
    // An empty path stays empty, for the loader to refuse as such ("profile: is empty"), not as the folder.
    if (path.get<std::string>().empty()) return;
    path = std::filesystem::absolute(resolve_scenario_path(base_file, path.get<std::string>()))
               .lexically_normal()
               .string();
  });
  return doc;
}

Json scenario_with_paths_relative_to(Json doc, const std::string& scenario_file) {
  const auto folder = std::filesystem::absolute(scenario_file).parent_path().lexically_normal();
  for_each_scenario_path(doc, [&](Json& path) {
    path = std::filesystem::path(path.get<std::string>()).lexically_relative(folder).string();
  });
  return doc;
}

std::vector<std::string> scenario_document_files(const Json& doc) {
  std::vector<std::string> files;
  for_each_scenario_path(doc, [&](const Json& path) { files.push_back(path.get<std::string>()); });
  return files;
}

std::string axis_value_text(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("label") && value["label"].is_string()) return value["label"];
  return value.dump();
}

const std::vector<std::string>& sweep_axis_names() {
  static const std::vector<std::string> names = {"cluster",
                                                 "gpus",
                                                 "context_length_tokens",
                                                 "tokens_per_iteration",
                                                 "global_batch_sequences",
                                                 "batch_size_per_dp",
                                                 "tokens_per_gpu",
                                                 "bucket_size_tokens",
                                                 "dataset",
                                                 "model"};
  return names;
}

Sweep sweep_from_json(const Json& document, const std::string& file) {
  JsonObjectReader root(document, file);
  Sweep sweep;
  sweep.file = file;
  sweep.name = root.required<std::string>("name");
  sweep.description = root.optional<std::string>("description", "");
  sweep.base_file = resolve_scenario_path(file, root.required<std::string>("base"));
  std::error_code not_same;
  if (std::filesystem::equivalent(sweep.base_file, file, not_same))
    root.fail("base", "is this sweep file itself; name the base scenario the sweep varies");
  sweep.mode = root.optional<std::string>("mode", "simulate");
  if (sweep.mode != "simulate" && sweep.mode != "plan") root.fail("mode", "expected \"simulate\" or \"plan\"");
  if (root.has("iterations")) sweep.iterations = static_cast<int>(root.integer_in("iterations", 1, kMaxIterations));
  if (root.has("samples")) sweep.samples = static_cast<int>(root.integer_in("samples", 1, kMaxSamples));
  const Json& axes = root.value("axes");
  if (!axes.is_array() || axes.empty()) root.fail("axes", "expected a non-empty array of {name, values}");
  for (std::size_t i = 0; i < axes.size(); ++i) {
    JsonObjectReader item = root.child(axes[i], root.path("axes") + "[" + std::to_string(i) + "]");
    SweepAxis axis;
    axis.name = item.required<std::string>("name");
    const auto& names = sweep_axis_names();
    if (std::find(names.begin(), names.end(), axis.name) == names.end()) {
      std::string known;
      for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
      item.fail("name", "unknown axis '" + axis.name + "' (known: " + known + ")");
    }
    for (const auto& existing : sweep.axes)
      if (existing.name == axis.name) item.fail("name", "axis '" + axis.name + "' appears twice");
    const Json& values = item.value("values");
    if (!values.is_array() || values.empty()) item.fail("values", "expected a non-empty array");
    axis.values.assign(values.begin(), values.end());
    item.finish();
    sweep.axes.push_back(std::move(axis));
  }
  if (sweep_point_count(sweep) > kMaxSweepPoints)
    root.fail("axes", "more than " + std::to_string(kMaxSweepPoints) +
                          " points (the product of the axes' sizes), the most a sweep may have");
  root.finish();
  return sweep;
}

Sweep load_sweep(const std::string& file) {
  return sweep_from_json(parse_json_file(file), file);
}

std::size_t sweep_point_count(const Sweep& sweep) {
  // Stops growing past the limit, so that no product of many long axes overflows.
  std::size_t total = 1;
  for (const auto& axis : sweep.axes)
    if (total <= kMaxSweepPoints) total *= axis.values.size();
  return total;
}

std::vector<std::pair<std::string, Json>> sweep_point_coordinates(const Sweep& sweep, std::size_t index) {
  std::size_t rest = index;
  std::vector<std::size_t> digits(sweep.axes.size());
  for (std::size_t a = sweep.axes.size(); a-- > 0;) {
    digits[a] = rest % sweep.axes[a].values.size();
    rest /= sweep.axes[a].values.size();
  }
  std::vector<std::pair<std::string, Json>> coordinates;
  for (std::size_t a = 0; a < sweep.axes.size(); ++a)
    coordinates.emplace_back(sweep.axes[a].name, sweep.axes[a].values[digits[a]]);
  return coordinates;
}

std::vector<SweepPoint> expand_sweep(const Sweep& sweep) {
  const Json base = scenario_with_absolute_paths(parse_json_file(sweep.base_file), sweep.base_file);
  const std::size_t total = sweep_point_count(sweep);

  std::vector<SweepPoint> points;
  points.reserve(total);
  for (std::size_t flat = 0; flat < total; ++flat) {
    SweepPoint point;
    point.index = static_cast<int>(flat);
    point.coordinates = sweep_point_coordinates(sweep, flat);

    const std::string where = sweep.file + ": point " + std::to_string(flat) + " (" + describe(point.coordinates) + ")";
    point.scenario = base;
    // The cluster's keys first (gpus reads gpus_per_node), then the GPU count (batch_size_per_dp and tokens_per_gpu
    // depend on what it sets), then the rest.
    const auto rank = [](const std::string& axis) { return axis == "cluster" ? 0 : axis == "gpus" ? 1 : 2; };
    for (int pass = 0; pass < 3; ++pass)
      for (const auto& [axis, value] : point.coordinates)
        if (rank(axis) == pass) apply_axis(point.scenario, axis, value, where);
    if (sweep.iterations > 0) point.scenario["training"]["iterations"] = sweep.iterations;
    point.scenario["name"] = base.value("name", std::string("scenario")) + " [" + describe(point.coordinates) + "]";
    scenario_from_json(point.scenario, where);  // throws naming the point and its coordinates
    points.push_back(std::move(point));
  }
  return points;
}

std::filesystem::path sweep_point_path(const std::filesystem::path& dir, std::size_t i, const char* suffix) {
  std::ostringstream name;
  name << "point-" << std::setw(4) << std::setfill('0') << i << suffix;
  return dir / name.str();
}

void write_sweep_point_scenario(const std::filesystem::path& dir, const SweepPoint& point) {
  write_file_atomically(sweep_point_path(dir, static_cast<std::size_t>(point.index), ".json").string(),
                        point.scenario.dump(2) + "\n");
}

}  // namespace lcsim
