#pragma once
// "Did you mean": the known name nearest a misspelt one, for messages about unknown keys and names.
#include <string>
#include <string_view>
#include <vector>

namespace lcsim {

/// Levenshtein distance between `a` and `b` (insertions, deletions and substitutions of one character).
std::size_t edit_distance(std::string_view a, std::string_view b);

/// `name` as names compare loosely: lower case, without '-', '_', '.' and spaces ("Llama-3.1-8B" -> "llama318b").
std::string loose_name(std::string_view name);

/// The known name `name` most likely meant, "" when none is near: one equal to it loosely (loose_name); else,
/// first, one that starts or ends with it (or it with the known name) when that covers at least half of the
/// longer one, then the nearest by edit distance within a third of the longer name (at least 2). Ties: the
/// earlier known name.
std::string nearest_name(std::string_view name, const std::vector<std::string>& known);

/// " (did you mean `X`?)" for nearest_name's X, "" when there is none: appended to an "unknown ..." message.
std::string did_you_mean(std::string_view name, const std::vector<std::string>& known);

}  // namespace lcsim
