#pragma once
// Least-squares fits shared by the policies' cost views (cost_view_support.hpp) and calibration
// (calibrate/fit/fit.hpp).
//
// Fits minimise the squared *relative* error sum(((f(x) - y) / y)^2): the points span orders of magnitude (128 to
// 256K tokens, 2 MB to 1 GB messages) and the quality figure lcsim reports is MAPE, so a short length must weigh
// as much as a long one. Every y must therefore be non-zero.
#include <span>
#include <vector>

namespace lcsim {

struct LinearFit {
  double slope = 0;
  double intercept = 0;
  double mape = 0;  ///< mean absolute percentage error over the fitting points, as a fraction (0.05 = 5 %)
  double operator()(double x) const { return slope * x + intercept; }
};

struct QuadraticFit {
  double a = 0, b = 0, c = 0;
  double mape = 0;  ///< as LinearFit::mape
  double operator()(double x) const { return (a * x + b) * x + c; }
};

/// Mean of |predicted - actual| / |actual|, as a fraction. Throws std::invalid_argument on empty input, unequal
/// sizes or a zero actual value.
double mean_absolute_percentage_error(std::span<const double> predicted, std::span<const double> actual);

/// Coefficients c minimising sum_i ((sum_j c_j columns[j][i] - y_i) / y_i)^2 (Householder QR on column-scaled
/// data). Throws std::invalid_argument when there are fewer points than columns, a zero y, or the columns are
/// linearly dependent on the points given.
std::vector<double> relative_least_squares(const std::vector<std::vector<double>>& columns, std::span<const double> y);

/// y = slope x + intercept.
LinearFit fit_linear(std::span<const double> x, std::span<const double> y);
/// y = slope x (intercept fixed at 0).
LinearFit fit_proportional(std::span<const double> x, std::span<const double> y);
/// y = a x^2 + b x + c.
QuadraticFit fit_quadratic(std::span<const double> x, std::span<const double> y);

/// `count` points from `lo` to `hi` (both included), evenly spaced in log scale; count >= 2, 0 < lo < hi.
std::vector<double> log_spaced(double lo, double hi, int count);

}  // namespace lcsim
