// The SimGrid executor end to end. Each test runs one simulation in a child process (sim_test_support.hpp).
#include "engine/executor.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "base/errors.hpp"
#include "model/plan_demand.hpp"
#include "model/profile.hpp"
#include "program/estimate.hpp"
#include "tests/sim_test_support.hpp"

namespace lcsim {
namespace sim_executor_test {

using testing::h100_qwen_cost;
using testing::micro_batch;
using testing::on_rank;
using testing::replica;
using testing::scheme;
using testing::sharded;
using testing::sim_tiny_cost;
using testing::simulate_in_child;
using testing::tiny_profile;

std::vector<int> gpus(int n) {
  std::vector<int> out(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = i;
  return out;
}

void expect_relative(double simulated, double expected, double tolerance, const std::string& what) {
  EXPECT_NEAR(simulated, expected, tolerance * std::max(1e-12, std::abs(expected))) << what;
}

TEST(SimExecutor, MatchesTheClosedFormEstimateOnOneNodeWithoutContention) {
  const CostModel cost = h100_qwen_cost(1);
  std::vector<IterationPlan> plans(3);
  // DeepSpeed-Ulysses: one sharded sequence per micro-batch, CP = 8.
  plans[0].replicas = {replica(scheme(1, 1, 8), gpus(8),
                               {micro_batch({sharded(1, 8192)}), micro_batch({sharded(2, 32768)}),
                                micro_batch({sharded(3, 2048)}), micro_batch({sharded(4, 65536)})})};
  // TP 2 x CP 4, local and sharded sequences mixed (every micro-batch shards something, so the ranks meet).
  plans[1].replicas = {replica(scheme(2, 1, 4), gpus(8),
                               {micro_batch({sharded(5, 16384), on_rank(6, 4096, 1), on_rank(7, 2048, 3)}),
                                micro_batch({sharded(8, 8192), on_rank(9, 1024, 0)})})};
  // Two DP replicas of CP 4 with ZeRO sync between them, and Skrull's overlap on one micro-batch each.
  plans[2].replicas = {replica(scheme(1, 1, 4), {0, 1, 2, 3},
                               {micro_batch({sharded(10, 16384), on_rank(11, 8192, 2), on_rank(12, 512, 0)})}, true),
                       replica(scheme(1, 1, 4), {4, 5, 6, 7}, {micro_batch({sharded(13, 4096)})}, true)};
  const auto outcomes = simulate_in_child(plans, cost);
  ASSERT_EQ(outcomes.size(), plans.size());
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const IterationEstimate estimate = program::estimate_iteration(plans[i], cost);
    // The issue asks for 1%; the design is exact (flows alone take the cost model's time), up to byte rounding.
    expect_relative(outcomes[i].seconds, estimate.seconds, 1e-6, "plan " + std::to_string(i));
    ASSERT_EQ(outcomes[i].busy_seconds.size(), 8u);
    for (std::size_t g = 0; g < 8; ++g) {
      expect_relative(outcomes[i].busy_seconds[g], estimate.busy_seconds[g], 1e-6,
                      "busy, plan " + std::to_string(i) + ", GPU " + std::to_string(g));
      expect_relative(outcomes[i].peak_bytes[g], estimate.peak_bytes[g], 1e-9,
                      "peak, plan " + std::to_string(i) + ", GPU " + std::to_string(g));
    }
  }
  // Iterations follow each other on one clock.
  EXPECT_NEAR(outcomes[1].start_s, outcomes[0].start_s + outcomes[0].seconds, 1e-9);
}

// training.overlap_gradient_sync: the hidden parts of the sync run beside compute steps, which the simulator runs
// as the estimate replays them; and they save time.
TEST(SimExecutor, OverlappedGradientSyncMatchesTheEstimate) {
  const CostModel overlapping = h100_qwen_cost(1, CostModelOptions{.overlap_gradient_sync = true});
  std::vector<IterationPlan> plans(2);
  // Eight DP replicas, two micro-batches each: the reduce-scatter beside the second, the all-gather beside the first.
  for (int g = 0; g < 8; ++g)
    plans[0].replicas.push_back(
        replica(scheme(1, 1, 1), {g},
                {micro_batch({on_rank(2 * g, 4096 + 512 * g, 0)}), micro_batch({on_rank(2 * g + 1, 8192, 0)})}));
  // Two DP replicas of two pipeline stages: the sync beside each stage's last backward and first forward.
  for (int r = 0; r < 2; ++r)
    plans[1].replicas.push_back(
        replica(scheme(1, 2, 1), {4 * r, 4 * r + 1},
                {micro_batch({on_rank(10 * r, 4096, 0)}), micro_batch({on_rank(10 * r + 1, 2048, 0)})}));
  const auto outcomes = simulate_in_child(plans, overlapping);
  ASSERT_EQ(outcomes.size(), plans.size());
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const IterationEstimate estimate = program::estimate_iteration(plans[i], overlapping);
    EXPECT_LT(estimate.seconds, program::estimate_iteration(plans[i], h100_qwen_cost(1)).seconds) << "plan " << i;
    // Flat replicas: nothing else moves while the hidden parts do, so the two agree exactly. In the pipeline the
    // all-gather's hidden part shares the stage's NVLink with its activation transfers, a contention the estimate
    // leaves out: the simulation may only be slower, and not by much.
    if (i == 0) {
      expect_relative(outcomes[i].seconds, estimate.seconds, 1e-6, "plan 0");
    } else {
      EXPECT_GE(outcomes[i].seconds, estimate.seconds * (1 - 1e-9));
      expect_relative(outcomes[i].seconds, estimate.seconds, 1e-3, "plan 1");
    }
  }
}

TEST(SimExecutor, OverlappedRanksStartOneLayerOfLocalWorkEarly) {
  // CP 2, overlap, toy model (2 layers). Micro-batch 0: rank 0 has a local sequence of 30 tokens, micro-batch 1:
  // rank 1 has. Local compute of 30 tokens 377.28 s, the 4-token sharded sequence 19.328 s, its all-to-alls
  // 18.56 s (16 of them 1 s latency each), gradient sync 0.5 s.
  //   micro-batch 0: all-to-all [0, 18.56]; rank 0 ends at 377.28 + 19.328 = 396.608, rank 1 at 37.888.
  //   micro-batch 1: the all-to-all waits for rank 0: [396.608, 415.168]. Rank 1 may run one layer (188.64 s)
  //   of its local compute before it: from 396.608 - 188.64 = 207.968 to 585.248, then its shard: 604.576.
  //   iteration: 604.576 + 0.5 = 605.076 s. The estimate replays the same program: the same.
  const CostModel cost = sim_tiny_cost(1, 2);
  std::vector<IterationPlan> plans(1);
  plans[0].replicas = {replica(
      scheme(1, 1, 2), {0, 1},
      {micro_batch({sharded(1, 4), on_rank(2, 30, 0)}), micro_batch({sharded(3, 4), on_rank(4, 30, 1)})}, true)};
  const auto outcomes = simulate_in_child(plans, cost);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_NEAR(outcomes[0].seconds, 605.076, 1e-6);
  EXPECT_NEAR(program::estimate_iteration(plans[0], cost).seconds, 605.076, 1e-6);
  // Busy: rank 1 overlaps micro-batch 1's all-to-all with its local compute; rank 0 does not wait-count.
  EXPECT_NEAR(outcomes[0].busy_seconds[0], 377.28 + 2 * 19.328 + 18.56 + 0.5, 1e-6);
  EXPECT_NEAR(outcomes[0].busy_seconds[1], 18.56 + 377.28 + 2 * 19.328 + 0.5, 1e-6);
}

TEST(SimExecutor, OneForwardOneBackwardPipelineIsPacedByItsSlowestStage) {
  // Two stages of one toy layer; four equal micro-batches of 10 tokens; free transfers. Stage 0: forward 14.4 s
  // (GEMM 12.8 + attention 1.6), backward 29.6 s; stage 1 adds the head: 59.36 s per micro-batch in all. The
  // last stage runs back to back once fed: 14.4 + 4 x 59.36 + 29.6 = 281.44 s, in the estimate too.
  Profile profile = tiny_profile();
  for (auto& fit : profile.collectives)
    if (fit.op == CollectiveOp::SendRecv) fit.segments[0].latency_us = 0;
  const CostModel cost = sim_tiny_cost(1, 2, profile);
  std::vector<IterationPlan> plans(1);
  std::vector<MicroBatch> mbs;
  for (int m = 0; m < 4; ++m) mbs.push_back(micro_batch({on_rank(m, 10, 0)}));
  plans[0].replicas = {replica(scheme(1, 2, 1), {0, 1}, mbs)};
  const auto outcomes = simulate_in_child(plans, cost);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_NEAR(outcomes[0].seconds, 281.44, 1e-6);
  EXPECT_NEAR(program::estimate_iteration(plans[0], cost).seconds, 281.44, 1e-6);
  // Busy: stage 0 computes 4 x 44 s, stage 1 4 x 59.36 s; pipeline waits are idle.
  EXPECT_NEAR(outcomes[0].busy_seconds[0], 176.0, 1e-6);
  EXPECT_NEAR(outcomes[0].busy_seconds[1], 237.44, 1e-6);
  // Propagation latency keeps the waits: stage 0 ends with the last backward, the iteration's end (no gradient
  // sync at shard degree 1); the estimate says the same per GPU.
  EXPECT_NEAR(outcomes[0].propagation_end_s[0], 281.44, 1e-6);
  const auto estimate = program::estimate_iteration(plans[0], cost);
  EXPECT_NEAR(outcomes[0].propagation_end_s[1], estimate.propagation_end_s[1], 1e-6);
  EXPECT_GT(outcomes[0].propagation_end_s[1], outcomes[0].busy_seconds[1] + 14.4 - 1e-6);
  // 1F1B keeps two micro-batches alive on stage 0 (8 bytes per token), one on stage 1 (8 + 16 bytes of logits
  // per token); the toy has no static bytes. The estimate's peaks agree.
  EXPECT_NEAR(outcomes[0].peak_bytes[0], 2 * 10 * 8, 1e-9);
  EXPECT_NEAR(outcomes[0].peak_bytes[1], 10 * 24, 1e-9);
  const auto peaks = estimate_peak_bytes(plans[0], cost);
  EXPECT_NEAR(outcomes[0].peak_bytes[0], peaks[0], 1e-9);
  EXPECT_NEAR(outcomes[0].peak_bytes[1], peaks[1], 1e-9);
}

TEST(SimExecutor, PhasesRunInOrderWithTheStrategySwitch) {
  Profile profile = tiny_profile();
  profile.compute.hot_switch_us_per_mparam = 1e6;
  const CostModel cost = sim_tiny_cost(1, 2, profile);
  std::vector<IterationPlan> plans(1);
  plans[0].replicas = {replica(scheme(1, 1, 1), {0}, {micro_batch({on_rank(1, 10, 0)})}, false, 0),
                       replica(scheme(1, 1, 1), {1}, {micro_batch({on_rank(2, 30, 0)})}, false, 0),
                       replica(scheme(1, 1, 2), {0, 1}, {micro_batch({sharded(3, 20)})}, false, 1)};
  const auto outcomes = simulate_in_child(plans, cost);
  ASSERT_EQ(outcomes.size(), 1u);
  const IterationEstimate estimate = program::estimate_iteration(plans[0], cost);
  EXPECT_NEAR(outcomes[0].seconds, estimate.seconds, 1e-6 * estimate.seconds);
  EXPECT_NEAR(outcomes[0].busy_seconds[0], estimate.busy_seconds[0], 1e-6 * estimate.seconds);
}

TEST(SimExecutor, PeakMemoryAboveCapacityIsMeasuredNotFatal) {
  // 50 bytes of GPU memory: any micro-batch overflows it. The simulation still completes.
  const CostModel cost = sim_tiny_cost(1, 2, tiny_profile(), 50);
  std::vector<IterationPlan> plans(1);
  plans[0].replicas = {replica(scheme(1, 1, 2), {0, 1}, {micro_batch({sharded(1, 64)})})};
  const auto outcomes = simulate_in_child(plans, cost);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_GT(outcomes[0].seconds, 0);
  EXPECT_GT(outcomes[0].peak_bytes[0], cost.capacity_bytes());
  EXPECT_NEAR(outcomes[0].peak_bytes[0], estimate_peak_bytes(plans[0], cost)[0], 1e-9);
}

TEST(SimExecutor, SpansTellComputeFromCommunication) {
  const CostModel cost = sim_tiny_cost(1, 2);
  std::vector<IterationPlan> plans(1);
  plans[0].replicas = {replica(scheme(1, 1, 2), {0, 1}, {micro_batch({on_rank(1, 10, 0), sharded(2, 20)})})};
  sim::SimulationOptions options;
  options.record_spans = true;
  const auto outcomes = simulate_in_child(plans, cost, options);
  ASSERT_EQ(outcomes.size(), 1u);
  std::vector<program::GpuSpan> gpu0;
  for (const auto& s : outcomes[0].spans)
    if (s.gpu == 0) gpu0.push_back(s);
  // Compute 217.92 s, all-to-all 28.8 s, reduce-scatter and all-gather 0.25 s each (estimate_test.cpp's figures).
  ASSERT_EQ(gpu0.size(), 4u);
  EXPECT_EQ(gpu0[0].kind, program::WorkKind::Compute);
  EXPECT_NEAR(gpu0[0].end_s - gpu0[0].start_s, 217.92, 1e-9);
  EXPECT_EQ(gpu0[0].micro_batch, 0);
  EXPECT_EQ(gpu0[1].kind, program::WorkKind::CpAllToAll);
  EXPECT_NEAR(gpu0[1].start_s, gpu0[0].end_s, 1e-9);
  EXPECT_NEAR(gpu0[1].end_s - gpu0[1].start_s, 28.8, 1e-6);
  EXPECT_EQ(gpu0[2].kind, program::WorkKind::GradReduceScatter);
  EXPECT_EQ(gpu0[3].kind, program::WorkKind::GradAllGather);
  // Rank 1 computes for 114.56 s, then waits for rank 0: its all-to-all span starts when rank 0 is ready.
  for (const auto& s : outcomes[0].spans)
    if (s.gpu == 1 && s.kind == program::WorkKind::CpAllToAll) {
      EXPECT_NEAR(s.start_s, gpu0[1].start_s, 1e-9);
    }
}

}  // namespace sim_executor_test
}  // namespace lcsim

namespace lcsim {
namespace sim_executor_test {

TEST(SimExecutor, HundredsOfGpusEndTheIterationWithTheSlowest) {
  // 40 nodes x 8 GPUs, the ZeRO collectives over 40 replicas each. Replicas of unequal work: no GPU may start
  // iteration 2 before the slowest has ended iteration 1, and every collective must wait for its slowest member,
  // or the times differ.
  const CostModel cost = h100_qwen_cost(40);
  std::vector<IterationPlan> plans(2);
  for (std::size_t p = 0; p < plans.size(); ++p)
    for (int node = 0; node < cost.cluster().nodes; ++node) {
      std::vector<int> members;
      for (int g = 0; g < 8; ++g) members.push_back(node * 8 + g);
      const std::int64_t id = static_cast<std::int64_t>(p) * 1000 + node;
      const Tokens tokens = 2048 * (1 + (node * 7 + static_cast<int>(p) * 3) % 11);
      plans[p].replicas.push_back(replica(scheme(1, 1, 8), members, {micro_batch({sharded(id, tokens)})}));
    }
  const auto outcomes = simulate_in_child(plans, cost);
  ASSERT_EQ(outcomes.size(), plans.size());
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const IterationEstimate estimate = program::estimate_iteration(plans[i], cost);
    // Nodes share no links but the fabric's, which the gradient rings cross evenly: no contention.
    expect_relative(outcomes[i].seconds, estimate.seconds, 1e-6, "plan " + std::to_string(i));
    ASSERT_EQ(outcomes[i].busy_seconds.size(), 320u);
  }
  EXPECT_NEAR(outcomes[1].start_s, outcomes[0].start_s + outcomes[0].seconds, 1e-9);
}

TEST(SimExecutor, IdleGpusReturningAtOnceDoNotDisturbTheNextIteration) {
  // 40 nodes, but each plan uses only some of them: the idle GPUs end each iteration where it starts (their actors
  // are never woken), the busy ones change from plan to plan. Every iteration must still take its estimate and
  // follow the previous one.
  const CostModel cost = h100_qwen_cost(40);
  std::vector<IterationPlan> plans(6);
  for (std::size_t p = 0; p < plans.size(); ++p) {
    const int first = static_cast<int>(p % 3) * 10;  // nodes [first, first + 7) busy, the other 33 idle
    for (int node = first; node < first + 7; ++node) {
      std::vector<int> members;
      for (int g = 0; g < 8; ++g) members.push_back(node * 8 + g);
      const std::int64_t id = static_cast<std::int64_t>(p) * 1000 + node;
      const Tokens tokens = 1024 * (1 + (node * 5 + static_cast<int>(p)) % 9);
      plans[p].replicas.push_back(replica(scheme(1, 1, 8), members, {micro_batch({sharded(id, tokens)})}));
    }
  }
  const auto outcomes = simulate_in_child(plans, cost);
  ASSERT_EQ(outcomes.size(), plans.size());
  for (std::size_t i = 0; i < plans.size(); ++i) {
    expect_relative(outcomes[i].seconds, program::estimate_iteration(plans[i], cost).seconds, 1e-6,
                    "plan " + std::to_string(i));
    if (i > 0) {
      EXPECT_NEAR(outcomes[i].start_s, outcomes[i - 1].start_s + outcomes[i - 1].seconds, 1e-9);
    }
  }
}

TEST(SimExecutor, AnIterationThatCannotBeBuiltMidRunIsRethrownAfterTheEngineStops) {
  // The profile has no InfiniBand all-to-all: the first plan's CP group stays in a node, the second spans two, so
  // building the second iteration fails between iterations, in an actor, while every other actor is parked. The
  // error must come out of simulate() after the first iteration, not hang or crash the run.
  Profile profile = tiny_profile();
  std::erase_if(profile.collectives, [](const CollectiveFit& fit) {
    return fit.op == CollectiveOp::AllToAll && fit.link == LinkClass::InfiniBand;
  });
  const CostModel cost = sim_tiny_cost(2, 2, profile);
  std::vector<IterationPlan> plans(2);
  plans[0].replicas = {replica(scheme(1, 1, 2), {0, 1}, {micro_batch({sharded(1, 20)})})};
  plans[1].index = 1;
  plans[1].replicas = {replica(scheme(1, 1, 2), {0, 2}, {micro_batch({sharded(2, 20)})})};
  const std::string text = testing::in_child_process([&] {
    std::vector<const IterationPlan*> pointers = {&plans[0], &plans[1]};
    std::size_t finished = 0;
    try {
      sim::simulate(pointers, cost, {}, [&](program::IterationOutcome&&) { ++finished; });
    } catch (const InputError& e) {
      return std::to_string(finished) + " then " + std::string(e.what());
    }
    return std::string("no error");
  });
  EXPECT_EQ(text.substr(0, 7), "1 then ") << text;
}

}  // namespace sim_executor_test
}  // namespace lcsim
