#include "calibrate/fit/fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "base/errors.hpp"

namespace lcsim {

std::vector<bool> held_out_mask(std::size_t points, int every_k) {
  if (every_k < 0 || every_k == 1) throw std::invalid_argument("held_out_mask: every_k must be 0 or >= 2");
  std::vector<bool> mask(points, false);
  if (every_k == 0) return mask;
  for (std::size_t i = 1; i + 1 < points; i += static_cast<std::size_t>(every_k)) mask[i] = true;
  return mask;
}

namespace {

struct Split {
  std::vector<double> fit_x, fit_y, held_x, held_y;
};

Split split(std::span<const double> x, std::span<const double> y, int every_k) {
  if (x.size() != y.size()) throw std::invalid_argument("held-out fit: x and y differ in size");
  for (std::size_t i = 1; i < x.size(); ++i) {
    if (!(x[i] > x[i - 1])) throw std::invalid_argument("held-out fit: x must be strictly increasing");
  }
  const auto mask = held_out_mask(x.size(), every_k);
  Split s;
  for (std::size_t i = 0; i < x.size(); ++i) {
    (mask[i] ? s.held_x : s.fit_x).push_back(x[i]);
    (mask[i] ? s.held_y : s.fit_y).push_back(y[i]);
  }
  return s;
}

template <class Fit>
std::optional<double> held_out_error(const Fit& fit, const Split& s) {
  if (s.held_x.empty()) return std::nullopt;
  std::vector<double> predicted;
  for (double xi : s.held_x) predicted.push_back(fit(xi));
  return mean_absolute_percentage_error(predicted, s.held_y);
}

}  // namespace

HeldOutFit<LinearFit> fit_linear_held_out(std::span<const double> x, std::span<const double> y, int every_k) {
  const Split s = split(x, y, every_k);
  const LinearFit fit = fit_linear(s.fit_x, s.fit_y);
  return {fit, held_out_error(fit, s)};
}

HeldOutFit<QuadraticFit> fit_quadratic_held_out(std::span<const double> x, std::span<const double> y, int every_k) {
  const Split s = split(x, y, every_k);
  const QuadraticFit fit = fit_quadratic(s.fit_x, s.fit_y);
  return {fit, held_out_error(fit, s)};
}

CollectiveFit PiecewiseCollectiveFit::to_profile_entry(LinkClass link, bool measured) const {
  CollectiveFit fit;
  fit.op = op;
  fit.link = link;
  fit.group_size = group_size;
  fit.segments = segments;
  fit.fit_mape = held_out_mape;
  fit.measured = measured;
  return fit;
}

namespace {

constexpr int kBreakpointCandidates = 256;
constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr double kNegligibleSquaredError = 1e-18;

/// A continuous piecewise-linear time model t(x) = a + b1 min(x, x_b) + b2 max(0, x - x_b); one segment when
/// x_b is infinite (b2 unused).
struct Hinge {
  double a = 0, b1 = 0, b2 = 0;
  double breakpoint = kInfinity;
  double sse = kInfinity;  ///< sum of squared relative errors on the fitted points

  double operator()(double x) const {
    return a + b1 * std::min(x, breakpoint) + (x > breakpoint ? b2 * (x - breakpoint) : 0);
  }
  bool valid() const {
    const bool second_ok = std::isinf(breakpoint) || (b2 > 0 && a + (b1 - b2) * breakpoint >= 0);
    return a >= 0 && b1 > 0 && second_ok;
  }
};

double relative_sse(const Hinge& h, std::span<const double> x, std::span<const double> y) {
  double sse = 0;
  for (std::size_t i = 0; i < x.size(); ++i) sse += std::pow((h(x[i]) - y[i]) / y[i], 2);
  return sse;
}

/// Least squares for a given breakpoint; the intercept is dropped (latency 0) when it would come out negative.
Hinge fit_hinge(std::span<const double> x, std::span<const double> y, double breakpoint) {
  std::vector<double> low, high;
  for (double xi : x) {
    low.push_back(std::min(xi, breakpoint));
    high.push_back(xi > breakpoint ? xi - breakpoint : 0);
  }
  const bool one_segment = std::isinf(breakpoint);
  std::vector<std::vector<double>> columns = {std::vector<double>(x.size(), 1.0), low};
  if (!one_segment) columns.push_back(high);
  auto c = relative_least_squares(columns, y);
  Hinge h{c[0], c[1], one_segment ? 0 : c[2], breakpoint};
  if (h.a < 0) {
    columns.erase(columns.begin());
    c = relative_least_squares(columns, y);
    h = Hinge{0, c[0], one_segment ? 0 : c[1], breakpoint};
  }
  h.sse = relative_sse(h, x, y);
  return h;
}

double aic(double sse, std::size_t n, int parameters) {
  const double points = static_cast<double>(n);
  // Relative errors below 1e-9 are rounding, not signal: an exact fit must not win by the noise of the last bit.
  return points * std::log(std::max(sse, points * kNegligibleSquaredError) / points) + 2 * parameters;
}

[[noreturn]] void fail(CollectiveOp op, const std::string& message) {
  throw InputError(std::string(to_string(op)) + " fit: " + message);
}

}  // namespace

PiecewiseCollectiveFit fit_collective_segments(std::span<const CollectiveSample> samples, CollectiveOp op,
                                               int group_size, int every_k) {
  if (group_size < 2) fail(op, "group size must be >= 2");
  std::vector<CollectiveSample> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& l, const auto& r) { return l.bytes < r.bytes; });
  std::vector<double> x, y;
  for (const auto& s : sorted) {
    if (!(s.bytes > 0) || !(s.seconds > 0)) fail(op, "sizes and times must be positive");
    if (!x.empty() && s.bytes == x.back()) fail(op, "two samples of " + std::to_string(s.bytes) + " bytes");
    x.push_back(s.bytes);
    y.push_back(s.seconds);
  }
  const Split s = split(x, y, every_k);
  const std::size_t n = s.fit_x.size();
  if (n < 2) fail(op, "needs at least 2 fitted points, got " + std::to_string(n));

  Hinge best = fit_hinge(s.fit_x, s.fit_y, kInfinity);
  if (!best.valid()) fail(op, "times do not grow with size");
  if (n >= 4) {
    // >= 2 fitted points on each side: x_b in [x_1, x_{n-2}).
    const double best_one_aic = aic(best.sse, n, 2);
    Hinge best_two;
    // A log grid, plus the fitted sizes themselves: a protocol switch often sits exactly at a measured size.
    auto candidates = log_spaced(s.fit_x[1], s.fit_x[n - 2], kBreakpointCandidates);
    candidates.insert(candidates.end(), s.fit_x.begin() + 1, s.fit_x.end() - 2);
    for (double breakpoint : candidates) {
      if (breakpoint >= s.fit_x[n - 2]) continue;
      const Hinge h = fit_hinge(s.fit_x, s.fit_y, breakpoint);
      if (h.valid() && h.sse < best_two.sse) best_two = h;
    }
    if (best_two.sse < kInfinity && aic(best_two.sse, n, 4) < best_one_aic) best = best_two;
  }

  PiecewiseCollectiveFit result;
  result.op = op;
  result.group_size = group_size;
  const double factor = bus_factor(op, group_size);
  const auto bus_GBps = [factor](double seconds_per_byte) { return factor / seconds_per_byte / 1e9; };
  if (std::isinf(best.breakpoint)) {
    result.segments.push_back({kInfinity, best.a * 1e6, bus_GBps(best.b1)});
  } else {
    result.segments.push_back({best.breakpoint, best.a * 1e6, bus_GBps(best.b1)});
    const double second_latency = best.a + (best.b1 - best.b2) * best.breakpoint;
    result.segments.push_back({kInfinity, second_latency * 1e6, bus_GBps(best.b2)});
  }
  const CollectiveFit entry = result.to_profile_entry(LinkClass::NvLink, false);
  const auto mape_on = [&entry](const std::vector<double>& xs, const std::vector<double>& ys) {
    std::vector<double> predicted;
    for (double xi : xs) predicted.push_back(entry.seconds(xi));
    return mean_absolute_percentage_error(predicted, ys);
  };
  result.training_mape = mape_on(s.fit_x, s.fit_y);
  if (!s.held_x.empty()) result.held_out_mape = mape_on(s.held_x, s.held_y);
  return result;
}

}  // namespace lcsim
