// The no-contention replay of work lists (program/replay.hpp): hand-built programs with hand-computed times,
// the estimate (the same replay) for plans without overlap or pipelines, and the SimGrid executor on one node.
#include <gtest/gtest.h>

#include <stdexcept>

#include "live/live_plan.hpp"
#include "model/plan_demand.hpp"
#include "program/estimate.hpp"
#include "program/replay.hpp"
#include "tests/sim_test_support.hpp"

namespace lcsim {
namespace live_replay_test {

using program::Step;
using program::WorkKind;
using testing::micro_batch;
using testing::on_rank;
using testing::replica;
using testing::scheme;
using testing::sharded;
using testing::tiny_cost;

constexpr double kTol = 1e-9;

Step compute(double seconds, double alloc = 0, double free = 0) {
  Step s;
  s.type = Step::Type::Compute;
  s.seconds = seconds;
  s.alloc_bytes = alloc;
  s.free_bytes = free;
  return s;
}
Step join(int collective, Step::Type type = Step::Type::Collective, double seconds = 0, double lead = 0) {
  Step s;
  s.type = type;
  s.kind = WorkKind::ComputeLocal;
  s.index = collective;
  s.seconds = seconds;
  s.lead_s = lead;
  return s;
}
program::CollectiveSpec collective(std::vector<int> gpus, double seconds) {
  program::CollectiveSpec c;
  c.gpus = std::move(gpus);
  c.time = {seconds / 2, seconds / 2};
  return c;
}

TEST(LiveReplay, ACollectiveStartsWhenItsLastMemberIsReady) {
  program::IterationProgram p;
  p.collectives = {collective({0, 1}, 2)};
  p.gpus = std::vector<std::vector<Step>>{{compute(3), join(0)}, {compute(5), join(0), compute(1)}};
  const program::IterationOutcome o = program::replay_program(p, 10, true);
  EXPECT_NEAR(o.start_s, 10, kTol);
  EXPECT_NEAR(o.seconds, 8, kTol);  // 5, then the collective 5..7, then 1
  EXPECT_NEAR(o.busy_seconds[0], 3 + 2, kTol);
  EXPECT_NEAR(o.busy_seconds[1], 5 + 2 + 1, kTol);
  // Spans on the simulated clock, grouped by GPU: GPU 0 computes 10..13 and communicates 15..17.
  ASSERT_EQ(o.spans.size(), 5u);
  EXPECT_EQ(o.spans[0].gpu, 0);
  EXPECT_NEAR(o.spans[1].start_s, 15, kTol);
  EXPECT_NEAR(o.spans[1].end_s, 17, kTol);
}

TEST(LiveReplay, OverlappedComputeLeadsTheCollectiveByAtMostItsLead) {
  // GPU 0: 4 s of local compute beside the all-to-all (lead 1 s); GPU 1 arrives at 3. The all-to-all runs 3..5;
  // GPU 0's compute starts at 3 - 1 = 2 and ends at 6. Busy: 4 + 2 - 2 (overlap 3..5) = 4.
  program::IterationProgram p;
  p.collectives = {collective({0, 1}, 2)};
  p.gpus = std::vector<std::vector<Step>>{{join(0, Step::Type::ComputeWithCollective, 4, 1)}, {compute(3), join(0)}};
  const program::IterationOutcome o = program::replay_program(p, 0, false);
  EXPECT_NEAR(o.seconds, 6, kTol);
  EXPECT_NEAR(o.busy_seconds[0], 4, kTol);
  EXPECT_NEAR(o.busy_seconds[1], 3 + 2, kTol);
}

TEST(LiveReplay, TransfersRendezvousAndOnlyTheReceiverWaits) {
  program::IterationProgram p;
  p.transfers = {program::TransferSpec{0, 1, LinkClass::NvLink, {0.1, 0.4}, WorkKind::PpActivation, 80}};
  Step send;
  send.type = Step::Type::Send;
  send.index = 0;
  Step recv = send;
  recv.type = Step::Type::Recv;
  p.gpus = std::vector<std::vector<Step>>{{compute(2), send, compute(1)}, {recv, compute(1)}};
  const program::IterationOutcome o = program::replay_program(p, 0, false);
  // The receiver gets the data at 2 + 0.5 and computes until 3.5; the sender goes on to 3 without waiting.
  EXPECT_NEAR(o.seconds, 3.5, kTol);
  EXPECT_NEAR(o.busy_seconds[1], 1, kTol);  // transfers are idle, as in the estimate
}

TEST(LiveReplay, PeakMemoryCountsStaticAndInFlightActivations) {
  program::IterationProgram p;
  Step set;
  set.type = Step::Type::SetStatic;
  set.bytes = 100;
  p.gpus = std::vector<std::vector<Step>>{{set, compute(1, 30, 0), compute(1, 20, 50), compute(1, 10, 10)}};
  EXPECT_NEAR(program::replay_program(p, 0, false).peak_bytes[0], 150, kTol);
}

TEST(LiveReplay, AProgramThatCannotFinishIsAnError) {
  program::IterationProgram p;
  p.collectives = {collective({0, 1}, 1)};
  p.gpus = std::vector<std::vector<Step>>{{join(0)}, {}};
  EXPECT_THROW(program::replay_program(p, 0, false), std::logic_error);
}

TEST(LiveReplay, RetimingKeepsTheLeadsShareOfTheCompute) {
  program::IterationProgram p;
  p.collectives = {collective({0}, 1)};
  p.gpus = std::vector<std::vector<Step>>{{compute(2), join(0, Step::Type::ComputeWithCollective, 4, 1), join(0)}};
  const program::IterationProgram r =
      program::retime_compute(p, [](int, std::size_t i, const Step& s) { return i == 0 ? 5.0 : s.seconds * 2; });
  EXPECT_NEAR(r.gpus[0][0].seconds, 5, kTol);
  EXPECT_NEAR(r.gpus[0][1].seconds, 8, kTol);
  EXPECT_NEAR(r.gpus[0][1].lead_s, 2, kTol);
  EXPECT_NEAR(r.gpus[0][2].seconds, 0, kTol);  // a plain collective step is not compute
}

// Without overlap and pipelines the ranks of a micro-batch meet in its all-to-all (each micro-batch here has a
// sharded sequence; local-only ones would not make them meet): the replay is the estimate.
TEST(LiveReplay, MatchesTheEstimateWithoutOverlapOrPipelines) {
  const CostModel cost = tiny_cost(1, 4);
  IterationPlan plan;
  plan.replicas = {
      replica(scheme(2, 1, 2), {0, 1, 2, 3},
              {micro_batch({on_rank(1, 10, 0), on_rank(2, 30, 1), sharded(3, 20)}),
               micro_batch({on_rank(4, 12, 1), sharded(7, 6)}), micro_batch({sharded(5, 40), on_rank(6, 8, 0)})})};
  const program::IterationOutcome o = program::replay_program(program::build_program(plan, cost, {}), 0, false);
  const IterationEstimate e = program::estimate_iteration(plan, cost);
  EXPECT_NEAR(o.seconds, e.seconds, 1e-9 * e.seconds);
  for (std::size_t g = 0; g < 4; ++g) {
    EXPECT_NEAR(o.busy_seconds[g], e.busy_seconds[g], 1e-9 * e.seconds) << "GPU " << g;
    EXPECT_NEAR(o.peak_bytes[g], e.peak_bytes[g], 1e-9 * e.peak_bytes[g] + kTol) << "GPU " << g;
  }
}

TEST(LiveReplay, MatchesTheEstimateOnDeepSpeedPlans) {
  LoadedScenario loaded = load_and_prepare(LCSIM_SOURCE_DIR "/scenarios/live/qwen2.5-0.5b-chatqa2-dp1-cp8.json", 1);
  const LivePlans live = plan_live(std::move(loaded), {"deepspeed"});
  ASSERT_EQ(live.policies.size(), 1u);
  const IterationEstimate e = program::estimate_iteration(live.policies[0].plans[0], *live.loaded.cost);
  EXPECT_NEAR(live.policies[0].model_replay[0].seconds, e.seconds, 1e-9 * e.seconds);
}

// On one node nothing shares a link: the SimGrid executor and the replay agree, overlap and all (Skrull).
TEST(LiveReplay, MatchesTheSimulatorOnOneNode) {
  LoadedScenario loaded = load_and_prepare(LCSIM_SOURCE_DIR "/scenarios/live/qwen2.5-0.5b-chatqa2-dp1-cp8.json", 1);
  const LivePlans live = plan_live(std::move(loaded), {});
  std::vector<IterationPlan> plans;
  std::vector<const program::IterationOutcome*> replays;
  for (const LivePolicyPlans& p : live.policies) {
    plans.push_back(p.plans[0]);
    replays.push_back(&p.model_replay[0]);
  }
  const auto simulated = testing::simulate_in_child(plans, *live.loaded.cost);
  ASSERT_EQ(simulated.size(), plans.size());
  for (std::size_t k = 0; k < plans.size(); ++k) {
    EXPECT_NEAR(simulated[k].seconds, replays[k]->seconds, 1e-6 * replays[k]->seconds) << live.policies[k].label;
    for (std::size_t g = 0; g < simulated[k].busy_seconds.size(); ++g) {
      EXPECT_NEAR(simulated[k].busy_seconds[g], replays[k]->busy_seconds[g], 1e-6 * replays[k]->seconds);
      EXPECT_NEAR(simulated[k].peak_bytes[g], replays[k]->peak_bytes[g], 1e-6 * replays[k]->peak_bytes[g]);
    }
  }
}

}  // namespace live_replay_test
}  // namespace lcsim
