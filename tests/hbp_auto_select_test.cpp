// HBP hierarchical groups auto-selection (Algorithm 1, Appendix I) over the cost model's HBP view.
#include <gtest/gtest.h>

#include "policies/hbp/auto_select.hpp"
#include "policies/hbp/hbp_policy.hpp"
#include "tests/policy_test_fixtures.hpp"

namespace lcsim::hbp {
namespace hbp_auto_select_test {

constexpr Tokens K = kKiloTokens;
constexpr int kWorld = 32;

const CostModel& llama8b() {
  static const CostModel cost = [] {
    CostModel c = testing::plausible_cost(named_model("LLaMA3.1-8B"), 4);
    return c;
  }();
  return cost;
}

TEST(HbpHierarchicalLengths, FollowsAlgorithmOneStageTwo) {
  // HBP Table 11 (auto): l_best 16K with SP 1, l_max 128K with SP 8: l1 = 16K merges, l2 = 16K is not above l_best.
  EXPECT_EQ(hierarchical_lengths(16 * K, 1, 128 * K, 8), (std::vector<Tokens>{16 * K, 128 * K}));
  // Fig. 3: 32K with SP 2 splits off a 16K group.
  EXPECT_EQ(hierarchical_lengths(32 * K, 2, 128 * K, 8), (std::vector<Tokens>{16 * K, 32 * K, 128 * K}));
  // l2 = 64K above l_best = 32K: four groups.
  EXPECT_EQ(hierarchical_lengths(32 * K, 4, 128 * K, 2), (std::vector<Tokens>{8 * K, 32 * K, 64 * K, 128 * K}));
  // The best length is the longest: [l1, l_max].
  EXPECT_EQ(hierarchical_lengths(128 * K, 8, 128 * K, 8), (std::vector<Tokens>{16 * K, 128 * K}));
  // Floor division.
  EXPECT_EQ(hierarchical_lengths(10, 3, 10, 3), (std::vector<Tokens>{3, 10}));
}

TEST(HbpAutoSelect, GreedyProfileCkptFindsTheFewestCheckpointedLayersThatFit) {
  const AutoSelector selector(llama8b(), kWorld);
  const HbpView view(llama8b(), kWorld);
  const int layers = llama8b().model().layers;
  int checked = 0;
  for (Tokens l : {4 * K, 16 * K, 32 * K, 64 * K, 128 * K, 256 * K, 1024 * K})
    for (int sp : {1, 2, 4, 8, 16, 32}) {
      const auto c = selector.greedy_profile_ckpt(l, sp);
      int brute = -1;
      for (int k = 0; k <= layers && brute < 0; ++k)
        if (view.fits(l, sp, k)) brute = k;
      if (brute < 0) {
        EXPECT_FALSE(c.has_value()) << l << " sp " << sp;
      } else {
        ASSERT_TRUE(c.has_value()) << l << " sp " << sp;
        EXPECT_EQ(*c, brute) << l << " sp " << sp;
        ++checked;
      }
    }
  EXPECT_GT(checked, 10);
  // The shape of HBP Table 4: at one length a larger SP degree needs no more checkpointed layers, and 128K does
  // not fit without SP at all.
  EXPECT_FALSE(selector.greedy_profile_ckpt(128 * K, 1).has_value());
  for (Tokens l : {32 * K, 64 * K, 128 * K})
    for (int sp : {2, 4, 8, 16}) {
      const auto lower = selector.greedy_profile_ckpt(l, sp);
      const auto higher = selector.greedy_profile_ckpt(l, 2 * sp);
      if (lower) {
        ASSERT_TRUE(higher.has_value());
        EXPECT_LE(*higher, *lower) << l << " sp " << sp;
      }
    }
}

TEST(HbpAutoSelect, FindBestSpCkptIsTheFastestFittingStrategy) {
  const AutoSelector selector(llama8b(), kWorld);
  const std::vector<int> degrees = default_sp_degrees(kWorld);
  EXPECT_EQ(degrees, (std::vector<int>{1, 2, 4, 8, 16, 32}));
  for (Tokens l : {8 * K, 32 * K, 128 * K}) {
    const auto best = selector.find_best_sp_ckpt(l, degrees);
    ASSERT_TRUE(best.has_value()) << l;
    EXPECT_TRUE(best->fits);
    EXPECT_EQ(best->length, l);
    for (int sp : degrees) {
      const auto c = selector.greedy_profile_ckpt(l, sp);
      if (!c) continue;
      EXPECT_LE(best->seconds_per_token, selector.evaluate(l, sp, *c).seconds_per_token) << l << " sp " << sp;
    }
    // Per token: the step trains world / sp packs of l tokens.
    EXPECT_DOUBLE_EQ(best->seconds_per_token,
                     best->step_seconds / (static_cast<double>(l) * static_cast<double>(kWorld / best->sp)));
  }
  // Nothing fits a 64M-token pack on 32 GPUs of 80 GB.
  EXPECT_FALSE(selector.find_best_sp_ckpt(64 * 1024 * K, degrees).has_value());
}

TEST(HbpAutoSelect, SelectsGroupsFromTheBestAndTheLongestStrategies) {
  const AutoSelector selector(llama8b(), kWorld);
  const std::vector<Tokens> candidates = default_packing_lengths(128 * K);
  EXPECT_EQ(candidates, (std::vector<Tokens>{8 * K, 16 * K, 32 * K, 64 * K, 128 * K}));
  const std::vector<int> degrees = default_sp_degrees(kWorld);
  const Selection s = selector.select(candidates, degrees);
  ASSERT_EQ(s.stage1.size(), candidates.size());
  for (const auto& strategy : s.stage1) {
    ASSERT_TRUE(strategy.has_value());
    EXPECT_GE(strategy->seconds_per_token, s.best.seconds_per_token);
  }
  EXPECT_EQ(s.longest, *s.stage1.back());
  std::vector<Tokens> lengths;
  for (const auto& g : s.groups) {
    lengths.push_back(g.length);
    EXPECT_TRUE(g.fits) << g.length;
  }
  EXPECT_EQ(lengths, hierarchical_lengths(s.best.length, s.best.sp, s.longest.length, s.longest.sp));
  EXPECT_EQ(s.groups.back(), s.longest);
  // Split-off groups train without SP communication.
  for (const auto& g : s.groups) {
    if (g.length != s.best.length && g.length != s.longest.length) {
      EXPECT_EQ(g.sp, 1) << g.length;
    }
  }
  // Short packs need no SP on this model, 128K does: the groups separate short from long data.
  EXPECT_EQ(s.groups.front().sp, 1);
  EXPECT_GT(s.longest.sp, 1);
}

TEST(HbpAutoSelect, LongestLengthThatFitsNowhereFallsBackToTheLeastMemoryStrategy) {
  const AutoSelector selector(llama8b(), kWorld);
  const std::vector<Tokens> candidates = {8 * K, 64 * 1024 * K};
  const std::vector<int> degrees = {1, 2, 4, 8};
  const Selection s = selector.select(candidates, degrees);
  EXPECT_FALSE(s.stage1[1].has_value());
  EXPECT_FALSE(s.longest.fits);
  EXPECT_EQ(s.longest.sp, 8);
  EXPECT_EQ(s.longest.gc_layers, llama8b().model().layers);
  EXPECT_EQ(s.groups.back(), s.longest);
}

}  // namespace hbp_auto_select_test
}  // namespace lcsim::hbp
