// Predicted vs measured maths of `lcsim-gpu live` (live/live_compare.hpp), on hand-computed figures.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "live/live_compare.hpp"

namespace lcsim {
namespace live_compare_test {

constexpr double kTol = 1e-12;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(LiveCompare, ErrorIsRelativeToTheMeasuredTime) {
  EXPECT_NEAR(relative_error(1.1, 1.0), 0.1, kTol);
  EXPECT_NEAR(relative_error(0.9, 1.2), -0.25, kTol);
  EXPECT_TRUE(std::isnan(relative_error(1.0, kNaN)));
  EXPECT_TRUE(std::isnan(relative_error(1.0, 0.0)));
}

TEST(LiveCompare, MapeAndSpeedupsFromEachSidesOwnTimes) {
  // Baseline: 2 iterations of 100 tokens, predicted 1.0 + 2.0 s, measured 1.25 + 2.0 s: errors -20% and 0%, MAPE 10%.
  // Policy: predicted 0.5 + 0.5 s, measured 0.4 + 0.8 s: errors +25% and -37.5%, MAPE 31.25%.
  // Predicted speedup (200 / 1.0) / (200 / 3.0) = 3; measured (200 / 1.2) / (200 / 3.25) = 2.708333...
  const std::vector<LiveSeries> series = {{"base", {100, 100}, {1.0, 2.0}, {1.25, 2.0}},
                                          {"fast", {100, 100}, {0.5, 0.5}, {0.4, 0.8}}};
  const auto c = compare_live(series, "base");
  ASSERT_EQ(c.size(), 2u);
  EXPECT_NEAR(c[0].error[0], -0.2, kTol);
  EXPECT_NEAR(c[0].error[1], 0.0, kTol);
  EXPECT_NEAR(c[0].mape, 0.1, kTol);
  EXPECT_NEAR(c[1].error[0], 0.25, kTol);
  EXPECT_NEAR(c[1].error[1], -0.375, kTol);
  EXPECT_NEAR(c[1].mape, 0.3125, kTol);
  EXPECT_NEAR(c[0].predicted_speedup, 1.0, kTol);
  EXPECT_NEAR(c[0].measured_speedup, 1.0, kTol);
  EXPECT_NEAR(c[1].predicted_speedup, 3.0, kTol);
  EXPECT_NEAR(c[1].measured_speedup, 3.25 / 1.2, kTol);
  EXPECT_NEAR(c[1].measured_tokens_per_s, 200 / 1.2, 1e-9);
  EXPECT_EQ(c[1].measured_iterations, 2);
}

TEST(LiveCompare, AnUnmeasuredIterationLeavesNoTotalAndNoSpeedup) {
  // The policy's second iteration ran out of memory: its MAPE is the first one's, its speedup is undefined, and the
  // baseline's comparison is untouched. A baseline with such an iteration leaves every measured speedup undefined.
  const std::vector<LiveSeries> series = {{"base", {100, 100}, {1.0, 1.0}, {1.0, 1.0}},
                                          {"oom", {100, 100}, {1.0, 1.0}, {0.8, kNaN}}};
  const auto c = compare_live(series, "base");
  EXPECT_NEAR(c[1].mape, 0.25, kTol);
  EXPECT_EQ(c[1].measured_iterations, 1);
  EXPECT_TRUE(std::isnan(c[1].error[1]));
  EXPECT_TRUE(std::isnan(c[1].measured_total_s));
  EXPECT_TRUE(std::isnan(c[1].measured_speedup));
  EXPECT_NEAR(c[1].predicted_speedup, 1.0, kTol);
  EXPECT_NEAR(c[0].measured_speedup, 1.0, kTol);

  const auto flipped = compare_live(series, "oom");
  EXPECT_TRUE(std::isnan(flipped[0].measured_speedup));
  EXPECT_NEAR(flipped[0].predicted_speedup, 1.0, kTol);
}

TEST(LiveCompare, RefusesAMissingBaselineOrRaggedSeries) {
  EXPECT_THROW(compare_live({{"a", {1}, {1.0}, {1.0}}}, "b"), std::invalid_argument);
  EXPECT_THROW(compare_live({{"a", {1, 2}, {1.0}, {1.0, 2.0}}}, "a"), std::invalid_argument);
}

}  // namespace live_compare_test
}  // namespace lcsim
