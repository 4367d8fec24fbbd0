// Strict reading of the HBP policy's options (documented in hbp_policy.hpp).
#include <cmath>
#include <cstdint>

#include "base/errors.hpp"
#include "policies/hbp/hbp_policy.hpp"

namespace lcsim::hbp {
namespace {

constexpr std::int64_t kMaxTokens = std::int64_t{1} << 40;
constexpr std::int64_t kMaxDegree = 1 << 20;

/// A non-empty array of integers in [lo, hi], strictly ascending.
std::vector<std::int64_t> ascending_integers(JsonObjectReader& reader, std::string_view key, std::int64_t lo,
                                             std::int64_t hi) {
  const auto& array = reader.value(key);
  if (!array.is_array() || array.empty())
    reader.fail(key, "expected a non-empty array of integers, got " + json_type_name(array));
  std::vector<std::int64_t> values;
  for (std::size_t i = 0; i < array.size(); ++i) {
    const auto& item = array[i];
    const std::string at = reader.file() + ": " + reader.path(key) + "[" + std::to_string(i) + "]: ";
    std::int64_t v = 0;
    if (item.is_number_integer()) {
      v = item.get<std::int64_t>();
    } else if (item.is_number_float()) {
      // Range first: casting a double outside int64 is undefined.
      const double d = item.get<double>();
      if (!(d >= static_cast<double>(lo) && d <= static_cast<double>(hi)))
        throw InputError(at + "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                         item.dump());
      if (d != std::floor(d)) throw InputError(at + "expected an integer, got " + item.dump());
      v = static_cast<std::int64_t>(d);
    } else {
      throw InputError(at + "expected an integer, got " + json_type_name(item));
    }
    if (v < lo || v > hi)
      throw InputError(at + "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                       std::to_string(v));
    if (!values.empty() && v <= values.back())
      throw InputError(at + "must be greater than the previous entry " + std::to_string(values.back()) +
                       " (strictly ascending)");
    values.push_back(v);
  }
  return values;
}

std::vector<GroupSpec> read_groups(JsonObjectReader& reader) {
  const auto& array = reader.value("groups");
  if (!array.is_array() || array.empty())
    reader.fail("groups", "expected a non-empty array of {length_tokens, sp, gc_layers}, got " + json_type_name(array));
  std::vector<GroupSpec> groups;
  for (std::size_t i = 0; i < array.size(); ++i) {
    JsonObjectReader item = reader.child(array[i], reader.path("groups") + "[" + std::to_string(i) + "]");
    GroupSpec g;
    g.length = item.integer_in("length_tokens", 1, kMaxTokens);
    g.sp = static_cast<int>(item.integer_in("sp", 1, kMaxDegree));
    if (item.has("gc_layers")) g.gc_layers = static_cast<int>(item.integer_in("gc_layers", 0, kMaxDegree));
    item.finish();
    if (!groups.empty() && g.length <= groups.back().length)
      item.fail("length_tokens", "must be greater than the previous group's " + std::to_string(groups.back().length) +
                                     " (groups ascend)");
    groups.push_back(g);
  }
  return groups;
}

}  // namespace

std::unique_ptr<Policy> make_hbp_policy(const PolicySpec& spec) {
  auto reader = policy_options(spec);
  HbpOptions options;
  options.file = spec.file;
  options.path = reader.path();
  if (reader.has("packing_lengths_tokens")) {
    std::vector<Tokens> lengths;
    for (auto v : ascending_integers(reader, "packing_lengths_tokens", 1, kMaxTokens)) lengths.push_back(v);
    options.packing_lengths = std::move(lengths);
  }
  if (reader.has("sp_degrees")) {
    std::vector<int> degrees;
    for (auto v : ascending_integers(reader, "sp_degrees", 1, kMaxDegree)) degrees.push_back(static_cast<int>(v));
    options.sp_degrees = std::move(degrees);
  }
  if (reader.has("groups")) {
    for (const char* excluded : {"packing_lengths_tokens", "sp_degrees", "hierarchical"})
      if (reader.has(excluded))
        reader.fail(excluded, "cannot be combined with \"groups\" (fixed groups replace auto-selection)");
    options.groups = read_groups(reader);
  }
  options.hierarchical = reader.optional<bool>("hierarchical", true);
  options.balance = reader.optional<bool>("balance", true);
  if (reader.has("curriculum_iterations"))
    options.curriculum_iterations = static_cast<int>(reader.integer_in("curriculum_iterations", 0, INT32_MAX));
  if (reader.has("tokens_per_batch")) options.tokens_per_batch = reader.integer_in("tokens_per_batch", 1, kMaxTokens);
  options.isf = baselines::read_isf_options(reader);
  reader.finish();
  return std::make_unique<HbpPolicy>(std::move(options));
}

}  // namespace lcsim::hbp
