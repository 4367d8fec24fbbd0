#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "base/errors.hpp"
#include "calibrate/fit/fit.hpp"

namespace lcsim {
namespace fit_test {

TEST(CalibrateLeastSquares, RecoversExactLinesAndParabolas) {
  const std::vector<double> x = {1, 2, 5, 10, 100};
  std::vector<double> line, parabola;
  for (double xi : x) {
    line.push_back(3 * xi + 2);
    parabola.push_back(0.5 * xi * xi - 2 * xi + 7);
  }
  const LinearFit l = fit_linear(x, line);
  EXPECT_NEAR(l.slope, 3, 1e-12);
  EXPECT_NEAR(l.intercept, 2, 1e-12);
  EXPECT_NEAR(l.mape, 0, 1e-14);
  const QuadraticFit q = fit_quadratic(x, parabola);
  EXPECT_NEAR(q.a, 0.5, 1e-10);
  EXPECT_NEAR(q.b, -2, 1e-9);
  EXPECT_NEAR(q.c, 7, 1e-9);
  EXPECT_NEAR(q(4), 7, 1e-9);
}

TEST(CalibrateLeastSquares, StaysAccurateOverManyOrdersOfMagnitude) {
  // Attention-like quadratic over 128..256K tokens: x^2 reaches 7e10, the constant is 1e-3.
  std::vector<double> x, y;
  for (double xi : log_spaced(128, 262144, 30)) {
    x.push_back(xi);
    y.push_back(1e-10 * xi * xi + 4e-6 * xi + 1e-3);
  }
  const QuadraticFit q = fit_quadratic(x, y);
  EXPECT_NEAR(q.a / 1e-10, 1, 1e-8);
  EXPECT_NEAR(q.b / 4e-6, 1, 1e-8);
  EXPECT_NEAR(q.c / 1e-3, 1, 1e-8);
}

TEST(CalibrateLeastSquares, MinimisesRelativeNotAbsoluteError) {
  // y = c x through (1, 1), (2, 2), (10, 12): relative least squares gives c = sum(x/y) / sum((x/y)^2)
  // = (1 + 1 + 10/12) / (1 + 1 + (10/12)^2) = 1.05155; absolute least squares would give 125/105 = 1.19.
  const LinearFit fit = fit_proportional(std::vector<double>{1, 2, 10}, std::vector<double>{1, 2, 12});
  const double r = 10.0 / 12;
  EXPECT_NEAR(fit.slope, (2 + r) / (2 + r * r), 1e-12);
  EXPECT_EQ(fit.intercept, 0.0);
}

TEST(CalibrateLeastSquares, Mape) {
  EXPECT_DOUBLE_EQ(mean_absolute_percentage_error(std::vector<double>{110, 90}, std::vector<double>{100, 100}), 0.1);
  EXPECT_DOUBLE_EQ(mean_absolute_percentage_error(std::vector<double>{3}, std::vector<double>{4}), 0.25);
  EXPECT_THROW(mean_absolute_percentage_error(std::vector<double>{1}, std::vector<double>{0}), std::invalid_argument);
  EXPECT_THROW(mean_absolute_percentage_error(std::vector<double>{}, std::vector<double>{}), std::invalid_argument);
}

TEST(CalibrateLeastSquares, RejectsUnderdeterminedFits) {
  EXPECT_THROW(fit_quadratic(std::vector<double>{1, 2}, std::vector<double>{1, 2}), std::invalid_argument);
  EXPECT_THROW(fit_linear(std::vector<double>{3, 3, 3}, std::vector<double>{1, 2, 3}), std::invalid_argument);
  EXPECT_THROW(fit_linear(std::vector<double>{1, 2}, std::vector<double>{0, 1}), std::invalid_argument);
}

TEST(CalibrateLeastSquares, LogSpacedEndsExactly) {
  const auto points = log_spaced(128, 262144, 12);
  ASSERT_EQ(points.size(), 12u);
  EXPECT_DOUBLE_EQ(points.front(), 128);
  EXPECT_DOUBLE_EQ(points.back(), 262144);
  EXPECT_NEAR(points[1] / points[0], std::pow(2048.0, 1.0 / 11), 1e-12);
}

TEST(CalibrateHoldOut, HoldsOutEveryKthInteriorPoint) {
  EXPECT_EQ(held_out_mask(9, 3), (std::vector<bool>{false, true, false, false, true, false, false, true, false}));
  EXPECT_EQ(held_out_mask(5, 4), (std::vector<bool>{false, true, false, false, false}));
  EXPECT_EQ(held_out_mask(2, 2), (std::vector<bool>{false, false}));  // never the last point
  EXPECT_EQ(held_out_mask(4, 0), (std::vector<bool>(4, false)));
  EXPECT_THROW(held_out_mask(4, 1), std::invalid_argument);
}

TEST(CalibrateHoldOut, ReportsTheErrorOnPointsItDidNotSee) {
  // y = 2x + 1 except the held-out x = 2 (index 1), measured 10% high: the fit ignores it and reports it.
  const std::vector<double> x = {1, 2, 3, 4, 5, 6, 7};
  std::vector<double> y = {3, 5.5, 7, 9, 11, 13, 15};
  const auto held = fit_linear_held_out(x, y, 3);  // holds out indices 1 and 4
  EXPECT_NEAR(held.fit.slope, 2, 1e-12);
  EXPECT_NEAR(held.fit.intercept, 1, 1e-12);
  ASSERT_TRUE(held.held_out_mape.has_value());
  EXPECT_NEAR(*held.held_out_mape, (0.5 / 5.5 + 0) / 2, 1e-12);
  EXPECT_FALSE(fit_linear_held_out(x, y, 0).held_out_mape.has_value());
  EXPECT_THROW(fit_linear_held_out(std::vector<double>{2, 1, 3}, std::vector<double>{1, 2, 3}, 0),
               std::invalid_argument);

  std::vector<double> parabola;
  for (double xi : x) parabola.push_back(xi * xi);
  const auto q = fit_quadratic_held_out(x, parabola, 3);
  EXPECT_NEAR(q.fit.a, 1, 1e-10);
  EXPECT_NEAR(*q.held_out_mape, 0, 1e-10);
}

/// nccl-tests-style samples of a latency + bandwidth model: t = latency + size * factor / bus.
std::vector<CollectiveSample> samples_of(const CollectiveFit& truth, const std::vector<double>& sizes) {
  std::vector<CollectiveSample> out;
  for (double s : sizes) out.push_back({s, truth.seconds(s)});
  return out;
}

std::vector<double> mib_sizes() {
  std::vector<double> sizes;
  for (double mib = 1; mib <= 512; mib *= 2) sizes.push_back(mib * 1024 * 1024);
  return sizes;
}

TEST(CalibrateCollectiveFit, RecoversOneSegment) {
  CollectiveFit truth;
  truth.op = CollectiveOp::AllReduce;
  truth.group_size = 8;
  truth.segments = {{std::numeric_limits<double>::infinity(), 25, 150}};
  const auto fit = fit_collective_segments(samples_of(truth, mib_sizes()), CollectiveOp::AllReduce, 8, 3);
  ASSERT_EQ(fit.segments.size(), 1u);  // a second segment cannot earn its parameters on exact data
  EXPECT_NEAR(fit.segments[0].latency_us, 25, 1e-6);
  EXPECT_NEAR(fit.segments[0].bus_GBps, 150, 1e-6);
  EXPECT_TRUE(std::isinf(fit.segments[0].max_bytes));
  EXPECT_NEAR(fit.training_mape, 0, 1e-10);
  ASSERT_TRUE(fit.held_out_mape.has_value());
  EXPECT_NEAR(*fit.held_out_mape, 0, 1e-10);
}

TEST(CalibrateCollectiveFit, RecoversTwoContinuousSegments) {
  // 20 us at 100 GB/s busbw up to 16 MiB, then 150 GB/s, joined continuously at 16 MiB.
  const double kink = 16.0 * 1024 * 1024;
  const double factor = 0.875;
  CollectiveFit truth;
  truth.op = CollectiveOp::AllGather;
  truth.group_size = 8;
  const double at_kink = 20e-6 + kink * factor / 100e9;
  const double second_latency = at_kink - kink * factor / 150e9;
  truth.segments = {{kink, 20, 100}, {std::numeric_limits<double>::infinity(), second_latency * 1e6, 150}};
  const auto fit = fit_collective_segments(samples_of(truth, mib_sizes()), CollectiveOp::AllGather, 8, 0);
  ASSERT_EQ(fit.segments.size(), 2u);
  EXPECT_NEAR(fit.segments[0].max_bytes, kink, 1);
  EXPECT_NEAR(fit.segments[0].latency_us, 20, 1e-6);
  EXPECT_NEAR(fit.segments[0].bus_GBps, 100, 1e-6);
  EXPECT_NEAR(fit.segments[1].latency_us, second_latency * 1e6, 1e-6);
  EXPECT_NEAR(fit.segments[1].bus_GBps, 150, 1e-6);
  EXPECT_NEAR(fit.training_mape, 0, 1e-10);
  EXPECT_FALSE(fit.held_out_mape.has_value());

  const CollectiveFit entry = fit.to_profile_entry(LinkClass::InfiniBand, true);
  EXPECT_EQ(entry.op, CollectiveOp::AllGather);
  EXPECT_EQ(entry.link, LinkClass::InfiniBand);
  EXPECT_EQ(entry.group_size, 8);
  EXPECT_TRUE(entry.measured);
  EXPECT_NEAR(entry.seconds(300e6), truth.seconds(300e6), 1e-12);
}

TEST(CalibrateCollectiveFit, KeepsLatencyNonNegative) {
  // Pure bandwidth data with a little noise that would pull an unconstrained intercept below zero.
  std::vector<CollectiveSample> samples;
  const std::vector<double> noise = {0.97, 1.0, 1.0, 1.02, 1.0, 1.0};
  for (std::size_t i = 0; i < noise.size(); ++i) {
    const double bytes = std::pow(4.0, static_cast<double>(i)) * 1e6;
    samples.push_back({bytes, noise[i] * bytes / 100e9});
  }
  const auto fit = fit_collective_segments(samples, CollectiveOp::SendRecv, 2, 0);
  for (const auto& segment : fit.segments) {
    EXPECT_GE(segment.latency_us, 0);
    EXPECT_GT(segment.bus_GBps, 0);
  }
  EXPECT_LT(fit.training_mape, 0.03);
}

TEST(CalibrateCollectiveFit, RejectsBadSamples) {
  const std::vector<CollectiveSample> shrinking = {{1e6, 3e-3}, {2e6, 2e-3}, {4e6, 1e-3}};
  EXPECT_THROW(fit_collective_segments(shrinking, CollectiveOp::AllGather, 8, 0), InputError);
  const std::vector<CollectiveSample> duplicate = {{1e6, 1e-3}, {1e6, 2e-3}, {4e6, 3e-3}};
  EXPECT_THROW(fit_collective_segments(duplicate, CollectiveOp::AllGather, 8, 0), InputError);
  const std::vector<CollectiveSample> zero = {{0, 1e-3}, {1e6, 2e-3}};
  EXPECT_THROW(fit_collective_segments(zero, CollectiveOp::AllGather, 8, 0), InputError);
  const std::vector<CollectiveSample> one = {{1e6, 1e-3}};
  try {
    fit_collective_segments(one, CollectiveOp::AllToAll, 8, 0);
    FAIL() << "fitted one point";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("all_to_all"), std::string::npos);
  }
}

}  // namespace fit_test
}  // namespace lcsim
