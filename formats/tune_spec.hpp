#pragma once
// A scenario's optional "tune" object: which keys `lcsim tune` may change (format: studies/tune.hpp, docs/tune.md).
// Apart from tune.hpp so that the scenario, which holds one, does not include the search that reads scenarios.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lcsim {

/// A knob path with this prefix is the tuned policy's own option ("options.packing_length_tokens").
inline constexpr const char* kTuneOptionsPrefix = "options.";

/// One free key and the values it may take: a dotted scenario path ("training.bucket_size_tokens"), or
/// "options.<name>" for the tuned policy's own option.
struct TuneKnob {
  std::string path;
  std::vector<nlohmann::json> values;
};

struct TuneSpec {
  std::vector<int> cp, tp, pp;                            ///< empty: the default space for that degree
  std::vector<TuneKnob> keys;                             ///< free for every policy
  std::map<std::string, std::vector<TuneKnob>> policies;  ///< by policy label, on top of `keys`
  int simulate_top = 3;
};

/// Strict reading of a scenario's "tune" object (InputError naming `file` and the key).
TuneSpec tune_spec_from_json(const nlohmann::json& tune, const std::string& file);

}  // namespace lcsim
