// Hydraulis' view of the cost model against hand-computed values on a tiny model with a flat profile.
#include <gtest/gtest.h>

#include <cmath>

#include "base/errors.hpp"
#include "policies/hydraulis/hydraulis_view.hpp"
#include "tests/cost_view_fixtures.hpp"

namespace lcsim::hydraulis {
namespace hydraulis_view_test {

using testing::flat_profile;
using testing::view_tiny_cluster;
using testing::view_tiny_model;

ParallelScheme with_cp(int cp) {
  ParallelScheme s;
  s.cp = cp;
  return s;
}

ParallelScheme tp_pp(int tp, int pp) {
  ParallelScheme s;
  s.tp = tp;
  s.pp = pp;
  s.recompute = Recompute::Selective;
  return s;
}

TEST(CostViewsHydraulis, LatencyIsTheQuadraticOfTheStageTime) {
  // Large overhead (5 s per layer) so the constant term is well determined next to the others.
  const CostModel cost(view_tiny_model(), view_tiny_cluster(), flat_profile(0.5, 5e6));
  const HydraulisView view(cost, 8);
  const QuadraticFit single = view.latency(tp_pp(1, 1));
  // 2 layers: a = 2 * 3.5 * 2 * 64 / (1e6 * 0.5); b = 2 * 3 * 73728 / 1e6 + 3 * 2 * 64 * 1000 / 1e6 (LM head);
  // c = 2 layers * 5 s.
  EXPECT_NEAR(single.a / 1.792e-3, 1, 1e-9);
  EXPECT_NEAR(single.b / (0.442368 + 0.384), 1, 1e-9);
  EXPECT_NEAR(single.c / 10, 1, 1e-9);
  EXPECT_NEAR(single.mape, 0, 1e-9);

  // TP 2 x PP 2 on one node: one layer per stage, half the FLOPs per GPU, the TP collectives (1 us + size * 0.5 /
  // 1 GB/s, 4 per direction) and the activation send + gradient receive (1 us + l * 64 B).
  const QuadraticFit split = view.latency(tp_pp(2, 2));
  const double l = 3000;
  const double compute = 3 * l * 73728 / 2 / 1e6 + 3.5 * 2 * l * l * 64 / 2 / 0.5e6 + 5 + 3 * l * 128000 / 2 / 1e6;
  const double tp_comm = 2 * 2 * 2 * (1e-6 + l * 64 * 2 * 0.5 / 1e9);
  const double pp_comm = 2 * (1e-6 + l * 64 * 2 / 2 / 1e9);
  EXPECT_NEAR(split(l) / (compute + tp_comm + pp_comm), 1, 1e-9);
  EXPECT_THROW(view.latency(with_cp(2)), InputError);
}

TEST(CostViewsHydraulis, MaxLenFromAppendixB1) {
  const CostModel cost(view_tiny_model(), view_tiny_cluster(), flat_profile());
  const HydraulisView view(cost, 8);
  const double capacity = 1e9 - 0.25 * 1024 * 1024 * 1024;
  const double model_params = view_tiny_model().parameters();
  // <1, 1>: 16-bit parameters and gradients of the whole model (2 B at ZeRO-2), optimizer states over all 8 GPUs
  // (14 B / 8), activations 13072 B per token.
  EXPECT_EQ(view.max_len(tp_pp(1, 1)),
            static_cast<Tokens>(std::floor((capacity - 201984.0 * 2 - model_params * 14 / 8) / 13072)));
  // <1, 2>: one layer per stage. First stage: 2 micro-batches x 1536 B; last stage: 1536 + 10000 B (logits).
  EXPECT_EQ(view.max_len(tp_pp(1, 2)),
            static_cast<Tokens>(std::floor((capacity - 100992.0 * 2 - model_params * 14 / 8) / 11536)));
  EXPECT_THROW(view.max_len(with_cp(2)), InputError);
}

TEST(CostViewsHydraulis, MaxLenShrinksWithSmallerModelShards) {
  const CostModel cost(view_tiny_model(), view_tiny_cluster(), flat_profile());
  const HydraulisView view(cost, 8);
  EXPECT_LT(view.max_len(tp_pp(1, 1)), view.max_len(tp_pp(2, 1)));
  EXPECT_LT(view.max_len(tp_pp(2, 1)), view.max_len(tp_pp(4, 1)));
  EXPECT_LT(view.max_len(tp_pp(1, 1)), view.max_len(tp_pp(1, 2)));
  EXPECT_LT(view.max_len(tp_pp(2, 1)), view.max_len(tp_pp(2, 2)));
  // Optimizer states are sharded across all GPUs even when the scenario runs ZeRO-0 for other policies.
  const CostModel zero0(view_tiny_model(), view_tiny_cluster(), flat_profile(), CostModelOptions{.zero_stage = 0});
  const CostModel zero1(view_tiny_model(), view_tiny_cluster(), flat_profile(), CostModelOptions{.zero_stage = 1});
  EXPECT_EQ(HydraulisView(zero0, 8).max_len(tp_pp(1, 1)), HydraulisView(zero1, 8).max_len(tp_pp(1, 1)));
  const CostModel tiny_gpu(view_tiny_model(), view_tiny_cluster(0.25 * 1024 * 1024 * 1024 + 1e5), flat_profile());
  EXPECT_EQ(HydraulisView(tiny_gpu, 8).max_len(tp_pp(1, 1)), 0);
}

}  // namespace hydraulis_view_test
}  // namespace lcsim::hydraulis
