// Skrull's view of the cost model against hand-computed values on tiny models with a flat profile (peak 1 MFLOP/s).
#include <gtest/gtest.h>

#include "base/errors.hpp"
#include "policies/skrull/skrull_view.hpp"
#include "tests/cost_view_fixtures.hpp"

namespace lcsim::skrull {
namespace skrull_view_test {

using testing::flat_profile;
using testing::view_tiny_cluster;
using testing::view_tiny_model;

ParallelScheme skrull_scheme(int cp) {
  ParallelScheme s;
  s.cp = cp;
  s.recompute = Recompute::Selective;
  return s;
}

TEST(CostViewsSkrull, FlopsFollowEquation13) {
  const auto& qwen = ModelConfig{"Qwen2.5-0.5B", 896, 24, 14, 2, 64, 4864, 151936, true};
  const CostModel cost(qwen, view_tiny_cluster(), flat_profile());
  const SkrullView view(cost, skrull_scheme(8), 32, Tokens{26624});
  // Per layer at S = 4096: 4 h^2 S = 13,153,337,344; 4 h h_kv S = 1,879,048,192; 6 h ffn S = 107,105,746,944;
  // 4 h S^2 = 60,129,542,144; sum 182,267,674,624, times 24 layers.
  EXPECT_DOUBLE_EQ(view.flops(4096), 4374424190976.0);
  EXPECT_DOUBLE_EQ(view.flops_sharded(4096, 8), 4374424190976.0 / 8);
  EXPECT_DOUBLE_EQ(view.volume(4096), 4096.0 * 128);

  // At the LLaMA ratio ffn = 8h/3 the MLP term is the paper's 20 h^2 S exactly.
  const ModelConfig llama_ratio{"ratio", 96, 1, 4, 4, 24, 256, 10, false};
  const CostModel llama_cost(llama_ratio, view_tiny_cluster(), flat_profile());
  const SkrullView llama_view(llama_cost, skrull_scheme(2), 1, Tokens{1000});
  const double h = 96, s = 1000;
  EXPECT_DOUBLE_EQ(llama_view.flops(1000), 20 * h * h * s + 4 * h * 96 * s + 4 * h * s * s);
}

TEST(CostViewsSkrull, TcompIsExactWhenTheCostModelIsLinearInEquation13Flops) {
  // With q_hidden = hidden the cost model's GEMM FLOPs equal Eq. 13's linear term; with attention efficiency
  // 7/12, (1 + 2.5) * 2 s^2 h / (7/12) = 3 * 4 h s^2, so compute time is exactly 3 * FLOPs / peak (no LM head:
  // vocab 0) plus the per-layer overhead.
  const ModelConfig model{"mha", 64, 2, 4, 4, 16, 128, 0, false};
  const CostModel cost(model, view_tiny_cluster(), flat_profile(7.0 / 12, 10));
  const SkrullView view(cost, skrull_scheme(4), 8, Tokens{1});
  EXPECT_NEAR(view.tcomp_fit().slope / (3 / 1e6), 1, 1e-9);
  EXPECT_NEAR(view.tcomp_fit().intercept, 2 * 10e-6, 1e-9);
  EXPECT_NEAR(view.tcomp_fit().mape, 0, 1e-9);
  EXPECT_NEAR(view.tcomp(view.flops(5000)) / (3 * view.flops(5000) / 1e6 + 20e-6), 1, 1e-9);
}

TEST(CostViewsSkrull, TcommFitsTheUlyssesAllToAlls) {
  const CostModel cost(view_tiny_model(), view_tiny_cluster(), flat_profile());
  const SkrullView view(cost, skrull_scheme(4), 8);
  // Per sharded sequence of s tokens over 4 ranks (t = s/4 each, NVLink all_to_all 1 us + size * 0.75 / 1 GB/s):
  // 2 layers x 2 directions x (2 all_to_all of t*64*2 B + 2 of t*32*2 B) = 16 us + s * 3e-9 * (64 + 32);
  // per element of Volume = s * 32: slope 9e-9.
  EXPECT_NEAR(view.tcomm_fit().slope / 9e-9, 1, 1e-3);
  EXPECT_NEAR(view.tcomm_fit().intercept / 16e-6, 1, 2e-2);  // ceil(s / 4) rounding
  EXPECT_LT(view.tcomm_fit().mape, 1e-3);
  EXPECT_EQ(view.tcomm(0), 0.0);  // nothing distributed, nothing sent
  EXPECT_GT(view.tcomm(32000), view.tcomm(3200));

  const SkrullView no_cp(cost, skrull_scheme(1), 8);
  EXPECT_EQ(no_cp.tcomm(1e6), 0.0);
}

TEST(CostViewsSkrull, BucketSizeFromTheMemoryView) {
  const CostModel cost(view_tiny_model(), view_tiny_cluster(), flat_profile());
  const SkrullView view(cost, skrull_scheme(4), 4);
  // Activations per token, selective, with the LM head: 2 * 1536 + 10 * 1000 = 13072 B.
  EXPECT_NEAR(view.memory_fit().slope, 13072, 1e-6);
  EXPECT_NEAR(view.memory_fit().intercept, 0, 1e-3);
  EXPECT_NEAR(view.memory(1000), 13072000, 1e-2);
  // (1e9 - 0.25 GiB - 201984 params * (2 + 14/4)) / 13072 = 55879.2
  EXPECT_EQ(view.bucket_size(), 55879);

  EXPECT_EQ(SkrullView(cost, skrull_scheme(4), 4, Tokens{26624}).bucket_size(), 26624);
  EXPECT_THROW(SkrullView(cost, skrull_scheme(4), 4, Tokens{0}), InputError);
  ParallelScheme pipelined = skrull_scheme(4);
  pipelined.pp = 2;
  EXPECT_THROW(SkrullView(cost, pipelined, 4), InputError);
}

TEST(CostViewsSkrull, BucketSizeGrowsWithCapacityAndShrinksWithoutRoom) {
  Tokens previous = 0;
  for (double memory : {0.5e9, 1e9, 2e9, 4e9}) {
    const CostModel cost(view_tiny_model(), view_tiny_cluster(memory), flat_profile());
    const Tokens bucket = SkrullView(cost, skrull_scheme(4), 4).bucket_size();
    EXPECT_GT(bucket, previous);
    previous = bucket;
  }
  const CostModel full(view_tiny_model(), view_tiny_cluster(0.25 * 1024 * 1024 * 1024), flat_profile());
  EXPECT_THROW(SkrullView(full, skrull_scheme(4), 4), InputError);
}

}  // namespace skrull_view_test
}  // namespace lcsim::skrull
