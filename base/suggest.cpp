#include "base/suggest.hpp"

#include <algorithm>
#include <cctype>
#include <numeric>

namespace lcsim {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string loose_name(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == '-' || c == '_' || c == '.' || c == ' ') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

std::string nearest_name(std::string_view name, const std::vector<std::string>& known) {
  // Input may be anything: a name too long to be a misspelling is compared with nothing.
  constexpr std::size_t kLongest = 200;
  if (name.empty() || name.size() > kLongest) return "";
  const std::string loose = loose_name(name);
  for (const std::string& k : known)
    if (loose_name(k) == loose) return k;
  // A name that one known name starts or ends with ("H100" for "H100-SXM") is a better guess than a near one
  // ("H200"): rank those first, then by distance.
  std::string best;
  std::size_t best_distance = 0;
  bool best_part = false;
  for (const std::string& k : known) {
    const std::string other = loose_name(k);
    const std::size_t longer = std::max(loose.size(), other.size());
    const std::size_t distance = edit_distance(loose, other);
    const bool near = distance <= std::max<std::size_t>(2, longer / 3);
    const std::size_t shorter = std::min(loose.size(), other.size());
    const bool part =
        2 * shorter >= longer && !loose.empty() && !other.empty() &&
        (other.starts_with(loose) || loose.starts_with(other) || other.ends_with(loose) || loose.ends_with(other));
    if (!near && !part) continue;
    if (best.empty() || (part && !best_part) || (part == best_part && distance < best_distance)) {
      best = k;
      best_distance = distance;
      best_part = part;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view name, const std::vector<std::string>& known) {
  const std::string nearest = nearest_name(name, known);
  return nearest.empty() ? "" : " (did you mean `" + nearest + "`?)";
}

}  // namespace lcsim
