// The busiest SM of an attention call (model/attention_blocks.hpp) and its place in the cost model: hand
// counted cases, a brute-force comparison, and a lone sequence whose few blocks outlast its work over the GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <stdexcept>
#include <vector>

#include "model/attention_blocks.hpp"
#include "model/cost_model.hpp"
#include "tests/flat_profile_fixtures.hpp"

namespace lcsim {
namespace attention_blocks_test {

/// Every block of `runs`, largest first, then the busiest SM by the round-robin rule.
double brute_force(const std::vector<BlockRun>& runs, int sms, int per_sm) {
  std::vector<double> blocks;
  for (const BlockRun& r : runs)
    for (int c = 0; c < static_cast<int>(r.copies); ++c)
      for (int i = 1; i <= static_cast<int>(r.tiles); ++i) blocks.push_back(i * r.scale);
  std::sort(blocks.begin(), blocks.end(), std::greater<>());
  double pairs = 0;
  for (int k = 0; k < per_sm; ++k) {
    const auto rank = static_cast<std::size_t>(k) * static_cast<std::size_t>(sms);
    if (rank < blocks.size()) pairs += blocks[rank];
  }
  return pairs;
}

TEST(AttentionBlocks, TheFirstSmHoldsTheBlocksOfRanksZeroSmsTwiceSms) {
  const std::vector<BlockRun> one{{1, 4, 1}};  // blocks 4, 3, 2, 1
  EXPECT_DOUBLE_EQ(busiest_sm_tile_pairs(one, 2, 2), 4 + 2);
  EXPECT_DOUBLE_EQ(busiest_sm_tile_pairs(one, 4, 2), 4);  // no block of rank 4
  EXPECT_DOUBLE_EQ(busiest_sm_tile_pairs(one, 1, 4), 4 + 3 + 2 + 1);
  // 3 2 1 twice, and 6 3 (a KV head walking two query heads): 6 3 3 3 2 2 1 1; ranks 0, 3, 6.
  const std::vector<BlockRun> mixed{{2, 3, 1}, {1, 2, 3}};
  EXPECT_DOUBLE_EQ(busiest_sm_tile_pairs(mixed, 3, 3), 6 + 3 + 1);
  EXPECT_EQ(busiest_sm_tile_pairs({}, 132, 2), 0.0);
  EXPECT_THROW(busiest_sm_tile_pairs(one, 0, 2), std::invalid_argument);
  EXPECT_THROW(busiest_sm_tile_pairs(one, 2, 0), std::invalid_argument);
}

TEST(AttentionBlocks, AgreesWithSortingEveryBlock) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> copies(1, 14), tiles(1, 300), scale(1, 7), count(1, 6), sms(1, 160), per(1, 4);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<BlockRun> runs;
    for (int i = count(rng); i > 0; --i) runs.push_back({double(copies(rng)), double(tiles(rng)), double(scale(rng))});
    const int s = sms(rng), p = per(rng);
    ASSERT_DOUBLE_EQ(busiest_sm_tile_pairs(runs, s, p), brute_force(runs, s, p)) << "trial " << trial;
  }
}

TEST(AttentionBlocks, ALoneSequencesBusiestSmBoundsItsAttention) {
  // Flat test model: 4 heads, 2 KV heads, head_dim 16; 1e6 FLOP/s, attention efficiency 0.5. One sequence of 64
  // tokens in tiles of 16: forward blocks 4 3 2 1 per head, backward 8 6 4 2 per KV head (walking 2 heads).
  Profile p = testing::flat_compute_profile(0.5, 0);
  const auto attention = [&](int sms) {
    p.compute.attention_blocks = {16, sms, 1, 1, AttentionBlocks::BackwardWalk::KvGroup};
    const CostModel cost(testing::flat_tiny_model(), testing::flat_tiny_cluster(2, 4), p);
    const std::vector<SequenceShare> one{{64, 1}};
    double gemm = 0;
    return cost.layer_work_seconds(one, 1, Recompute::None, false, LayerGrad::Full, &gemm) - gemm;
  };
  // Work over the GPU: 2 64^2 (4 x 16) / 5e5 = 1.048576 s forward, 2.5 x that backward.
  const double work = 1.048576 * 3.5;
  EXPECT_NEAR(attention(4), work, 1e-9);  // 4 SMs: a tile pair 0.131 s on one SM, the busiest SM 4 + 8 pairs
  // 64 SMs: a tile pair takes 64 x 4 x 16^2 x 16 / 5e5 = 2.097152 s on one SM; the busiest SM holds one forward
  // block of 4 pairs and one backward block of 8 (x 2.5): the blocks, not the work, set the time.
  EXPECT_NEAR(attention(64), 2.097152 * (4 + 2.5 * 8), 1e-9);
  p.compute.attention_blocks = {};
  const CostModel off(testing::flat_tiny_model(), testing::flat_tiny_cluster(2, 4), p);
  double gemm = 0;
  const std::vector<SequenceShare> one{{64, 1}};
  EXPECT_NEAR(off.layer_work_seconds(one, 1, Recompute::None, false, LayerGrad::Full, &gemm) - gemm, work, 1e-9);
}

}  // namespace attention_blocks_test
}  // namespace lcsim
