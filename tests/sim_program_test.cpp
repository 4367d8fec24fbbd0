// The simulator's iteration programs on the toy cost model of policy_test_fixtures.hpp (hand-worked figures as in
// estimate_test.cpp): no SimGrid involved.
#include "program/iteration_program.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "base/errors.hpp"
#include "model/plan_demand.hpp"
#include "tests/policy_test_fixtures.hpp"

namespace lcsim {
namespace sim_program_test {

using program::Step;
using program::WorkKind;
using testing::micro_batch;
using testing::on_rank;
using testing::replica;
using testing::scheme;
using testing::sharded;
using testing::tiny_cost;
using testing::tiny_profile;

constexpr double kTol = 1e-9;

// Sequence 1 (10 tokens) local on CP rank 0, sequence 2 (20 tokens) sharded over CP=2 (estimate_test.cpp):
// rank 0 local 103.36 s, sharded 114.56 s, both together 217.92 s, all-to-alls 28.8 s (16 s of it latency).
using testing::dacp_plan;

std::vector<Step::Type> types(const std::vector<Step>& steps) {
  std::vector<Step::Type> out;
  for (const auto& s : steps) out.push_back(s.type);
  return out;
}

TEST(SimProgram, FlatReplicaComputesThenMeetsInTheAllToAll) {
  const CostModel cost = tiny_cost(1, 2);
  const auto program = program::build_program(dacp_plan(false), cost, {});
  ASSERT_EQ(program.gpus.size(), 2u);
  using T = Step::Type;
  // SetStatic, compute, all-to-all, then the ZeRO reduce-scatter and all-gather (no optimizer time in the toy).
  EXPECT_EQ(types(program.gpus[0]),
            (std::vector<T>{T::SetStatic, T::Compute, T::Collective, T::Collective, T::Collective}));
  EXPECT_NEAR(program.gpus[0][1].seconds, 217.92, kTol);
  EXPECT_NEAR(program.gpus[1][1].seconds, 114.56, kTol);
  // Both ranks join the same all-to-all, timed as the cost model times it.
  const int a2a = program.gpus[0][2].index;
  EXPECT_EQ(program.gpus[1][2].index, a2a);
  const auto& spec = program.collectives[static_cast<std::size_t>(a2a)];
  EXPECT_EQ(spec.kind, WorkKind::CpAllToAll);
  EXPECT_EQ(spec.gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(spec.link, LinkClass::NvLink);
  EXPECT_NEAR(spec.time.latency_s, 16.0, kTol);
  EXPECT_NEAR(spec.time.seconds(), 28.8, kTol);
  EXPECT_EQ(program.collectives[static_cast<std::size_t>(program.gpus[0][3].index)].kind, WorkKind::GradReduceScatter);
  EXPECT_EQ(program.collectives[static_cast<std::size_t>(program.gpus[0][4].index)].kind, WorkKind::GradAllGather);
  EXPECT_NEAR(program.collectives[static_cast<std::size_t>(program.gpus[0][4].index)].time.seconds(), 0.25, kTol);
  // Rank 0 holds 10 local + 10 sharded tokens from its compute to the end of the all-to-all.
  const double held = cost.activation_bytes_per_token(scheme(1, 1, 2), 2, true) * 20;
  EXPECT_NEAR(program.gpus[0][1].alloc_bytes, held, kTol);
  EXPECT_NEAR(program.gpus[0][2].free_bytes, held, kTol);
}

TEST(SimProgram, WithoutWorkDescriptionsTheStepsAndTimesAreTheSame) {
  // The simulator builds programs without work descriptions (ProgramOptions::describe_work): no works, no work
  // indices, no collective calls -- and nothing else may change.
  const CostModel cost = tiny_cost(1, 2);
  for (bool overlap : {false, true}) {
    program::ProgramOptions bare;
    bare.describe_work = false;
    const auto described = program::build_program(dacp_plan(overlap), cost, {});
    const auto program = program::build_program(dacp_plan(overlap), cost, bare);
    EXPECT_TRUE(program.works.empty());
    EXPECT_FALSE(described.works.empty());
    ASSERT_EQ(program.gpus.size(), described.gpus.size());
    for (std::size_t g = 0; g < program.gpus.size(); ++g) {
      ASSERT_EQ(program.gpus[g].size(), described.gpus[g].size());
      for (std::size_t i = 0; i < program.gpus[g].size(); ++i) {
        const Step& a = program.gpus[g][i];
        const Step& b = described.gpus[g][i];
        EXPECT_EQ(a.work, -1);
        EXPECT_TRUE(a.type == b.type && a.kind == b.kind && a.index == b.index && a.seconds == b.seconds &&
                    a.alloc_bytes == b.alloc_bytes && a.free_bytes == b.free_bytes && a.lead_s == b.lead_s &&
                    a.bytes == b.bytes && a.replica == b.replica && a.micro_batch == b.micro_batch)
            << "overlap " << overlap << ", GPU " << g << ", step " << i;
      }
    }
    ASSERT_EQ(program.collectives.size(), described.collectives.size());
    for (std::size_t c = 0; c < program.collectives.size(); ++c) {
      const auto& a = program.collectives[c];
      const auto& b = described.collectives[c];
      EXPECT_TRUE(a.calls.empty());
      EXPECT_FALSE(b.calls.empty()) << "collective " << c << " has calls to describe";
      EXPECT_TRUE(a.gpus == b.gpus && a.link == b.link && a.kind == b.kind && a.time.latency_s == b.time.latency_s &&
                  a.time.transfer_s == b.time.transfer_s);
    }
  }
}

TEST(SimProgram, OverlapRunsLocalComputeBesideTheAllToAll) {
  const CostModel cost = tiny_cost(1, 2);
  const auto program = program::build_program(dacp_plan(true), cost, {});
  const auto& rank0 = program.gpus[0];
  ASSERT_GE(rank0.size(), 3u);
  EXPECT_EQ(rank0[1].type, Step::Type::ComputeWithCollective);
  EXPECT_EQ(rank0[1].kind, WorkKind::ComputeLocal);
  EXPECT_NEAR(rank0[1].seconds, 103.36, kTol);
  EXPECT_EQ(rank0[2].type, Step::Type::Compute);
  EXPECT_EQ(rank0[2].kind, WorkKind::ComputeDist);
  EXPECT_NEAR(rank0[2].seconds, 114.56, kTol);
  // Rank 1 has no local sequence: the all-to-all alone, then its shard.
  EXPECT_EQ(program.gpus[1][1].type, Step::Type::Collective);
  EXPECT_EQ(program.gpus[1][1].index, rank0[1].index);
  EXPECT_NEAR(program.gpus[1][2].seconds, 114.56, kTol);
}

TEST(SimProgram, LayerBlocksSplitComputeAndCommunicationWithoutChangingTheirSums) {
  const CostModel cost = tiny_cost(1, 2);
  program::ProgramOptions per_layer;
  per_layer.layers_per_block = 1;
  const auto program = program::build_program(dacp_plan(false), cost, per_layer);
  std::vector<double> compute;
  double comm = 0;
  for (const auto& step : program.gpus[0]) {
    if (step.type == Step::Type::Compute) compute.push_back(step.seconds);
    if (step.type == Step::Type::Collective &&
        program.collectives[static_cast<std::size_t>(step.index)].kind == WorkKind::CpAllToAll)
      comm += program.collectives[static_cast<std::size_t>(step.index)].time.seconds();
  }
  // One layer over 20 tokens: 3.84*20 + 3.5*(1.6 + 3.2) = 93.6 s; the LM head (1.536*20) rides on the last block.
  ASSERT_EQ(compute.size(), 2u);
  EXPECT_NEAR(compute[0], 93.6, kTol);
  EXPECT_NEAR(compute[1], 93.6 + 30.72, kTol);
  EXPECT_NEAR(comm, 28.8, kTol);
}

TEST(SimProgram, PipelineStagesFollowOneForwardOneBackward) {
  // Two stages of one layer each, three single-sequence micro-batches.
  const CostModel cost = tiny_cost(1, 2);
  IterationPlan plan;
  plan.replicas = {
      replica(scheme(1, 2, 1), {0, 1},
              {micro_batch({on_rank(1, 10, 0)}), micro_batch({on_rank(2, 10, 0)}), micro_batch({on_rank(3, 10, 0)})})};
  const auto program = program::build_program(plan, cost, {});
  const auto passes = [](const std::vector<Step>& steps) {
    std::string out;
    for (const auto& s : steps) {
      if (s.kind == WorkKind::Forward) out += "F" + std::to_string(s.micro_batch) + " ";
      if (s.kind == WorkKind::Backward) out += "B" + std::to_string(s.micro_batch) + " ";
      if (s.type == Step::Type::Send) out += "s ";
      if (s.type == Step::Type::Recv) out += "r ";
    }
    return out;
  };
  EXPECT_EQ(passes(program.gpus[0]), "F0 s F1 s r B0 F2 s r B1 r B2 ");
  EXPECT_EQ(passes(program.gpus[1]), "r F0 B0 s r F1 B1 s r F2 B2 s ");
  // Forward + backward of a stage is its compute_seconds; the last stage carries the head.
  const std::vector<SequenceShare> work = {{10, 1}};
  double stage0 = 0, stage1 = 0;
  for (const auto& s : program.gpus[0])
    if (s.micro_batch == 0 && s.type == Step::Type::Compute) stage0 += s.seconds;
  for (const auto& s : program.gpus[1])
    if (s.micro_batch == 0 && s.type == Step::Type::Compute) stage1 += s.seconds;
  EXPECT_NEAR(stage0, cost.compute_seconds(work, scheme(1, 2, 1), 1, false), kTol);
  EXPECT_NEAR(stage1, cost.compute_seconds(work, scheme(1, 2, 1), 1, true), kTol);
  EXPECT_NEAR(program.gpus[0][1].seconds, cost.forward_seconds(work, scheme(1, 2, 1), 1, false), kTol);
  // Transfers: activations 0 -> 1 and gradients back, each timed as pp_transfer_seconds.
  ASSERT_EQ(program.transfers.size(), 6u);
  EXPECT_EQ(program.transfers[0].from, 0);
  EXPECT_EQ(program.transfers[0].to, 1);
  EXPECT_EQ(program.transfers[1].from, 1);
  EXPECT_NEAR(program.transfers[0].time.seconds(), cost.pp_transfer_seconds(10, 1, LinkClass::NvLink), kTol);
  // Stage 0 holds two micro-batches during warm-up: allocations run ahead of frees by two at most.
  double held = 0, peak = 0;
  for (const auto& s : program.gpus[0]) {
    held += s.alloc_bytes;
    peak = std::max(peak, held);
    held -= s.free_bytes;
  }
  EXPECT_NEAR(held, 0, kTol);
  EXPECT_NEAR(peak, 2 * 10 * cost.activation_bytes_per_token(scheme(1, 2, 1), 1, false), kTol);
}

TEST(SimProgram, GradientSyncReduceScattersThenStepsThenAllGathers) {
  Profile profile = tiny_profile();
  profile.compute.optimizer_us_per_mparam = 1e6;  // 1 s per million parameters held
  const CostModel cost = tiny_cost(1, 2, profile);
  const auto program = program::build_program(dacp_plan(false), cost, {});
  const auto& steps = program.gpus[1];
  ASSERT_EQ(steps.size(), 6u);
  EXPECT_EQ(program.collectives[static_cast<std::size_t>(steps[3].index)].kind, WorkKind::GradReduceScatter);
  EXPECT_EQ(steps[4].kind, WorkKind::Optimizer);
  EXPECT_NEAR(steps[4].seconds, cost.optimizer_seconds(scheme(1, 1, 2), 2, 0), kTol);
  EXPECT_EQ(program.collectives[static_cast<std::size_t>(steps[5].index)].kind, WorkKind::GradAllGather);
}

TEST(SimProgram, PhasesMeetAtABarrierThenPayTheSwitch) {
  Profile profile = tiny_profile();
  profile.compute.hot_switch_us_per_mparam = 1e6;
  profile.compute.optimizer_us_per_mparam = 1e6;
  const CostModel cost = tiny_cost(1, 2, profile);
  IterationPlan plan;
  plan.replicas = {replica(scheme(1, 1, 1), {0}, {micro_batch({on_rank(1, 10, 0)})}, false, 0),
                   replica(scheme(1, 1, 2), {0, 1}, {micro_batch({sharded(2, 20)})}, false, 1)};
  const auto program = program::build_program(plan, cost, {});
  for (const auto& steps : program.gpus) {
    const auto barrier = std::find_if(steps.begin(), steps.end(), [](const Step& s) {
      return s.type == Step::Type::Collective && s.kind == WorkKind::PhaseBarrier;
    });
    ASSERT_NE(barrier, steps.end());
    const auto switch_step =
        std::find_if(barrier, steps.end(), [](const Step& s) { return s.kind == WorkKind::Switch; });
    ASSERT_NE(switch_step, steps.end());
    EXPECT_NEAR(switch_step->seconds, cost.switch_seconds(scheme(1, 1, 2)), kTol);
    // Gradients accumulate over the phases: one optimizer step, after the switch into the last phase.
    EXPECT_EQ(std::count_if(steps.begin(), steps.end(), [](const Step& s) { return s.kind == WorkKind::Optimizer; }),
              1);
    EXPECT_EQ(std::find_if(steps.begin(), barrier, [](const Step& s) { return s.kind == WorkKind::GradReduceScatter; }),
              barrier);
  }
  // The barrier spans the world and moves no data.
  const auto& barrier = program.collectives[static_cast<std::size_t>(
      std::find_if(program.gpus[1].begin(), program.gpus[1].end(), [](const Step& s) {
        return s.kind == WorkKind::PhaseBarrier;
      })->index)];
  EXPECT_EQ(barrier.gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(barrier.time.seconds(), 0.0);
}

TEST(SimProgram, GpusThatRunTheSameStepsShareOneList) {
  // Four GPUs: a Ulysses replica (every sequence sharded) on GPUs 0 and 1, a DACP one (a local sequence on rank 0)
  // on 2 and 3. The first pair runs identical steps and shares a lane; the second does not.
  const CostModel cost = tiny_cost(1, 4);
  IterationPlan plan;
  plan.replicas = {replica(scheme(1, 1, 2), {0, 1}, {micro_batch({sharded(1, 20)}), micro_batch({sharded(2, 8)})}),
                   replica(scheme(1, 1, 2), {2, 3}, {micro_batch({on_rank(3, 10, 0), sharded(4, 20)})})};
  EXPECT_EQ(program::gpu_lanes(plan, 4), (std::vector<int>{0, 0, 1, 2}));
  const auto program = program::build_program(plan, cost, {});
  ASSERT_EQ(program.gpus.lane_count(), 3u);
  EXPECT_EQ(&program.gpus[0], &program.gpus[1]);  // stored once
  EXPECT_EQ(std::vector<int>(program.gpus.lane_gpus(0).begin(), program.gpus.lane_gpus(0).end()),
            (std::vector<int>{0, 1}));
  EXPECT_EQ(program.gpus[2].size(), program.gpus[3].size());
  EXPECT_NE(program.gpus[2][1].seconds, program.gpus[3][1].seconds);
  // The shared list is what each of its GPUs ran before lanes: one work per compute step, both micro-batches.
  using T = Step::Type;
  EXPECT_EQ(types(program.gpus[1]), (std::vector<T>{T::SetStatic, T::Compute, T::Collective, T::Compute, T::Collective,
                                                    T::Collective, T::Collective}));
  EXPECT_EQ(program.works.size(), 4u);  // lane 0's two computes, described once; one each for GPUs 2 and 3
  // A pipeline, tensor parallelism, a per-sequence split, or a GPU in another replica of a later phase: apart.
  IterationPlan tp = plan;
  tp.replicas = {replica(scheme(2, 1, 2), {0, 1, 2, 3}, {micro_batch({sharded(1, 20)})})};
  EXPECT_EQ(program::gpu_lanes(tp, 4), (std::vector<int>{0, 1, 2, 3}));
  IterationPlan split = plan;
  split.replicas[0].micro_batches[1].cp_split = CpSplit::PerSequence;
  EXPECT_EQ(program::gpu_lanes(split, 4), (std::vector<int>{0, 1, 2, 3}));
  IterationPlan phases = plan;
  phases.replicas.push_back(replica(scheme(1, 1, 1), {1}, {micro_batch({on_rank(5, 8, 0)})}, false, 1));
  EXPECT_EQ(program::gpu_lanes(phases, 4), (std::vector<int>{0, 1, 2, 3}));
  // A GPU in no replica runs the barriers alone, with the other idle ones.
  IterationPlan idle;
  idle.replicas = {replica(scheme(1, 1, 1), {1}, {micro_batch({on_rank(1, 8, 0)})})};
  EXPECT_EQ(program::gpu_lanes(idle, 4), (std::vector<int>{0, 1, 0, 0}));
}

TEST(SimProgram, RefusesAPlanTheEstimateWouldRefuse) {
  const CostModel cost = tiny_cost(1, 2);
  IterationPlan plan;
  plan.replicas = {replica(scheme(1, 1, 2), {0, 7}, {micro_batch({sharded(1, 20)})})};
  EXPECT_THROW(program::build_program(plan, cost, {}), PlanningError);
  plan.replicas = {replica(scheme(1, 1, 2), {0, 1}, {micro_batch({on_rank(1, 20, 2)})})};
  EXPECT_THROW(program::build_program(plan, cost, {}), PlanningError);
  // Placements are checked as each micro-batch is read: a bad one after good ones, and in a pipeline, too.
  plan.replicas = {replica(scheme(1, 1, 2), {0, 1},
                           {micro_batch({sharded(1, 20)}), micro_batch({on_rank(2, 10, 0), on_rank(3, 10, -2)})})};
  EXPECT_THROW(program::build_program(plan, cost, {}), PlanningError);
  plan.replicas = {
      replica(scheme(1, 2, 1), {0, 1}, {micro_batch({on_rank(1, 20, 0)}), micro_batch({on_rank(2, 8, 1)})})};
  EXPECT_THROW(program::build_program(plan, cost, {}), PlanningError);
  plan.replicas[0].micro_batches[1].placements[0].cp_rank = 0;  // now valid: builds
  EXPECT_NO_THROW(program::build_program(plan, cost, {}));
}

}  // namespace sim_program_test
}  // namespace lcsim
