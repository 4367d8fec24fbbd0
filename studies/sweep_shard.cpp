#include "studies/sweep_shard.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <map>

#include "base/errors.hpp"
#include "base/fnv1a.hpp"
#include "base/json_reader.hpp"

namespace lcsim {
namespace {

using Json = nlohmann::json;

std::optional<int> positive_decimal(std::string_view text) {
  if (text.empty() || !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 1) return std::nullopt;
  return value;
}

std::string digest_text(std::uint64_t hash) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return std::string("fnv1a64:") + text;
}

std::string describe(const SweepShard& shard) {
  return "slice " + std::to_string(shard.index) + " of " + std::to_string(shard.count);
}

}  // namespace

std::optional<SweepShard> parse_sweep_shard(const std::string& text) {
  const auto slash = text.find('/');
  if (slash == std::string::npos) return std::nullopt;
  const auto k = positive_decimal(std::string_view(text).substr(0, slash));
  const auto n = positive_decimal(std::string_view(text).substr(slash + 1));
  if (!k || !n || *k > *n) return std::nullopt;
  return SweepShard{*k, *n};
}

bool in_sweep_shard(std::size_t point_index, const SweepShard& shard) {
  return point_index % static_cast<std::size_t>(shard.count) == static_cast<std::size_t>(shard.index - 1);
}

std::string scenario_digest(const Json& scenario) {
  return digest_text(fnv1a(scenario.dump()));
}

std::string sweep_digest(const Json& sweep_document, const std::vector<SweepPoint>& points) {
  Fnv1a hash;  // enough to tell different sweeps apart
  hash.add(sweep_document.dump());
  for (const auto& point : points) hash.add("\n").add(point.scenario.dump());
  return digest_text(hash.digest());
}

nlohmann::ordered_json shard_manifest_to_json(const SweepShardManifest& manifest) {
  nlohmann::ordered_json doc;
  doc["schema"] = kSweepShardSchema;
  doc["sweep_file"] = manifest.sweep_file;
  doc["sweep_digest"] = manifest.sweep_digest;
  doc["shard"] = manifest.shard.index;
  doc["shards"] = manifest.shard.count;
  doc["points_total"] = manifest.points_total;
  doc["sweep"] = nlohmann::ordered_json::parse(manifest.sweep.dump());
  doc["points"] = nlohmann::ordered_json::array();
  for (const auto& point : manifest.points)
    doc["points"].push_back(
        {{"index", point.index}, {"exit_status", point.exit_status}, {"scenario_digest", point.scenario_digest}});
  return doc;
}

SweepShardManifest shard_manifest_from_json(const Json& document, const std::string& file) {
  if (!document.is_object()) throw InputError(file + ": expected a JSON object (schema " + kSweepShardSchema + ")");
  JsonObjectReader root(document, file);
  const std::string schema = root.required<std::string>("schema");
  if (schema != kSweepShardSchema)
    root.fail("schema", "expected \"" + std::string(kSweepShardSchema) + "\", got \"" + schema + "\"");
  SweepShardManifest manifest;
  manifest.sweep_file = root.required<std::string>("sweep_file");
  manifest.sweep_digest = root.required<std::string>("sweep_digest");
  manifest.shard.count = static_cast<int>(root.integer_in("shards", 1, INT32_MAX));
  manifest.shard.index = static_cast<int>(root.integer_in("shard", 1, manifest.shard.count));
  manifest.points_total =
      static_cast<int>(root.integer_in("points_total", 1, static_cast<std::int64_t>(kMaxSweepPoints)));
  manifest.sweep = root.value("sweep");
  if (!manifest.sweep.is_object()) root.fail("sweep", "expected the sweep file's document (an object)");
  const Json& points = root.value("points");
  if (!points.is_array()) root.fail("points", "expected an array");
  for (std::size_t i = 0; i < points.size(); ++i) {
    JsonObjectReader item = root.child(points[i], root.path("points") + "[" + std::to_string(i) + "]");
    if (!points[i].is_object()) item.fail_here("expected an object {index, exit_status, scenario_digest}");
    SweepShardPoint point;
    point.index = static_cast<int>(item.integer_in("index", 0, manifest.points_total - 1));
    point.exit_status = static_cast<int>(item.integer_in("exit_status", 0, 255));
    point.scenario_digest = item.required<std::string>("scenario_digest");
    item.finish();
    if (!in_sweep_shard(static_cast<std::size_t>(point.index), manifest.shard))
      item.fail("index", "point " + std::to_string(point.index) + " is not in " + describe(manifest.shard));
    if (!manifest.points.empty() && point.index <= manifest.points.back().index)
      item.fail("index", "point " + std::to_string(point.index) + " is listed twice or out of order");
    manifest.points.push_back(std::move(point));
  }
  root.finish();
  return manifest;
}

void check_sweep_shards(const std::vector<SweepShardFolder>& slices) {
  if (slices.empty()) throw InputError("sweep merge: no slice folders given");
  const SweepShardFolder& first = slices.front();
  const SweepShardManifest& reference = first.manifest;
  std::map<int, const SweepShardFolder*> by_index;
  for (const auto& slice : slices) {
    const SweepShardManifest& m = slice.manifest;
    const std::string what = slice.folder + " (" + describe(m.shard) + ")";
    if (m.shard.count != reference.shard.count)
      throw InputError(what + ": the sweep was cut into " + std::to_string(m.shard.count) + " slices there, but into " +
                       std::to_string(reference.shard.count) + " in " + first.folder);
    if (m.sweep_file != reference.sweep_file)
      throw InputError(what + ": a slice of " + m.sweep_file + ", but " + first.folder + " is a slice of " +
                       reference.sweep_file + " (give every slice the same SWEEP path)");
    if (m.sweep_digest != reference.sweep_digest || m.points_total != reference.points_total)
      throw InputError(what + ": a slice of a different sweep than " + first.folder + " (" + m.sweep_file +
                       " or its base scenario changed between the slices' runs: " + m.sweep_digest + " vs " +
                       reference.sweep_digest + ")");
    const auto [it, fresh] = by_index.emplace(m.shard.index, &slice);
    if (!fresh) throw InputError(what + ": duplicated, " + it->second->folder + " is " + describe(m.shard) + " too");
  }
  std::string missing;
  for (int k = 1; k <= reference.shard.count; ++k)
    if (!by_index.count(k)) missing += (missing.empty() ? "" : ", ") + std::to_string(k);
  if (!missing.empty())
    throw InputError("sweep merge: slice" + std::string(missing.find(',') == std::string::npos ? " " : "s ") + missing +
                     " of " + std::to_string(reference.shard.count) + " missing: no folder given holds " +
                     (missing.find(',') == std::string::npos ? "it" : "them") + " (a slice's folder has " +
                     kSweepShardFile + " once its run ends)");
  // Each manifest holds points of its own slice only (shard_manifest_from_json), so with every slice present once,
  // a point is missing only when a manifest lacks it.
  std::vector<const SweepShardFolder*> owner(static_cast<std::size_t>(reference.points_total), nullptr);
  for (const auto& slice : slices)
    for (const auto& point : slice.manifest.points) owner[static_cast<std::size_t>(point.index)] = &slice;
  for (std::size_t i = 0; i < owner.size(); ++i)
    if (owner[i] == nullptr) {
      const SweepShard shard{static_cast<int>(i % static_cast<std::size_t>(reference.shard.count)) + 1,
                             reference.shard.count};
      throw InputError(by_index.at(shard.index)->folder + " (" + describe(shard) + "): point " + std::to_string(i) +
                       " of " + std::to_string(reference.points_total) + " is missing from its " + kSweepShardFile);
    }
}

}  // namespace lcsim
