#include "policies/core/cost_view_support.hpp"

#include <cmath>

#include "model/fitting.hpp"

namespace lcsim::views {

std::vector<Tokens> sampled_lengths(Tokens lo, Tokens hi, int count) {
  std::vector<Tokens> lengths;
  for (double x : log_spaced(static_cast<double>(lo), static_cast<double>(hi), count)) {
    const auto s = static_cast<Tokens>(std::llround(x));
    if (lengths.empty() || s > lengths.back()) lengths.push_back(s);
  }
  return lengths;
}

}  // namespace lcsim::views
