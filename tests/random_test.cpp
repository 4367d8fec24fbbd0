// lcsim::Rng: the fully specified generator every random draw goes through.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "base/random.hpp"

namespace lcsim {
namespace random_test {

std::vector<std::uint64_t> draws(Rng rng, int n) {
  std::vector<std::uint64_t> out(static_cast<std::size_t>(n));
  for (auto& v : out) v = rng.next();
  return out;
}

TEST(RandomRngTest, MatchesXoshiro256StarStarSeededBySplitMix64) {
  // Reference values from an independent implementation of the published algorithms: splitmix64 from seed 0
  // gives the state e220a8397b1dcdaf, 6e789e6aa1b965f4, 06c45d188009454f, f88bb8a8724c81ec (the well-known first
  // splitmix64 outputs), and xoshiro256** from that state gives:
  EXPECT_EQ(draws(Rng(0), 4), (std::vector<std::uint64_t>{0x99ec5f36cb75f2b4ULL, 0xbf6e1f784956452aULL,
                                                          0x1a5f849d4933e6e0ULL, 0x6aa594f1262d2d2cULL}));
  EXPECT_EQ(draws(Rng(42), 3),
            (std::vector<std::uint64_t>{0x15780b2e0c2ec716ULL, 0x6104d9866d113a7eULL, 0xae17533239e499a1ULL}));
  // uniform() keeps the top 53 bits: 0x15780b2e0c2ec716 >> 11 scaled by 2^-53.
  EXPECT_DOUBLE_EQ(Rng(42).uniform(), static_cast<double>(0x15780b2e0c2ec716ULL >> 11) * 0x1.0p-53);
}

TEST(RandomRngTest, SameSeedSameStreamOtherSeedOtherStream) {
  EXPECT_EQ(draws(Rng(123), 1000), draws(Rng(123), 1000));
  EXPECT_NE(draws(Rng(123), 1000), draws(Rng(124), 1000));
}

TEST(RandomRngTest, UniformIsInUnitIntervalWithMeanOneHalf) {
  Rng rng(5);
  double sum = 0;
  for (int i = 0; i < 100'000; ++i) {
    const double u = rng.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  // Standard error of the mean: sqrt(1/12 / 1e5) ~ 0.0009.
  EXPECT_NEAR(sum / 100'000.0, 0.5, 0.005);
}

TEST(RandomRngTest, BelowStaysInRangeAndIsRoughlyUniform) {
  Rng rng(9);
  EXPECT_EQ(rng.below(1), 0u);
  const std::uint64_t big = (std::uint64_t{1} << 40) + 3;
  for (int i = 0; i < 1000; ++i) ASSERT_LT(rng.below(big), big);
  // 100k draws over 10 values: 10,000 expected per value, standard deviation ~95; allow 5 sigma.
  std::vector<int> counts(10, 0);
  for (int i = 0; i < 100'000; ++i) {
    const auto v = rng.below(10);
    ASSERT_LT(v, 10u);
    ++counts[v];
  }
  for (int c : counts) EXPECT_NEAR(c, 10'000, 475);
  // Every value of a small range shows up.
  std::vector<bool> seen(7, false);
  for (int i = 0; i < 1000; ++i) seen[rng.below(7)] = true;
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](bool b) { return b; }));
}

TEST(RandomRngTest, ShuffleIsASeededPermutation) {
  std::vector<int> items(1000);
  std::iota(items.begin(), items.end(), 0);
  auto a = items;
  auto b = items;
  auto c = items;
  Rng(77).shuffle(a);
  Rng(77).shuffle(b);
  Rng(78).shuffle(c);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, items);
  std::sort(a.begin(), a.end());
  EXPECT_EQ(a, items);
  // Each position is equally likely to receive item 0: over many shuffles of 4 items, ~1/4 each.
  Rng rng(3);
  std::vector<int> position_of_zero(4, 0);
  for (int i = 0; i < 40'000; ++i) {
    std::vector<int> small{0, 1, 2, 3};
    rng.shuffle(small);
    ++position_of_zero[static_cast<std::size_t>(std::find(small.begin(), small.end(), 0) - small.begin())];
  }
  for (int c4 : position_of_zero) EXPECT_NEAR(c4, 10'000, 450);
  // Empty and one-element vectors are fine.
  std::vector<int> empty;
  rng.shuffle(empty);
  std::vector<int> one{5};
  rng.shuffle(one);
  EXPECT_EQ(one, std::vector<int>{5});
}

TEST(RandomRngTest, SplitStreamsDependOnSaltAndDoNotShareDraws) {
  Rng parent_a(1);
  Rng parent_b(1);
  Rng child_a = parent_a.split(7);
  Rng child_b = parent_b.split(8);
  EXPECT_NE(draws(child_a, 100), draws(child_b, 100));
  // The child is not a copy of the parent's continuation.
  EXPECT_NE(draws(child_a, 100), draws(parent_a, 100));
  // Same parent seed and salt: same child.
  EXPECT_EQ(draws(Rng(1).split(7), 100), draws(Rng(1).split(7), 100));
}

}  // namespace random_test
}  // namespace lcsim
