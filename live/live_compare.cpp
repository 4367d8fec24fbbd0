#include "live/live_compare.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace lcsim {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double rate(std::int64_t tokens, double seconds) {
  return std::isfinite(seconds) && seconds > 0 ? static_cast<double>(tokens) / seconds : kNaN;
}

}  // namespace

double relative_error(double predicted, double measured) {
  if (!std::isfinite(measured) || !(measured > 0) || !std::isfinite(predicted)) return kNaN;
  return (predicted - measured) / measured;
}

std::vector<LiveComparison> compare_live(const std::vector<LiveSeries>& series, const std::string& baseline) {
  std::vector<LiveComparison> out;
  const LiveComparison* base = nullptr;
  for (const LiveSeries& s : series) {
    if (s.tokens.size() != s.predicted_s.size() || s.tokens.size() != s.measured_s.size())
      throw std::invalid_argument("compare_live: " + s.label + ": tokens, predicted and measured differ in length");
    LiveComparison c;
    c.label = s.label;
    std::int64_t tokens = 0;
    double abs_error = 0;
    for (std::size_t i = 0; i < s.tokens.size(); ++i) {
      tokens += s.tokens[i];
      c.predicted_total_s += s.predicted_s[i];
      c.measured_total_s += s.measured_s[i];  // NaN sticks: no total without every iteration
      c.error.push_back(relative_error(s.predicted_s[i], s.measured_s[i]));
      if (std::isfinite(c.error.back())) {
        abs_error += std::abs(c.error.back());
        ++c.measured_iterations;
      }
    }
    c.mape = c.measured_iterations > 0 ? abs_error / c.measured_iterations : kNaN;
    c.predicted_tokens_per_s = rate(tokens, c.predicted_total_s);
    c.measured_tokens_per_s = rate(tokens, c.measured_total_s);
    out.push_back(std::move(c));
  }
  for (const LiveComparison& c : out)
    if (c.label == baseline) base = &c;
  if (base == nullptr) throw std::invalid_argument("compare_live: no series is the baseline '" + baseline + "'");
  const double base_predicted = base->predicted_tokens_per_s;
  const double base_measured = base->measured_tokens_per_s;
  for (LiveComparison& c : out) {
    c.predicted_speedup = c.predicted_tokens_per_s / base_predicted;
    c.measured_speedup = c.measured_tokens_per_s / base_measured;
  }
  return out;
}

}  // namespace lcsim
