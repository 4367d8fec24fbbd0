#include "formats/tune_spec.hpp"

#include <algorithm>
#include <cstdint>

#include "base/json_reader.hpp"

namespace lcsim {
namespace {

using Json = nlohmann::json;

std::vector<int> degrees(JsonObjectReader& r, std::string_view key) {
  const Json& list = r.value(key);
  if (!list.is_array() || list.empty()) r.fail(key, "expected a non-empty array of degrees");
  std::vector<int> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_number_integer() || list[i].get<std::int64_t>() < 1 || list[i].get<std::int64_t>() > (1 << 20))
      r.fail(std::string(key) + "[" + std::to_string(i) + "]", "expected an integer >= 1, got " + list[i].dump());
    const int d = list[i].get<int>();
    if (std::find(out.begin(), out.end(), d) != out.end())
      r.fail(std::string(key) + "[" + std::to_string(i) + "]", "duplicate degree " + std::to_string(d));
    out.push_back(d);
  }
  return out;
}

std::vector<TuneKnob> knobs(JsonObjectReader r, bool policy_options) {
  std::vector<TuneKnob> out;
  for (const auto& [path, values] : r.node().items()) {
    const bool option = path.rfind(kTuneOptionsPrefix, 0) == 0;
    if (option && !policy_options)
      r.fail(path, "a policy's options are tuned under \"policies\": {LABEL: {\"" + path + "\": [...]}}");
    if (path.empty() || path.front() == '.' || path.back() == '.' || path.find("..") != std::string::npos)
      r.fail(path, "'" + path + "' is not a dotted key path (e.g. training.bucket_size_tokens)");
    if (path.rfind("parallel.", 0) == 0) r.fail(path, "the layout is tuned under \"layout\"");
    if (!values.is_array() || values.empty()) r.fail(path, "expected a non-empty array of values");
    out.push_back({path, std::vector<Json>(values.begin(), values.end())});
    r.value(path);  // mark it read
  }
  r.finish();
  return out;
}

}  // namespace

TuneSpec tune_spec_from_json(const Json& tune, const std::string& file) {
  JsonObjectReader r(tune, file, "tune");
  TuneSpec spec;
  if (r.has("layout")) {
    JsonObjectReader layout = r.object("layout");
    if (layout.has("cp")) spec.cp = degrees(layout, "cp");
    if (layout.has("tp")) spec.tp = degrees(layout, "tp");
    if (layout.has("pp")) spec.pp = degrees(layout, "pp");
    layout.finish();
  }
  if (r.has("keys")) spec.keys = knobs(r.object("keys"), false);
  if (r.has("policies")) {
    JsonObjectReader policies = r.object("policies");
    for (const auto& [label, node] : policies.node().items())
      spec.policies[label] = knobs(policies.object(label), true);
    policies.finish();
  }
  if (r.has("simulate_top")) spec.simulate_top = static_cast<int>(r.integer_in("simulate_top", 0, 1000));
  r.finish();
  return spec;
}

}  // namespace lcsim
