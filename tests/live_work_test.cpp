// From work lists to what a GPU runs (live/live_work.hpp) and the rank-serial composition
// (live/live_compose.hpp): hand-computed shapes, job de-duplication, NCCL arguments, composed times.
#include <gtest/gtest.h>

#include <cmath>

#include "base/errors.hpp"
#include "live/live_compose.hpp"
#include "live/live_work.hpp"
#include "program/replay.hpp"
#include "tests/policy_test_fixtures.hpp"

namespace lcsim {
namespace live_work_test {

using program::ComputeWork;
using testing::micro_batch;
using testing::on_rank;
using testing::replica;
using testing::scheme;
using testing::sharded;
using testing::tiny_cost;

constexpr double kTol = 1e-9;

ComputeWork work(std::vector<SequenceShare> shares, int tp = 1) {
  ComputeWork w;
  w.shares = std::move(shares);
  for (std::size_t i = 0; i < w.shares.size(); ++i) w.sequence_ids.push_back(static_cast<std::int64_t>(i));
  w.tp = tp;
  w.layers = 24;
  w.lm_head = true;
  return w;
}

TEST(LiveWork, UlyssesShardsTakeCeilRowsAndTheBusiestRanksHeads) {
  const ModelConfig& qwen = named_model("Qwen2.5-0.5B");  // 14 heads, 2 KV heads, ffn 4864
  const ProxyShape s = proxy_shape(work({{300, 1}, {1001, 8}, {800, 8}}), qwen);
  EXPECT_EQ(s.local, (std::vector<int>{300}));
  EXPECT_EQ(s.sharded, (std::vector<int>{1001, 800}));
  EXPECT_EQ(s.cp, 8);
  EXPECT_EQ(s.rows(), 300 + 126 + 100);  // ceil(1001 / 8) = 126
  EXPECT_EQ(s.sharded_heads, 2);         // ceil(14 / 8)
  EXPECT_EQ(s.sharded_kv_heads, 1);      // ceil(2 / 8)
  EXPECT_EQ(s.shard.heads, 14);
  EXPECT_EQ(s.layers, 24);
  EXPECT_TRUE(s.lm_head);

  // TP 2: the rank's slice; KV heads and vocabulary rounded up.
  const ProxyShape t = proxy_shape(work({{1000, 4}}, 2), qwen);
  EXPECT_EQ(t.shard.heads, 7);
  EXPECT_EQ(t.shard.kv_heads, 1);
  EXPECT_EQ(t.shard.ffn, 2432);
  EXPECT_EQ(t.shard.vocab, 75968);
  EXPECT_EQ(t.shard.hidden, 896);
  EXPECT_EQ(t.sharded_heads, 2);  // ceil(7 / 4)
  EXPECT_EQ(t.sharded_kv_heads, 1);

  // GQA groups stay whole: 12 heads over 3 KV heads, cp 8 -> 2 heads, 1 KV head; 12 / 4 KV over cp 2 -> 6 / 2.
  ModelConfig m = qwen;
  m.heads = 12;
  m.kv_heads = 4;
  const ProxyShape g = proxy_shape(work({{64, 2}}), m);
  EXPECT_EQ(g.sharded_heads, 6);
  EXPECT_EQ(g.sharded_kv_heads, 2);
  m.kv_heads = 3;
  const ProxyShape r = proxy_shape(work({{64, 4}}), m);  // ceil(12/4) = 3 heads, 1 KV head
  EXPECT_EQ(r.sharded_heads, 3);
  EXPECT_EQ(r.sharded_kv_heads, 1);
}

TEST(LiveWork, RefusesWhatTheProxyCannotRun) {
  const ModelConfig& qwen = named_model("Qwen2.5-0.5B");
  EXPECT_THROW(proxy_shape(work({{100, 1}}, 3), qwen), PlanningError);  // 14 heads over TP 3
  EXPECT_THROW(proxy_shape(work({{100, 2}, {100, 4}}), qwen), PlanningError);
  EXPECT_THROW(proxy_shape(work({{Tokens{1} << 40, 1}}), qwen), PlanningError);
}

TEST(LiveWork, NcclArgumentsFollowNcclTestsSizes) {
  // 1000 bytes = 500 BF16 elements over 4 ranks.
  const NcclArgs a2a = nccl_args(CollectiveOp::AllToAll, 1000, 4);
  EXPECT_EQ(a2a.count, 125u);
  EXPECT_EQ(a2a.send_bytes, 1000u);
  EXPECT_EQ(a2a.recv_bytes, 1000u);
  const NcclArgs ag = nccl_args(CollectiveOp::AllGather, 1000, 4);
  EXPECT_EQ(ag.count, 125u);
  EXPECT_EQ(ag.send_bytes, 250u);
  EXPECT_EQ(ag.recv_bytes, 1000u);
  const NcclArgs rs = nccl_args(CollectiveOp::ReduceScatter, 1000, 4);
  EXPECT_EQ(rs.count, 125u);
  EXPECT_EQ(rs.send_bytes, 1000u);
  EXPECT_EQ(rs.recv_bytes, 250u);
  const NcclArgs ar = nccl_args(CollectiveOp::AllReduce, 1000, 4);
  EXPECT_EQ(ar.count, 500u);
  EXPECT_EQ(ar.send_bytes, 1000u);
  // 3 elements over 4 ranks: nothing to move; 1002 bytes: 501 elements, 125 per rank (the rest dropped as nccl-tests).
  EXPECT_EQ(nccl_args(CollectiveOp::AllToAll, 6, 4).count, 0u);
  EXPECT_EQ(nccl_args(CollectiveOp::ReduceScatter, 1002, 4).send_bytes, 1000u);
}

IterationPlan two_rank_plan(bool overlap) {
  IterationPlan plan;
  plan.replicas = {replica(
      scheme(1, 1, 2), {0, 1},
      {micro_batch({on_rank(1, 10, 0), on_rank(3, 6, 1), sharded(2, 20)}), micro_batch({sharded(4, 20)})}, overlap)};
  return plan;
}

TEST(LiveWork, IdenticalWorkIsOneJobAndOverlapNeedsAMemoryProbe) {
  const CostModel cost = tiny_cost(1, 2);
  JobTable table;
  // Without overlap: rank 0 {10, 20/2}, rank 1 {6, 20/2}; micro-batch 1: both ranks {20/2}, one job. Jobs are
  // numbered in first use, GPU by GPU.
  const ProgramJobs flat = table.add(program::build_program(two_rank_plan(false), cost, {}), cost.model());
  ASSERT_EQ(table.jobs().size(), 3u);
  EXPECT_EQ(flat.steps[0][1].job, 0);
  EXPECT_EQ(flat.steps[0][1].part, StepJob::Part::Whole);
  EXPECT_EQ(flat.steps[0][3].job, 1);  // SetStatic, compute, all-to-all, compute of micro-batch 1
  EXPECT_EQ(flat.steps[1][1].job, 2);
  EXPECT_EQ(flat.steps[1][3].job, 1);
  EXPECT_EQ(flat.steps[0][2].part, StepJob::Part::None);
  EXPECT_EQ(flat.memory[0], (std::vector<int>{0, 1}));  // what it holds: each micro-batch's job
  EXPECT_EQ(table.jobs()[1].shape.sharded, (std::vector<int>{20}));
  EXPECT_EQ(table.jobs()[1].shape.rows(), 10);
  for (const DeviceJob& j : table.jobs()) EXPECT_TRUE(j.timed);

  // With overlap, rank 0 runs {10} beside the all-to-all and {20/2} after it: timed apart, held together.
  JobTable overlap_table;
  const ProgramJobs overlap = overlap_table.add(program::build_program(two_rank_plan(true), cost, {}), cost.model());
  const auto& jobs = overlap_table.jobs();
  ASSERT_EQ(overlap.memory[0].size(), 2u);
  const DeviceJob& probe = jobs[static_cast<std::size_t>(overlap.memory[0][0])];
  EXPECT_FALSE(probe.timed);
  EXPECT_EQ(probe.shape.local, (std::vector<int>{10}));
  EXPECT_EQ(probe.shape.sharded, (std::vector<int>{20}));
  EXPECT_EQ(jobs[static_cast<std::size_t>(overlap.steps[0][1].job)].shape.local, (std::vector<int>{10}));
  EXPECT_TRUE(jobs[static_cast<std::size_t>(overlap.steps[0][1].job)].shape.sharded.empty());
  // Micro-batch 1 has only sharded work: its timed job is its memory job.
  EXPECT_EQ(overlap.memory[0][1], overlap.steps[0][overlap.steps[0].size() - 3].job);
}

TEST(LiveWork, EachJobRemembersWhatTheCostModelChargedItsSteps) {
  const CostModel cost = tiny_cost(1, 2);
  JobTable table;
  const program::IterationProgram program = program::build_program(two_rank_plan(false), cost, {});
  table.add(program, cost.model(), 3);
  table.add(program, cost.model(), 1);  // the same program again, for another owner
  ASSERT_EQ(table.uses().size(), table.jobs().size());
  // Job 1 ({20/2}) runs on both ranks in micro-batch 1, twice over: four steps, owners 1 and 3.
  const JobUse& shared = table.uses()[1];
  EXPECT_EQ(shared.steps, 4);
  EXPECT_EQ(shared.tags, (std::vector<int>{1, 3}));
  EXPECT_EQ(shared.predicted_spread, 0.0);
  EXPECT_TRUE(std::isnan(shared.predicted_forward_s));
  const ParallelScheme s = scheme(1, 1, 2);
  const std::vector<SequenceShare> shares{{20, 2}};
  EXPECT_NEAR(shared.predicted_whole_s, cost.compute_seconds(shares, s, cost.model().layers, true), kTol);
  EXPECT_GT(table.uses()[0].predicted_whole_s, shared.predicted_whole_s);  // {10, 20/2} costs more than {20/2}
}

TEST(LiveWork, PipelinePassesShareOneJobAndTakeItsParts) {
  const CostModel cost = tiny_cost(1, 2);
  IterationPlan plan;
  plan.replicas = {replica(scheme(1, 2, 1), {0, 1}, {micro_batch({on_rank(1, 10, 0)})})};
  JobTable table;
  const ProgramJobs mapped = table.add(program::build_program(plan, cost, {}), cost.model());
  std::vector<StepJob> parts;
  for (const StepJob& s : mapped.steps[1])
    if (s.part != StepJob::Part::None) parts.push_back(s);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].part, StepJob::Part::Forward);
  EXPECT_EQ(parts[1].part, StepJob::Part::Backward);
  EXPECT_EQ(parts[0].job, parts[1].job);
  EXPECT_TRUE(table.jobs()[static_cast<std::size_t>(parts[0].job)].shape.lm_head);
  const JobUse& use = table.uses()[static_cast<std::size_t>(parts[0].job)];
  EXPECT_GT(use.predicted_forward_s, 0);
  EXPECT_GT(use.predicted_backward_s, use.predicted_forward_s);
  EXPECT_TRUE(std::isnan(use.predicted_whole_s));
  EXPECT_FALSE(table.jobs()[static_cast<std::size_t>(mapped.memory[0][0])].shape.lm_head);
}

/// Results that give every job the cost model's own time for its shape (toy model: ShareCost by hand).
std::vector<JobResult> model_results(const CostModel& cost, const std::vector<DeviceJob>& jobs) {
  std::vector<JobResult> out;
  for (const DeviceJob& j : jobs) {
    std::vector<SequenceShare> shares;
    for (int t : j.shape.local) shares.push_back({t, 1});
    for (int t : j.shape.sharded) shares.push_back({t, j.shape.cp});
    ParallelScheme s = scheme(1, 1, j.shape.cp);
    JobResult r;
    r.total_s = cost.compute_seconds(shares, s, j.shape.layers, j.shape.lm_head);
    r.activation_peak_bytes = 100;
    out.push_back(r);
  }
  return out;
}

TEST(LiveWork, ComposingWithTheModelsOwnSecondsGivesTheModelsIteration) {
  const CostModel cost = tiny_cost(1, 2);
  for (bool overlap : {false, true}) {
    const program::IterationProgram program = program::build_program(two_rank_plan(overlap), cost, {});
    JobTable table;
    const ProgramJobs mapped = table.add(program, cost.model());
    const MeasuredIteration m =
        compose_rank_serial(program, mapped, table.jobs(), model_results(cost, table.jobs()), true);
    const program::IterationOutcome model = program::replay_program(program, 0, false);
    EXPECT_NEAR(m.seconds, model.seconds, 1e-9 * model.seconds) << "overlap " << overlap;
    for (std::size_t g = 0; g < 2; ++g) EXPECT_NEAR(m.busy_seconds[g], model.busy_seconds[g], 1e-9 * model.seconds);
    EXPECT_TRUE(m.oom_gpus.empty());
    EXPECT_FALSE(m.spans.empty());
  }
}

TEST(LiveWork, ComposedTimeIsTheReplayOfMeasuredComputeAndModelCollectives) {
  // One micro-batch {10 on rank 0, 6 on rank 1, 20 sharded}, no overlap: measured 10 s and 7 s of compute, then the
  // 2-GPU all-to-all of 10 sharded tokens per GPU (28.8 s in the toy profile), then the ZeRO reduce-scatter and
  // all-gather (0.25 s each): 10 + 28.8 + 0.5 = 39.3 s. Rank 1 is busy 7 + 28.8 + 0.5 = 36.3 s.
  const CostModel cost = tiny_cost(1, 2);
  IterationPlan plan;
  plan.replicas = {
      replica(scheme(1, 1, 2), {0, 1}, {micro_batch({on_rank(1, 10, 0), on_rank(3, 6, 1), sharded(2, 20)})})};
  const program::IterationProgram program = program::build_program(plan, cost, {});
  JobTable table;
  const ProgramJobs mapped = table.add(program, cost.model());
  ASSERT_EQ(table.jobs().size(), 2u);
  std::vector<JobResult> results(2);
  results[static_cast<std::size_t>(mapped.steps[0][1].job)].total_s = 10;
  results[static_cast<std::size_t>(mapped.steps[1][1].job)].total_s = 7;
  results[static_cast<std::size_t>(mapped.steps[0][1].job)].activation_peak_bytes = 40;
  const MeasuredIteration m = compose_rank_serial(program, mapped, table.jobs(), results, false);
  EXPECT_NEAR(m.seconds, 39.3, kTol);
  EXPECT_NEAR(m.busy_seconds[0], 39.3, kTol);
  EXPECT_NEAR(m.busy_seconds[1], 36.3, kTol);
  EXPECT_NEAR(m.peak_bytes[0], 40, kTol);  // no static bytes in the toy profile

  // Rank 1's job runs out of memory: no time, the GPU named, its error kept.
  results[static_cast<std::size_t>(mapped.steps[1][1].job)].oom = true;
  results[static_cast<std::size_t>(mapped.steps[1][1].job)].oom_error = "cudaErrorMemoryAllocation";
  const MeasuredIteration oom = compose_rank_serial(program, mapped, table.jobs(), results, false);
  EXPECT_TRUE(std::isnan(oom.seconds));
  EXPECT_EQ(oom.oom_gpus, (std::vector<int>{1}));
  EXPECT_EQ(oom.oom_error, "GPU 1: cudaErrorMemoryAllocation");
}

}  // namespace live_work_test
}  // namespace lcsim
