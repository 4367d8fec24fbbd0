#include "model/fitting.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace lcsim {

double mean_absolute_percentage_error(std::span<const double> predicted, std::span<const double> actual) {
  if (predicted.size() != actual.size()) throw std::invalid_argument("MAPE: predicted and actual differ in size");
  if (actual.empty()) throw std::invalid_argument("MAPE: no points");
  double sum = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    if (actual[i] == 0) throw std::invalid_argument("MAPE: actual value " + std::to_string(i) + " is zero");
    sum += std::abs(predicted[i] - actual[i]) / std::abs(actual[i]);
  }
  return sum / static_cast<double>(actual.size());
}

std::vector<double> relative_least_squares(const std::vector<std::vector<double>>& columns, std::span<const double> y) {
  const std::size_t n = y.size();
  const std::size_t p = columns.size();
  if (p == 0) throw std::invalid_argument("least squares: no columns");
  if (n < p)
    throw std::invalid_argument("least squares: " + std::to_string(n) + " points for " + std::to_string(p) +
                                " coefficients");
  for (const auto& column : columns) {
    if (column.size() != n) throw std::invalid_argument("least squares: column and y differ in size");
  }
  // Rows weighted by 1/|y|; columns scaled to unit max so x^2 next to 1 does not ruin the conditioning.
  std::vector<std::vector<double>> m(p, std::vector<double>(n));
  std::vector<double> b(n);
  std::vector<double> scale(p, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    if (y[i] == 0) throw std::invalid_argument("least squares: y value " + std::to_string(i) + " is zero");
    b[i] = y[i] / std::abs(y[i]);
  }
  for (std::size_t j = 0; j < p; ++j) {
    for (std::size_t i = 0; i < n; ++i) scale[j] = std::max(scale[j], std::abs(columns[j][i] / y[i]));
    if (scale[j] == 0) throw std::invalid_argument("least squares: column " + std::to_string(j) + " is all zero");
    for (std::size_t i = 0; i < n; ++i) m[j][i] = columns[j][i] / std::abs(y[i]) / scale[j];
  }
  // Householder QR: m (n x p, stored by column) becomes R in its top p rows, b becomes Q^T b.
  double largest_diagonal = 0;
  for (std::size_t k = 0; k < p; ++k) {
    double norm = 0;
    for (std::size_t i = k; i < n; ++i) norm += m[k][i] * m[k][i];
    norm = std::sqrt(norm);
    const double alpha = m[k][k] > 0 ? -norm : norm;
    std::vector<double> v(m[k].begin() + static_cast<std::ptrdiff_t>(k), m[k].end());
    v[0] -= alpha;
    double v_norm2 = 0;
    for (double e : v) v_norm2 += e * e;
    if (v_norm2 > 0) {
      auto reflect = [&](std::vector<double>& target) {
        double s = 0;
        for (std::size_t i = k; i < n; ++i) s += v[i - k] * target[i];
        const double f = 2 * s / v_norm2;
        for (std::size_t i = k; i < n; ++i) target[i] -= f * v[i - k];
      };
      for (std::size_t j = k; j < p; ++j) reflect(m[j]);
      reflect(b);
    }
    largest_diagonal = std::max(largest_diagonal, std::abs(m[k][k]));
  }
  std::vector<double> c(p);
  for (std::size_t k = p; k-- > 0;) {
    if (std::abs(m[k][k]) <= 1e-12 * largest_diagonal)
      throw std::invalid_argument("least squares: the points do not determine all coefficients");
    double s = b[k];
    for (std::size_t j = k + 1; j < p; ++j) s -= m[j][k] * c[j];
    c[k] = s / m[k][k];
  }
  for (std::size_t j = 0; j < p; ++j) c[j] /= scale[j];
  return c;
}

namespace {

std::vector<double> ones(std::size_t n) {
  return std::vector<double>(n, 1.0);
}

void check_sizes(std::span<const double> x, std::span<const double> y) {
  if (x.size() != y.size()) throw std::invalid_argument("fit: x and y differ in size");
}

}  // namespace

LinearFit fit_linear(std::span<const double> x, std::span<const double> y) {
  check_sizes(x, y);
  const auto c = relative_least_squares({std::vector<double>(x.begin(), x.end()), ones(x.size())}, y);
  LinearFit fit{c[0], c[1], 0};
  std::vector<double> predicted;
  for (double xi : x) predicted.push_back(fit(xi));
  fit.mape = mean_absolute_percentage_error(predicted, y);
  return fit;
}

LinearFit fit_proportional(std::span<const double> x, std::span<const double> y) {
  check_sizes(x, y);
  const auto c = relative_least_squares({std::vector<double>(x.begin(), x.end())}, y);
  LinearFit fit{c[0], 0, 0};
  std::vector<double> predicted;
  for (double xi : x) predicted.push_back(fit(xi));
  fit.mape = mean_absolute_percentage_error(predicted, y);
  return fit;
}

QuadraticFit fit_quadratic(std::span<const double> x, std::span<const double> y) {
  check_sizes(x, y);
  std::vector<double> squares;
  for (double xi : x) squares.push_back(xi * xi);
  const auto c = relative_least_squares({squares, std::vector<double>(x.begin(), x.end()), ones(x.size())}, y);
  QuadraticFit fit{c[0], c[1], c[2], 0};
  std::vector<double> predicted;
  for (double xi : x) predicted.push_back(fit(xi));
  fit.mape = mean_absolute_percentage_error(predicted, y);
  return fit;
}

std::vector<double> log_spaced(double lo, double hi, int count) {
  if (count < 2 || !(lo > 0) || !(hi > lo)) throw std::invalid_argument("log_spaced: need count >= 2, 0 < lo < hi");
  std::vector<double> points;
  const double step = std::log(hi / lo) / (count - 1);
  for (int i = 0; i < count; ++i) points.push_back(lo * std::exp(step * i));
  points.back() = hi;  // exact end point, not exp(log()) rounding
  return points;
}

}  // namespace lcsim
