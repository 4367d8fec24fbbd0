// Ring attention in the simulator: the program runs each ring exchange beside the attention blocks that hide it
// (hand-worked on the toy cost model of policy_test_fixtures.hpp), the ring's flows go to each rank's successor,
// and without contention the simulated time is the estimate's. SimGrid runs in child processes.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "engine/platform.hpp"
#include "engine/simgrid_collectives.hpp"
#include "model/plan_demand.hpp"
#include "program/estimate.hpp"
#include "program/iteration_program.hpp"
#include "tests/sim_test_support.hpp"

namespace lcsim {
namespace sim_ring_test {

using program::Step;
using program::WorkKind;
using testing::micro_batch;
using testing::on_rank;
using testing::replica;
using testing::scheme;
using testing::sharded;
using testing::simulate_in_child;

constexpr double kTol = 1e-9;

/// The toy model and profile (1000 FLOP/s, efficiency 1) with ring attention and send_recv taking `latency_s`.
CostModel toy_ring_cost(int nodes, int gpus_per_node, double latency_s) {
  Profile profile = testing::tiny_profile();
  for (auto& fit : profile.collectives)
    if (fit.op == CollectiveOp::SendRecv) fit.segments.front().latency_us = latency_s * 1e6;
  ClusterSpec cluster = testing::tiny_cluster(nodes, gpus_per_node);
  cluster.nvlink_GBps = 450;
  cluster.ib_GBps = 50;
  return CostModel(testing::tiny_model(2), cluster, std::move(profile),
                   CostModelOptions{.zero_stage = 2, .cp_attention = CpAttention::Zigzag});
}

// Sequence 1 (10 tokens) local on CP rank 0, sequence 2 (20 tokens) sharded over CP = 2 (as sim_program_test.cpp):
// rank 0 computes 217.92 s (103.36 local, 114.56 sharded), rank 1 114.56 s. The sharded sequence's forward
// attention is 2 * 20^2 * 8 / 2 FLOPs = 3.2 s per layer per GPU, two zigzag steps of 1.6 s; with cp = 2 the one
// K,V transfer per layer runs beside step 0: 1.6 s forward, 2.5 x 1.6 = 4 s backward, and backward's dK,dV
// transfer after the last step runs alone. With 5 s per send_recv step, over 2 layers the forward exchange takes
// 10 s beside 3.2 s (6.8 s exposed), the backward K,V 10 s beside 8 s (2 s exposed), the last dK,dV 10 s exposed.
using testing::dacp_plan;

TEST(SimRing, EachExchangeRunsBesideTheAttentionBlocksThatHideIt) {
  const CostModel cost = toy_ring_cost(1, 2, 5);
  const auto program = program::build_program(dacp_plan(false), cost, {});
  using T = Step::Type;
  const auto& rank0 = program.gpus[0];
  // SetStatic, compute, forward ring, backward K,V ring, last dK,dV, reduce-scatter, all-gather
  ASSERT_EQ(rank0.size(), 7u);
  EXPECT_EQ(rank0[1].type, T::Compute);
  EXPECT_NEAR(rank0[1].seconds, 217.92 - 3.2 - 8.0, kTol);
  EXPECT_NEAR(program.gpus[1][1].seconds, 114.56 - 3.2 - 8.0, kTol);
  const double beside[] = {3.2, 8.0, 0.0};
  for (std::size_t e = 0; e < 3; ++e) {
    const Step& step = rank0[2 + e];
    EXPECT_EQ(step.type, e < 2 ? T::ComputeWithCollective : T::Collective) << e;
    EXPECT_EQ(step.kind, e < 2 ? WorkKind::Compute : WorkKind::CpRing) << e;
    if (e < 2) {
      EXPECT_NEAR(step.seconds, beside[e], kTol);
    }
    EXPECT_EQ(step.lead_s, 0.0);
    EXPECT_EQ(program.gpus[1][2 + e].index, step.index);  // both ranks join one ring
    const auto& spec = program.collectives[static_cast<std::size_t>(step.index)];
    EXPECT_EQ(spec.kind, WorkKind::CpRing);
    EXPECT_EQ(spec.gpus, (std::vector<int>{0, 1}));
    EXPECT_NEAR(spec.time.latency_s, 10.0, kTol);  // 2 layers x 1 step x 5 s
  }
  // The block takes compute + 6.8 + 2 + 10 s: what the estimate charges. A ring whose exchange were always hidden
  // would charge the compute alone.
  const double sync = 0.5;  // gradient reduce-scatter and all-gather over the 2 GPUs
  EXPECT_NEAR(program::estimate_iteration(dacp_plan(false), cost).seconds, 217.92 + 6.8 + 2.0 + 10.0 + sync, 1e-6);
  EXPECT_TRUE(program::is_communication(WorkKind::CpRing));
}

TEST(SimRing, OverlapDealsTheLocalComputeToWhatTheRingLeavesExposed) {
  const CostModel cost = toy_ring_cost(1, 2, 5);
  const auto program = program::build_program(dacp_plan(true), cost, {});
  const auto& rank0 = program.gpus[0];
  ASSERT_GE(rank0.size(), 4u);
  EXPECT_EQ(rank0[1].kind, WorkKind::ComputeDist);
  EXPECT_NEAR(rank0[1].seconds, 114.56 - 11.2, kTol);
  // Forward exchange: its 3.2 s of attention plus the 6.8 s of local compute it leaves exposed; the backward K,V
  // its 8 s plus 2 s; the last dK,dV the rest of the local compute, 103.36 - 8.8.
  EXPECT_NEAR(rank0[2].seconds, 3.2 + 6.8, kTol);
  EXPECT_NEAR(rank0[3].seconds, 8.0 + 2.0, kTol);
  EXPECT_NEAR(rank0[4].seconds, 103.36 - 8.8, kTol);
  // Sum: 103.36 + max(10, 10) + max(10, 10) + max(10, 94.56) = 217.92 = max(18.8 exposed, 103.36 local) + 114.56.
  EXPECT_NEAR(program::estimate_iteration(dacp_plan(true), cost).seconds, 217.92 + 0.5, 1e-6);
  // Rank 1 has no local work: only the attention beside its rings, and the last transfer alone.
  EXPECT_NEAR(program.gpus[1][2].seconds, 3.2, kTol);
  EXPECT_NEAR(program.gpus[1][3].seconds, 8.0, kTol);
  EXPECT_EQ(program.gpus[1][4].type, Step::Type::Collective);
}

TEST(SimRing, PipelinesRunTheForwardRingInTheForwardPassAndTheOthersInTheBackward) {
  const CostModel cost = toy_ring_cost(1, 4, 5);
  IterationPlan plan;
  ParallelScheme s = scheme(1, 2, 2, Recompute::Full);  // every layer recomputes its forward ring in backward
  plan.replicas = {replica(s, {0, 1, 2, 3}, {micro_batch({sharded(1, 20)})})};
  const auto program = program::build_program(plan, cost, {});
  // Stage 0 is GPUs 0 (CP rank 0) and 1; one layer per stage: forward 1 ring step, backward 1 recomputed forward
  // step and 1 backward step.
  std::vector<std::pair<WorkKind, double>> rings;  // (compute kind, latency)
  for (const Step& step : program.gpus[0])
    if (step.type == Step::Type::ComputeWithCollective)
      rings.emplace_back(step.kind, program.collectives[static_cast<std::size_t>(step.index)].time.latency_s);
  ASSERT_EQ(rings.size(), 3u);
  EXPECT_EQ(rings[0], std::make_pair(WorkKind::Forward, 5.0));
  EXPECT_EQ(rings[1], std::make_pair(WorkKind::Backward, 5.0));
  EXPECT_EQ(rings[2], std::make_pair(WorkKind::Backward, 5.0));
}

TEST(SimRing, RingFlowsGoToTheSuccessorOnNvLinkInsideANodeAndOverTheNicsAcross) {
  const std::string text = testing::in_child_process([] {
    const auto engine = testing::make_sim_engine();
    ClusterSpec c = testing::tiny_cluster(2, 2);
    c.nvlink_GBps = 400;
    c.ib_GBps = 50;
    const sim::Platform platform(c, sim::link_uses(c, {0, 1, 2, 3}, WorkKind::CpRing));
    program::CollectiveSpec spec;
    spec.gpus = {0, 1, 2, 3};
    spec.link = LinkClass::InfiniBand;
    spec.time = {1e-3, 1e-3};
    spec.kind = WorkKind::CpRing;
    const auto plan = sim::plan_flows(platform, spec);
    std::ostringstream out;
    // 0 -> 1 and 2 -> 3 inside a node (GPU hosts), 1 -> 2 and 3 -> 0 across (NICs), 1 ms at 50 GB/s each.
    out << plan.flows.size() << ' ' << plan.bytes << ' ' << (plan.flows[0].from == platform.gpu(0)) << ' '
        << (plan.flows[0].to == platform.gpu(1)) << ' ' << (plan.flows[1].from == platform.nic(1)) << ' '
        << (plan.flows[1].to == platform.nic(2)) << ' ' << (plan.flows[3].to == platform.nic(0));
    return out.str();
  });
  EXPECT_EQ(text, "4 50000000 1 1 1 1 1");
}

std::vector<int> gpus(int first, int n) {
  std::vector<int> out;
  for (int i = 0; i < n; ++i) out.push_back(first + i);
  return out;
}

void expect_matches_estimate(const std::vector<IterationPlan>& plans, const CostModel& cost) {
  const auto outcomes = simulate_in_child(plans, cost);
  ASSERT_EQ(outcomes.size(), plans.size());
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const IterationEstimate estimate = program::estimate_iteration(plans[i], cost);
    // The issue asks for 1%; flows alone take the cost model's time, so it agrees up to byte rounding.
    EXPECT_NEAR(outcomes[i].seconds, estimate.seconds, 1e-6 * estimate.seconds) << "plan " << i;
    for (std::size_t g = 0; g < estimate.busy_seconds.size(); ++g)
      EXPECT_NEAR(outcomes[i].busy_seconds[g], estimate.busy_seconds[g], 1e-6 * estimate.seconds + 1e-12)
          << "busy, plan " << i << ", GPU " << g;
  }
}

TEST(SimRing, MatchesTheClosedFormEstimateOnOneNodeWithoutContention) {
  // Every token-sharding variant: the program's steps are what both the estimate and the simulator run.
  for (CpAttention mode : {CpAttention::Ring, CpAttention::Zigzag, CpAttention::AllGather}) {
    SCOPED_TRACE(std::string(to_string(mode)));
    const CostModel cost = testing::h100_qwen_cost(1, CostModelOptions{.zero_stage = 2, .cp_attention = mode});
    std::vector<IterationPlan> plans(3);
    // DeepSpeed-style: one sharded sequence per micro-batch over CP 8, from 2K (ring exposed) to 64K (hidden).
    plans[0].replicas = {replica(scheme(1, 1, 8), gpus(0, 8),
                                 {micro_batch({sharded(1, 8192)}), micro_batch({sharded(2, 32768)}),
                                  micro_batch({sharded(3, 2048)}), micro_batch({sharded(4, 65536)})})};
    // TP 2 x CP 4, local and sharded sequences mixed.
    plans[1].replicas = {replica(scheme(2, 1, 4), gpus(0, 8),
                                 {micro_batch({sharded(5, 16384), on_rank(6, 4096, 1), on_rank(7, 2048, 3)}),
                                  micro_batch({sharded(8, 8192), on_rank(9, 1024, 0)})})};
    // Two DP replicas of CP 4 with Skrull's overlap, full recomputation on one of them.
    plans[2].replicas = {
        replica(scheme(1, 1, 4), {0, 1, 2, 3},
                {micro_batch({sharded(10, 16384), on_rank(11, 8192, 2), on_rank(12, 512, 0)}),
                 micro_batch({sharded(13, 1024), on_rank(14, 30000, 1)})},
                true),
        replica(scheme(1, 1, 4, Recompute::Full), {4, 5, 6, 7}, {micro_batch({sharded(15, 4096)})}, true)};
    expect_matches_estimate(plans, cost);
  }
}

TEST(SimRing, MatchesTheEstimateOnARingAcrossTwoNodes) {
  for (CpAttention mode : {CpAttention::Ring, CpAttention::Zigzag, CpAttention::AllGather}) {
    SCOPED_TRACE(std::string(to_string(mode)));
    const CostModel cost = testing::h100_qwen_cost(2, CostModelOptions{.zero_stage = 2, .cp_attention = mode});
    std::vector<IterationPlan> plans(1);
    plans[0].replicas = {
        replica(scheme(1, 1, 16), gpus(0, 16), {micro_batch({sharded(1, 4096)}), micro_batch({sharded(2, 131072)})})};
    expect_matches_estimate(plans, cost);
  }
}

}  // namespace sim_ring_test
}  // namespace lcsim
