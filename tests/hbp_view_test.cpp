// HBP's view of the cost model against hand-computed values on a tiny model with a flat profile.
#include <gtest/gtest.h>

#include <stdexcept>

#include "base/errors.hpp"
#include "policies/hbp/hbp_view.hpp"
#include "tests/cost_view_fixtures.hpp"

namespace lcsim::hbp {
namespace hbp_view_test {

using testing::flat_profile;
using testing::view_tiny_cluster;
using testing::view_tiny_model;

TEST(CostViewsHbp, StepSecondsByHand) {
  const CostModel cost(view_tiny_model(), view_tiny_cluster(), flat_profile());
  const HbpView view(cost, 8);
  // A 400-token pack over SP 4 (100 local tokens), one of 2 layers checkpointed, the rest recompute nothing.
  const double gemm = 100 * 73728 / 1e6;
  const double attention = 2.0 * 400 * 400 * 64 / 4 / 0.5e6;
  const double plain = 3 * gemm + 3.5 * attention + 10e-6;
  const double head = 3 * 100 * 128000 / 1e6;
  const double a2a = 2 * 2 * (2 * (1e-6 + 12800 * 0.75 / 1e9) + 2 * (1e-6 + 6400 * 0.75 / 1e9));
  EXPECT_NEAR(view.step_seconds(400, 4, 1), plain + (plain + gemm + attention) + head + a2a, 1e-9);
  // SP 8 spans two 4-GPU nodes: the all-to-alls go over InfiniBand (5 us, 0.5 GB/s, bus factor 7/8).
  const double ib = 2 * 2 * (2 * (5e-6 + 6400 * 0.875 / 0.5e9) + 2 * (5e-6 + 3200 * 0.875 / 0.5e9));
  const SequenceShare share{400, 8};
  ParallelScheme scheme;
  scheme.cp = 8;
  scheme.recompute = Recompute::None;
  EXPECT_NEAR(view.step_seconds(400, 8, 0), cost.compute_seconds({&share, 1}, scheme, 2, true) + ib, 1e-12);
}

TEST(CostViewsHbp, PeakBytesAndFit) {
  const CostModel cost(view_tiny_model(), view_tiny_cluster(), flat_profile());
  const HbpView view(cost, 8);
  // Static: 201984 params * (2 + 14 / 8). Per token: 1 checkpointed layer (128) + 1 plain (1920), plus the larger
  // of logits (10000) and a recomputed layer (1920 - 128); 100 local tokens.
  EXPECT_DOUBLE_EQ(view.peak_bytes(400, 4, 1), 201984 * (2 + 14.0 / 8) + (128 + 1920 + 10000) * 100.0);
  EXPECT_TRUE(view.fits(400, 4, 1));
  EXPECT_FALSE(view.fits(400000, 1, 0));
  // More checkpointed layers: less memory, more time.
  EXPECT_LT(view.peak_bytes(40000, 4, 2), view.peak_bytes(40000, 4, 0));
  EXPECT_GT(view.step_seconds(40000, 4, 2), view.step_seconds(40000, 4, 0));
  EXPECT_THROW(view.peak_bytes(400, 16, 0), std::invalid_argument);
  EXPECT_THROW(view.step_seconds(400, 4, 3), std::invalid_argument);
}

}  // namespace hbp_view_test
}  // namespace lcsim::hbp
