// Hand-worked estimates (the iteration program replayed without contention) on the toy cost model of
// policy_test_fixtures.hpp (formulas and constants there).
#include "program/estimate.hpp"
#include "model/plan_demand.hpp"
#include "program/outcome.hpp"
#include "program/replay.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <set>

#include "base/check.hpp"
#include "base/errors.hpp"
#include "formats/scenario_loader.hpp"
#include "studies/evaluation.hpp"
#include "tests/policy_test_fixtures.hpp"

namespace lcsim {
namespace estimate_test {

using testing::micro_batch;
using testing::on_rank;
using testing::replica;
using testing::scheme;
using testing::sharded;
using testing::tiny_cost;
using testing::tiny_profile;

constexpr double kTol = 1e-9;

// One micro-batch on a CP=2 replica: sequence 1 (10 tokens) local on CP rank 0, sequence 2 (20 tokens) sharded.
//   rank 0 local compute   {10}: 2 layers x (3.84*10 + 0.056*100) + head 1.536*10          = 103.36 s
//   sharded compute (20/2): T = 10: 2 x (3.84*10 + 3.5*16*400/2/1000) + 15.36                = 114.56 s
//   rank 0 combined: T = 20: 2 x (3.84*20 + 3.5*(1.6 + 3.2)) + 1.536*20                    = 217.92 s
//   all-to-all per GPU 10 tokens: q and kv 160 bytes each, 1 s + 160/2/100 s = 1.8 s per collective,
//   2 layers x 2 directions x (2 + 2) collectives                                             = 28.8 s
//   gradient sync over 2 GPUs: reduce-scatter 0.25 s + all-gather 0.25 s                     = 0.5 s
using testing::dacp_plan;

TEST(Estimate, WithoutOverlapCommunicationAddsToCompute) {
  const CostModel cost = tiny_cost(1, 2);
  const IterationPlan plan = dacp_plan(false);

  const IterationEstimate e = program::estimate_iteration(plan, cost);
  EXPECT_NEAR(e.seconds, 246.72 + 0.5, kTol);
  ASSERT_EQ(e.busy_seconds.size(), 2u);
  EXPECT_NEAR(e.busy_seconds[0], 246.72 + 0.5, kTol);
  EXPECT_NEAR(e.busy_seconds[1], 143.36 + 0.5, kTol);
  // Propagation ends before the gradient sync: rank 0 at the end of its micro-batch; rank 1 has waited for it in
  // the all-to-alls, which end with rank 0's, so both pipelines' GPUs end their propagation together.
  ASSERT_EQ(e.propagation_end_s.size(), 2u);
  EXPECT_NEAR(e.propagation_end_s[0], 246.72, kTol);
  EXPECT_LE(e.propagation_end_s[1], e.propagation_end_s[0] + kTol);
}

TEST(Estimate, OverlapHidesCommunicationBehindLocalCompute) {
  // Skrull Eq. 2: Time_j = max(comm, compute(local_j)) + compute(dist).
  const CostModel cost = tiny_cost(1, 2);
  const IterationPlan plan = dacp_plan(true);
  const IterationEstimate e = program::estimate_iteration(plan, cost);
  EXPECT_NEAR(e.seconds, 217.92 + 0.5, kTol);
  EXPECT_NEAR(e.busy_seconds[0], 217.92 + 0.5, kTol);
  EXPECT_NEAR(e.busy_seconds[1], 143.36 + 0.5, kTol);
  EXPECT_LT(e.seconds, program::estimate_iteration(dacp_plan(false), cost).seconds);
}

TEST(Estimate, CpGroupAcrossNodesUsesInfiniBand) {
  // Two nodes of one GPU: the all-to-all latency doubles to 2 s: 2 x 2 x 4 x (2 + 0.8) = 44.8 s; the gradient
  // sync doubles to 1 s.
  const CostModel cost = tiny_cost(2, 1);
  const IterationEstimate e = program::estimate_iteration(dacp_plan(false), cost);
  EXPECT_NEAR(e.seconds, 217.92 + 44.8 + 1.0, kTol);
}

TEST(Estimate, PeakBytesCountLocalPlusShardTokens) {
  // 32 bytes per token (2 layers x 8 + logits 0.5 x 32); rank 0 holds 10 + 20/2 tokens, rank 1 holds 10.
  const CostModel cost = tiny_cost(1, 2);
  const IterationEstimate e = program::estimate_iteration(dacp_plan(true), cost);
  ASSERT_EQ(e.peak_bytes.size(), 2u);
  EXPECT_NEAR(e.peak_bytes[0], 640, kTol);
  EXPECT_NEAR(e.peak_bytes[1], 320, kTol);
  EXPECT_EQ(e.oom_gpus, 1);  // 640 > 500 bytes
  EXPECT_TRUE(e.out_of_memory());
  EXPECT_EQ(estimate_peak_bytes(dacp_plan(true), cost), e.peak_bytes);
}

TEST(Estimate, UnusedGpusHaveNoPeakAndNoBusyTime) {
  const CostModel cost = tiny_cost(1, 4);
  IterationPlan plan;
  plan.replicas = {replica(scheme(1, 1, 1), {2}, {micro_batch({on_rank(1, 10, 0)})})};
  const IterationEstimate e = program::estimate_iteration(plan, cost);
  ASSERT_EQ(e.peak_bytes.size(), 4u);
  EXPECT_EQ(e.peak_bytes[0], 0);
  EXPECT_NEAR(e.peak_bytes[2], 320, kTol);
  EXPECT_EQ(e.busy_seconds[3], 0);
  // shard degree 4: the sync runs over the plan's one first-slice GPU, on NvLink.
  EXPECT_NEAR(e.busy_seconds[2], 103.36 + 0.5, kTol);
}

TEST(Estimate, PaddedMicroBatchCostsEverySequenceAtTheLongest) {
  // {10, 20} padded = {20, 20}: T = 40: 2 x (3.84*40 + 3.5*16*800/1000) + 1.536*40 = 458.24 s;
  // unpadded T = 30: 2 x (3.84*30 + 3.5*16*500/1000) + 1.536*30 = 332.48 s. One GPU: no gradient sync.
  const CostModel cost = tiny_cost(1, 1, tiny_profile(), 1e9);
  IterationPlan plan;
  plan.replicas = {replica(scheme(1, 1, 1), {0}, {micro_batch({on_rank(1, 10, 0), on_rank(2, 20, 0)}, true)})};
  IterationEstimate e = program::estimate_iteration(plan, cost);
  EXPECT_NEAR(e.seconds, 458.24, kTol);
  EXPECT_NEAR(e.peak_bytes[0], 40 * 32, kTol);
  plan.replicas[0].micro_batches[0].padded = false;
  e = program::estimate_iteration(plan, cost);
  EXPECT_NEAR(e.seconds, 332.48, kTol);
  EXPECT_NEAR(e.peak_bytes[0], 30 * 32, kTol);
}

TEST(Estimate, MicroBatchesOfAReplicaAddUp) {
  const CostModel cost = tiny_cost(1, 1, tiny_profile(), 1e9);
  IterationPlan plan;
  plan.replicas = {replica(scheme(1, 1, 1), {0}, {micro_batch({on_rank(1, 10, 0)}), micro_batch({on_rank(2, 20, 0)})})};
  // 103.36 + (2 x (76.8 + 22.4) + 30.72 = 229.12); peak: the larger micro-batch only.
  const IterationEstimate e = program::estimate_iteration(plan, cost);
  EXPECT_NEAR(e.seconds, 103.36 + 229.12, kTol);
  EXPECT_NEAR(e.peak_bytes[0], 20 * 32, kTol);
}

TEST(Estimate, TensorParallelDividesComputeAndAddsCollectives) {
  // tp 2: compute halves (88 + 15.36) / 2 = 51.68 s; per layer 2 directions x 2 x (all-gather + reduce-scatter
  // 0.5 s) = 2 s, 4 s for 2 layers. Shard degree 2 / 2 = 1: no gradient sync.
  const CostModel cost = tiny_cost(1, 2, tiny_profile(), 1e9);
  IterationPlan plan;
  plan.replicas = {replica(scheme(2, 1, 1), {0, 1}, {micro_batch({on_rank(1, 10, 0)})})};
  const IterationEstimate e = program::estimate_iteration(plan, cost);
  EXPECT_NEAR(e.seconds, 55.68, kTol);
  EXPECT_NEAR(e.busy_seconds[0], 55.68, kTol);
  EXPECT_NEAR(e.busy_seconds[1], 55.68, kTol);
  EXPECT_NEAR(e.peak_bytes[1], 10 * 32 / 2.0, kTol);  // sequence parallelism divides activations by tp
}

TEST(Estimate, AsyncTensorParallelRunsTheHiddenTransfersBesideTheCompute) {
  // As above, with async TP: every all-gather and reduce-scatter (0.25 s) meets a GEMM longer than itself, so all
  // but one of its 2 chunks hides: 2 s of the 4 s stay exposed, before each block's compute; the rest runs beside it.
  const CostModel cost(testing::tiny_model(2), testing::tiny_cluster(1, 2, 1e9), tiny_profile(),
                       CostModelOptions{.tp_overlap = TpOverlap::Async});
  IterationPlan plan;
  plan.replicas = {replica(scheme(2, 1, 1), {0, 1}, {micro_batch({on_rank(1, 10, 0)})})};
  const IterationEstimate e = program::estimate_iteration(plan, cost);
  EXPECT_NEAR(e.seconds, 53.68, kTol);
  EXPECT_NEAR(e.busy_seconds[0], 53.68, kTol);
  const program::IterationProgram p = program::build_program(plan, cost, {});
  using T = program::Step::Type;
  ASSERT_EQ(p.gpus[0].size(), 3u);  // SetStatic, the exposed part, the compute beside the hidden part
  EXPECT_EQ(p.gpus[0][1].type, T::Collective);
  EXPECT_EQ(p.gpus[0][2].type, T::ComputeWithCollective);
  EXPECT_NEAR(p.collectives[static_cast<std::size_t>(p.gpus[0][1].index)].time.seconds(), 2.0, kTol);
  EXPECT_NEAR(p.collectives[static_cast<std::size_t>(p.gpus[0][2].index)].time.seconds(), 2.0, kTol);
  EXPECT_NEAR(p.gpus[0][2].seconds, 51.68, kTol);
}

// Gradient sync beside the compute (training.overlap_gradient_sync): over 2 layers, all but the last layer's half
// of each collective hides, here 0.125 s of the reduce-scatter's 0.25 s beside the backward and as much of the
// all-gather's beside the forward; 0.25 s stays exposed after the last micro-batch.
CostModel overlapping_cost() {
  return CostModel(testing::tiny_model(2), testing::tiny_cluster(1, 2, 1e9), tiny_profile(),
                   CostModelOptions{.overlap_gradient_sync = true});
}

TEST(Estimate, OverlappedGradientSyncHidesAllButTheLastLayersShare) {
  IterationPlan plan;
  plan.replicas = {replica(scheme(1, 1, 1), {0}, {micro_batch({on_rank(1, 10, 0)})}),
                   replica(scheme(1, 1, 1), {1}, {micro_batch({on_rank(2, 10, 0)})})};
  const CostModel plain = tiny_cost(1, 2, tiny_profile(), 1e9);
  EXPECT_NEAR(program::estimate_iteration(plan, plain).seconds, 103.36 + 0.5, kTol);
  const CostModel overlapping = overlapping_cost();
  EXPECT_NEAR(program::estimate_iteration(plan, overlapping).seconds, 103.36 + 0.25, kTol);
  // One micro-batch: its compute is both sites, so one collective carries both hidden parts beside it.
  const program::IterationProgram p = program::build_program(plan, overlapping, {});
  using T = program::Step::Type;
  ASSERT_EQ(p.gpus[0].size(), 4u);  // SetStatic, compute beside the hidden parts, exposed reduce-scatter, all-gather
  EXPECT_EQ(p.gpus[0][1].type, T::ComputeWithCollective);
  const auto& hidden = p.collectives[static_cast<std::size_t>(p.gpus[0][1].index)];
  EXPECT_NEAR(hidden.time.seconds(), 0.25, kTol);
  EXPECT_EQ(hidden.kind, program::WorkKind::GradReduceScatter);
  EXPECT_NEAR(p.collectives[static_cast<std::size_t>(p.gpus[0][2].index)].time.seconds(), 0.125, kTol);
  EXPECT_NEAR(p.collectives[static_cast<std::size_t>(p.gpus[0][3].index)].time.seconds(), 0.125, kTol);
}

TEST(Estimate, OverlappedGradientSyncMeetsTheLastBackwardAndTheFirstForward) {
  // Two micro-batches a GPU: the reduce-scatter's hidden part runs beside the second, the all-gather's beside the
  // first; the iteration saves the same 0.25 s.
  IterationPlan plan;
  plan.replicas = {replica(scheme(1, 1, 1), {0}, {micro_batch({on_rank(1, 10, 0)}), micro_batch({on_rank(3, 10, 0)})}),
                   replica(scheme(1, 1, 1), {1}, {micro_batch({on_rank(2, 10, 0)}), micro_batch({on_rank(4, 10, 0)})})};
  EXPECT_NEAR(program::estimate_iteration(plan, overlapping_cost()).seconds, 2 * 103.36 + 0.25, kTol);
  const program::IterationProgram p = program::build_program(plan, overlapping_cost(), {});
  using T = program::Step::Type;
  ASSERT_GE(p.gpus[0].size(), 3u);
  ASSERT_EQ(p.gpus[0][1].type, T::ComputeWithCollective);
  ASSERT_EQ(p.gpus[0][2].type, T::ComputeWithCollective);
  EXPECT_EQ(p.collectives[static_cast<std::size_t>(p.gpus[0][1].index)].kind, program::WorkKind::GradAllGather);
  EXPECT_EQ(p.collectives[static_cast<std::size_t>(p.gpus[0][2].index)].kind, program::WorkKind::GradReduceScatter);
}

TEST(Estimate, OverlappedGradientSyncMeetsTheLastPhase) {
  // GPU 0 computes in both phases, GPU 1 only in the second: the sync's sites are the second phase's, or GPU 0 would
  // wait in the first phase for a collective GPU 1 reaches only after the barrier between them.
  IterationPlan plan;
  plan.replicas = {replica(scheme(1, 1, 1), {0}, {micro_batch({on_rank(1, 10, 0)})}, false, 0),
                   replica(scheme(1, 1, 2), {0, 1}, {micro_batch({sharded(2, 20)})}, false, 1)};
  const double plain = program::estimate_iteration(plan, tiny_cost(1, 2, tiny_profile(), 1e9)).seconds;
  EXPECT_NEAR(program::estimate_iteration(plan, overlapping_cost()).seconds, plain - 0.25, kTol);
}

TEST(Estimate, AnOutcomeThatOverflowsNeverReachesAResultsFile) {
  // Every step is finite when the program is built, but sums may overflow: the outcome is checked again.
  program::IterationOutcome outcome;
  outcome.seconds = 1.0;
  outcome.busy_seconds = {0.5, 1.0};
  outcome.peak_bytes = {1e9, 1e9};
  outcome.propagation_end_s = {0.9, 1.0};
  EXPECT_NO_THROW(program::check_finite(outcome));
  for (auto* value :
       {&outcome.seconds, &outcome.busy_seconds[1], &outcome.peak_bytes[0], &outcome.propagation_end_s[1]}) {
    const double kept = *value;
    *value = std::numeric_limits<double>::infinity();
    EXPECT_THROW(program::check_finite(outcome), InternalError);
    *value = std::numeric_limits<double>::quiet_NaN();
    EXPECT_THROW(program::check_finite(outcome), InternalError);
    *value = kept;
  }
}

TEST(Estimate, PipelineOneFOneB) {
  // pp 2, one layer per stage; micro-batches A (10 tokens) and B (20). A layer's forward is a third of its GEMMs
  // and 1/3.5 of its attention: stage 0 forward/backward A 14.4/29.6, B 32.0/67.2 s; stage 1 (+ head) A
  // 19.52/39.84, B 42.24/87.68 s; a transfer starts when sender and receiver are both there and takes 0.1 s.
  //   stage 0 (one warm-up forward): F_A [0, 14.4], F_B [14.4, 46.4], B_A after A's gradients [73.96, 103.56],
  //                                   B_B after B's gradients [203.98, 271.18]
  //   stage 1: F_A [14.5, 34.02], B_A [34.02, 73.86], F_B [73.96, 116.2], B_B [116.2, 203.88]
  // Shard degree 1: no gradient sync.
  const CostModel cost = tiny_cost(1, 2, tiny_profile(), 1e9);
  IterationPlan plan;
  plan.replicas = {replica(scheme(1, 2, 1), {0, 1}, {micro_batch({on_rank(1, 10, 0)}), micro_batch({sharded(2, 20)})})};
  const IterationEstimate e = program::estimate_iteration(plan, cost);
  EXPECT_NEAR(e.seconds, 271.18, 1e-6);
  EXPECT_NEAR(e.busy_seconds[0], 44.0 + 99.2, kTol);
  EXPECT_NEAR(e.busy_seconds[1], 59.36 + 129.92, kTol);
  // Propagation latency counts the bubbles busy time leaves out: stage 0 ends with B_B, stage 1 when it has sent
  // B's gradients (B_B ends at 203.88, the transfer takes 0.1 s).
  EXPECT_NEAR(e.propagation_end_s[0], 271.18, 1e-6);
  EXPECT_GE(e.propagation_end_s[1], 203.88 - 1e-6);
  EXPECT_LE(e.propagation_end_s[1], 203.98 + 1e-6);
  // Stage 0 keeps both micro-batches in flight (8 bytes per token, 30 tokens); stage 1 one (24 per token, 20).
  EXPECT_NEAR(e.peak_bytes[0], 240, kTol);
  EXPECT_NEAR(e.peak_bytes[1], 480, kTol);
}

TEST(Estimate, PhasesRunInSequenceWithASwitchBetween) {
  Profile profile = tiny_profile();
  profile.compute.hot_switch_us_per_mparam = 1e6;  // 1 s per million parameters
  profile.compute.optimizer_us_per_mparam = 2e6;
  const CostModel cost = tiny_cost(1, 2, profile, 1e9);
  IterationPlan plan;
  plan.replicas = {replica(scheme(1, 1, 1), {0}, {micro_batch({on_rank(1, 10, 0)})}, false, 0),
                   replica(scheme(1, 1, 1), {1}, {micro_batch({on_rank(2, 20, 0)})}, false, 0),
                   replica(scheme(1, 1, 2), {0, 1}, {micro_batch({sharded(3, 20)})}, false, 1)};
  const IterationEstimate e = program::estimate_iteration(plan, cost);
  const double params = cost.parameters_per_gpu(scheme(1, 1, 1));
  EXPECT_NEAR(cost.parameters_per_gpu(scheme(1, 1, 2)), params, kTol);
  const double tail = 0.5 + cost.optimizer_seconds(scheme(1, 1, 1), 2, 0);
  EXPECT_NEAR(tail, 0.5 + 2 * params / 2 / 1e6, kTol);
  // Gradients accumulate over the phases: one sync and optimizer step, after the last.
  const double phase0 = 229.12;                // the slower replica
  const double phase1 = 114.56 + 28.8 + tail;  // sharded 20 tokens over 2 GPUs
  // Both GPUs hold the whole model in both phases (only the CP group changes): nothing moves, no switch. A
  // switch between model slices (TP 2, then data parallel) is FlexSpPolicy.ASwitchBetweenModelSlicesStillPays.
  EXPECT_NEAR(e.seconds, phase0 + phase1, kTol);
  EXPECT_NEAR(e.busy_seconds[0], 103.36 + phase1, kTol);
  IterationPlan sliced = plan;
  sliced.replicas[2].scheme.tp = 2, sliced.replicas[2].scheme.cp = 1;
  sliced.replicas[2].micro_batches = {micro_batch({on_rank(3, 20, 0)})};
  const IterationEstimate moved = program::estimate_iteration(sliced, cost);
  EXPECT_GT(moved.busy_seconds[0], 103.36 + params / 1e6);  // the parameters re-sliced: 1 s per Mparam
}

TEST(Estimate, ShardDegreeIsWorldOverModelParallelism) {
  const CostModel cost = tiny_cost(2, 8);
  EXPECT_EQ(shard_degree(cost, scheme(1, 1, 8)), 16);
  EXPECT_EQ(shard_degree(cost, scheme(2, 2, 1)), 4);
  EXPECT_EQ(shard_degree(cost, scheme(8, 2, 1)), 1);
}

TEST(Estimate, MalformedPlanIsRefused) {
  const CostModel cost = tiny_cost(1, 2);
  IterationPlan plan;
  plan.replicas = {replica(scheme(1, 1, 2), {0, 7}, {micro_batch({sharded(1, 10)})})};
  EXPECT_THROW(program::estimate_iteration(plan, cost), PlanningError);
  plan.replicas = {replica(scheme(1, 1, 2), {0, 1}, {micro_batch({on_rank(1, 10, 2)})})};
  EXPECT_THROW(program::estimate_iteration(plan, cost), PlanningError);
  plan.replicas = {replica(scheme(1, 1, 2), {0}, {micro_batch({on_rank(1, 10, 0)})})};
  EXPECT_THROW(program::estimate_iteration(plan, cost), PlanningError);
  // The peak estimate, used by the validator, skips what it cannot place instead.
  EXPECT_EQ(estimate_peak_bytes(plan, cost), (std::vector<double>{0, 0}));
}

// The planning-time memory bound holds every peak the program reaches, pipelines (Hydraulis' and Megatron's TP x PP)
// and overlapped Skrull micro-batches included.
TEST(Estimate, ProgramPeaksStayWithinThePlanningBound) {
  for (const char* name :
       {"hydraulis/llama2-7b-github-16gpu", "skrull/qwen0.5b-chatqa2", "hbp/llama3.1-8b-isf-32k-sp4"}) {
    const LoadedScenario loaded = load_and_prepare(std::string(LCSIM_SOURCE_DIR) + "/scenarios/" + name + ".json", 2);
    for (const PolicySpec& spec : loaded.scenario.policies) {
      const PolicyPlans planned = plan_policy(loaded, spec);
      for (const IterationPlan& plan : planned.plans) {
        const auto bound = estimate_peak_bytes(plan, *loaded.cost);
        const auto peaks = program::estimate_iteration(plan, *loaded.cost).peak_bytes;
        ASSERT_EQ(bound.size(), peaks.size());
        for (std::size_t g = 0; g < peaks.size(); ++g)
          EXPECT_LE(peaks[g], bound[g] * (1 + 1e-12)) << name << " " << spec.label << " GPU " << g;
      }
    }
  }
}

// The estimate of a plan whose replicas have no pipeline stages replays each micro-batch as it is built and drops it
// (program/estimate.cpp); it must give exactly what replaying the whole program gives: the same sums in the same
// order. Skrull's overlap, ring attention, several micro-batches and replicas, and a padded sorted baseline.
TEST(Estimate, StreamedEstimateEqualsTheWholeProgramReplayed) {
  int streamed = 0;
  for (const char* file : {"skrull/qwen0.5b-chatqa2.json", "skrull/qwen0.5b-chatqa2-ring.json", "default.json",
                           "hbp/llama3.1-8b-tulu3-longcite.json"}) {
    const LoadedScenario loaded = load_and_prepare(std::string(LCSIM_SOURCE_DIR) + "/scenarios/" + file, 2);
    for (const PolicySpec* spec : select_policies(loaded.scenario, {})) {
      const PolicyPlans planned = plan_policy(loaded, *spec);
      program::Estimator estimator(*loaded.cost);
      for (const IterationPlan& plan : planned.plans) {
        SCOPED_TRACE(std::string(file) + " " + spec->label + " " + plan.label);
        program::ProgramOptions whole;
        whole.layers_per_block = 0;
        whole.describe_work = false;
        const program::IterationOutcome expected =
            program::replay_program(program::build_program(plan, *loaded.cost, whole), 0.0, false);
        const IterationEstimate e = estimator.estimate(plan);
        EXPECT_EQ(e.seconds, expected.seconds);
        EXPECT_EQ(e.busy_seconds, expected.busy_seconds);
        EXPECT_EQ(e.peak_bytes, expected.peak_bytes);
        EXPECT_EQ(e.propagation_end_s, expected.propagation_end_s);
        streamed += plan.replicas.size() > 1 && plan.replicas.front().micro_batches.size() > 1 ? 1 : 0;
      }
    }
  }
  EXPECT_GT(streamed, 20);  // plans with several replicas and micro-batches were compared
}

TEST(Estimate, LanesChangeNoFigureNorSpan) {
  // GPUs that run the same steps share one list and are replayed once (program::GpuSteps); the same program with a
  // list per GPU gives every GPU the same times, bytes and spans.
  int shared = 0;
  for (const char* file :
       {"default.json", "skrull/qwen0.5b-chatqa2-ring.json", "hbp/llama3.1-8b-tulu3-longcite.json"}) {
    const LoadedScenario loaded = load_and_prepare(std::string(LCSIM_SOURCE_DIR) + "/scenarios/" + file, 2);
    for (const PolicySpec* spec : select_policies(loaded.scenario, {})) {
      const PolicyPlans planned = plan_policy(loaded, *spec);
      for (const IterationPlan& plan : planned.plans) {
        SCOPED_TRACE(std::string(file) + " " + spec->label + " " + plan.label);
        program::IterationProgram lanes = program::build_program(plan, *loaded.cost, {});
        program::IterationProgram apart = lanes;
        apart.gpus.unshare();
        ASSERT_EQ(apart.gpus.lane_count(), apart.gpus.size());
        shared += lanes.gpus.lane_count() < lanes.gpus.size() ? 1 : 0;
        const program::IterationOutcome a = program::replay_program(lanes, 0.0, true);
        const program::IterationOutcome b = program::replay_program(apart, 0.0, true);
        EXPECT_EQ(a.seconds, b.seconds);
        EXPECT_EQ(a.busy_seconds, b.busy_seconds);
        EXPECT_EQ(a.peak_bytes, b.peak_bytes);
        EXPECT_EQ(a.propagation_end_s, b.propagation_end_s);
        ASSERT_EQ(a.spans.size(), b.spans.size());
        for (std::size_t i = 0; i < a.spans.size(); ++i) {
          EXPECT_EQ(a.spans[i].gpu, b.spans[i].gpu);
          EXPECT_EQ(a.spans[i].start_s, b.spans[i].start_s);
          EXPECT_EQ(a.spans[i].end_s, b.spans[i].end_s);
          EXPECT_EQ(a.spans[i].kind, b.spans[i].kind);
        }
      }
    }
  }
  EXPECT_GT(shared, 5);  // plans with shared lists were compared
}

// Replicas placed alike with the same shapes run one timeline without contention, so the estimate builds one of
// them (ProgramOptions::fold_replicas): four 2-stage replicas on two 4-GPU nodes, replicas 0 and 2 with one set of
// micro-batches, 1 and 3 with another. Their gradient syncs cross the nodes; folded, they keep every member.
IterationPlan two_kinds_of_replica() {
  const std::vector<MicroBatch> a = {micro_batch({on_rank(1, 64, 0)}), micro_batch({on_rank(2, 32, 0)})};
  const std::vector<MicroBatch> b = {micro_batch({on_rank(3, 128, 0)}), micro_batch({on_rank(4, 16, 0)})};
  IterationPlan plan;
  plan.replicas = {replica(scheme(1, 2, 1), {0, 1}, a), replica(scheme(1, 2, 1), {2, 3}, b),
                   replica(scheme(1, 2, 1), {4, 5}, a), replica(scheme(1, 2, 1), {6, 7}, b)};
  return plan;
}

void expect_same_outcome(const program::IterationOutcome& a, const program::IterationOutcome& b) {
  EXPECT_EQ(a.seconds, b.seconds);
  EXPECT_EQ(a.busy_seconds, b.busy_seconds);
  EXPECT_EQ(a.peak_bytes, b.peak_bytes);
  EXPECT_EQ(a.propagation_end_s, b.propagation_end_s);
}

TEST(Estimate, FoldedReplicasRunTheirStandInsTimeline) {
  const IterationPlan plan = two_kinds_of_replica();
  EXPECT_EQ(program::replica_stand_ins(plan, 4), (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(program::gpu_lanes(plan, 8, program::replica_stand_ins(plan, 4)),
            (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3}));
  for (const bool overlap_sync : {false, true}) {
    SCOPED_TRACE(overlap_sync ? "gradient sync beside the compute" : "gradient sync after it");
    const CostModel cost =
        testing::plausible_cost(testing::tiny_model(2), 2, 4, CostModelOptions{.overlap_gradient_sync = overlap_sync});
    program::ProgramOptions options;
    options.describe_work = false;
    const program::IterationProgram whole = program::build_program(plan, cost, options);
    options.fold_replicas = true;
    const program::IterationProgram folded = program::build_program(plan, cost, options);
    EXPECT_EQ(whole.gpus.lane_count(), 8u);
    EXPECT_EQ(folded.gpus.lane_count(), 4u);
    EXPECT_LT(folded.transfers.size(), whole.transfers.size());  // only the stand-ins' pipeline transfers
    // The first stage's gradient sync: every replica's GPU, over InfiniBand, priced as the whole group.
    const auto sync = std::find_if(folded.collectives.begin(), folded.collectives.end(), [](const auto& c) {
      return c.kind == program::WorkKind::GradReduceScatter && c.gpus.front() == 0;
    });
    ASSERT_NE(sync, folded.collectives.end());
    EXPECT_EQ(sync->gpus, (std::vector<int>{0, 2, 4, 6}));
    EXPECT_EQ(sync->link, LinkClass::InfiniBand);
    const program::IterationOutcome expected = program::replay_program(whole, 0.0, false);
    expect_same_outcome(program::replay_program(folded, 0.0, false), expected);
    const IterationEstimate e = program::estimate_iteration(plan, cost);
    EXPECT_EQ(e.seconds, expected.seconds);
    EXPECT_EQ(e.peak_bytes, expected.peak_bytes);
  }
}

TEST(Estimate, OnlyReplicasPlacedAlikeWithTheSameShapesFold) {
  const IterationPlan plan = two_kinds_of_replica();
  // Moved by half a domain: a replica's groups could sit differently on the nodes.
  EXPECT_EQ(program::replica_stand_ins(plan, 8), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(program::replica_stand_ins(plan, 2), (std::vector<int>{0, 1, 0, 1}));
  IterationPlan longer = plan;  // one token more
  longer.replicas[2].micro_batches[1].placements[0].tokens += 1;
  EXPECT_EQ(program::replica_stand_ins(longer, 4), (std::vector<int>{0, 1, 2, 1}));
  IterationPlan swapped = plan;  // the stages' GPUs the other way round
  swapped.replicas[2].gpus = {5, 4};
  EXPECT_EQ(program::replica_stand_ins(swapped, 4), (std::vector<int>{0, 1, 2, 1}));
  IterationPlan renumbered = plan;  // sequence ids are not shapes
  renumbered.replicas[2].micro_batches[0].placements[0].sequence_id = 99;
  EXPECT_EQ(program::replica_stand_ins(renumbered, 4), (std::vector<int>{0, 1, 0, 1}));
  IterationPlan phases = plan;  // two phases: a GPU could stand in for different GPUs in each
  phases.replicas[3].phase = 1;
  EXPECT_EQ(program::replica_stand_ins(phases, 4), (std::vector<int>{0, 1, 2, 3}));
  // The stand-in is the lowest placed replica whatever the plan's order (here the last two).
  IterationPlan reversed = plan;
  std::reverse(reversed.replicas.begin(), reversed.replicas.end());
  EXPECT_EQ(program::replica_stand_ins(reversed, 4), (std::vector<int>{2, 3, 2, 3}));
}

TEST(Estimate, FoldedEstimateOfPublishedLayoutsEqualsTheWholeProgramReplayed) {
  // Pipelines with interleaving, TP, CP and data parallelism over eight nodes (fixed-length data: every replica alike).
  for (const char* file :
       {"framework/dgxc-2502-llama31-70b-bf16-64gpu.json", "framework/dgxc-2502-llama31-8b-bf16-64gpu.json"}) {
    SCOPED_TRACE(file);
    const LoadedScenario loaded = load_and_prepare(std::string(LCSIM_SOURCE_DIR) + "/scenarios/" + file, 1);
    const PolicyPlans planned = plan_policy(loaded, loaded.scenario.policies.front());
    const IterationPlan& plan = planned.plans.front();
    const std::vector<int> stand_ins =
        program::replica_stand_ins(plan, loaded.scenario.cluster.topology().domain_size());
    const std::set<int> kinds(stand_ins.begin(), stand_ins.end());
    EXPECT_LT(kinds.size(), stand_ins.size());  // some replicas were folded
    program::ProgramOptions whole;
    whole.describe_work = false;
    const program::IterationOutcome expected =
        program::replay_program(program::build_program(plan, *loaded.cost, whole), 0.0, false);
    const IterationEstimate e = program::Estimator(*loaded.cost).estimate(plan);
    EXPECT_EQ(e.seconds, expected.seconds);
    EXPECT_EQ(e.busy_seconds, expected.busy_seconds);
    EXPECT_EQ(e.peak_bytes, expected.peak_bytes);
    EXPECT_EQ(e.propagation_end_s, expected.propagation_end_s);
  }
}

}  // namespace estimate_test
}  // namespace lcsim
