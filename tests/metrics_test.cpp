#include "model/metrics.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "base/errors.hpp"
#include "model/results.hpp"
#include "tests/policy_test_fixtures.hpp"

namespace lcsim {
namespace metrics_test {

using testing::micro_batch;
using testing::on_rank;
using testing::replica;
using testing::scheme;
using testing::sharded;

constexpr Tokens K = kKiloTokens;

IterationEstimate busy(std::vector<double> seconds) {
  IterationEstimate e;
  e.busy_seconds = std::move(seconds);
  return e;
}

TEST(MetricsHbp, AttentionBalanceRatioPaperExample) {
  // HBP Sec. 3.1: packs {1K,1K,1K,1K} and {2K,2K} on two devices: same tokens, attention 4K^2 vs 8K^2,
  // ABR = (8K^2 - 4K^2) / (8K^2 x 2) = 0.25.
  IterationPlan plan;
  plan.replicas = {replica(scheme(1, 1, 1), {0},
                           {micro_batch({on_rank(1, K, 0), on_rank(2, K, 0), on_rank(3, K, 0), on_rank(4, K, 0)})}),
                   replica(scheme(1, 1, 1), {1}, {micro_batch({on_rank(5, 2 * K, 0), on_rank(6, 2 * K, 0)})})};
  const BalanceMetrics m = compute_metrics(plan, busy({1, 1}), 2);
  EXPECT_DOUBLE_EQ(m.abr, 0.25);
  EXPECT_DOUBLE_EQ(m.dbr, 0);
  EXPECT_DOUBLE_EQ(m.pr, 0);
  EXPECT_DOUBLE_EQ(m.cr, 0);
  EXPECT_DOUBLE_EQ(m.max_min_time_ratio, 1);
}

TEST(MetricsHbp, DistBalanceRatioOverThePlansGpus) {
  // Tokens 100, 50, 150 on three used GPUs of eight: DBR = (50 + 100 + 0) / (150 x 3) = 1/3; the five idle GPUs
  // are not devices of this plan.
  IterationPlan plan;
  plan.replicas = {
      replica(scheme(1, 1, 1), {0}, {micro_batch({on_rank(1, 100, 0)})}),
      replica(scheme(1, 1, 1), {3}, {micro_batch({on_rank(2, 50, 0)})}),
      replica(scheme(1, 1, 1), {5}, {micro_batch({on_rank(3, 100, 0)}), micro_batch({on_rank(4, 50, 0)})})};
  const BalanceMetrics m = compute_metrics(plan, busy({2, 0, 0, 1, 0, 4, 0, 0}), 8);
  EXPECT_NEAR(m.dbr, 1.0 / 3.0, 1e-12);
  // A = 100^2, 50^2, 100^2 + 50^2 = 10000, 2500, 12500: ABR = (2500 + 10000) / (12500 x 3) = 1/3.
  EXPECT_NEAR(m.abr, 1.0 / 3.0, 1e-12);
  EXPECT_DOUBLE_EQ(m.max_min_time_ratio, 4.0);  // busy 2, 1, 4 on the used GPUs
}

TEST(Metrics, PipelineGapComparesReplicasByPropagationLatencyNotBusyTime) {
  // Replica 0: a 2-stage pipeline on GPUs 0, 1 whose stages end at 9 and 10 s but were busy 4 and 8 s (bubbles);
  // replica 1: one GPU ending at 8 s. The pipelines are 10 and 8 s: gap 0.25. Replica 2 holds no micro-batch: it
  // has no latency and is left out, where the busy-time ratio calls its idle GPU unbounded.
  IterationPlan plan;
  plan.replicas = {replica(scheme(1, 2, 1), {0, 1}, {micro_batch({on_rank(1, 100, 0)})}),
                   replica(scheme(1, 1, 1), {2}, {micro_batch({on_rank(2, 100, 0)})}),
                   replica(scheme(1, 1, 1), {3}, {})};
  IterationEstimate e = busy({4, 8, 6, 0});
  e.propagation_end_s = {9, 10, 8, 0};
  const BalanceMetrics m = compute_metrics(plan, e, 4);
  EXPECT_DOUBLE_EQ(m.pipeline_gap, 0.25);
  EXPECT_TRUE(std::isinf(m.max_min_time_ratio));
  EXPECT_DOUBLE_EQ(compute_metrics(plan, busy({4, 8, 6, 0}), 4).pipeline_gap, 0);  // no propagation times
  EXPECT_DOUBLE_EQ(mean_metrics({m, compute_metrics(plan, busy({4, 8, 6, 0}), 4)}).pipeline_gap, 0.125);
}

TEST(MetricsHbp, PaddingRatio) {
  // Padded {10, 30, 20}: PR = (20 + 0 + 10) / (30 x 3) = 1/3; an unpadded micro-batch of 40 tokens adds 40
  // real tokens and no padding: 30 / (90 + 40).
  IterationPlan plan;
  plan.replicas = {
      replica(scheme(1, 1, 1), {0}, {micro_batch({on_rank(1, 10, 0), on_rank(2, 30, 0), on_rank(3, 20, 0)}, true)})};
  EXPECT_NEAR(compute_metrics(plan, busy({1}), 1).pr, 1.0 / 3.0, 1e-12);
  plan.replicas[0].micro_batches.push_back(micro_batch({on_rank(4, 40, 0)}));
  EXPECT_NEAR(compute_metrics(plan, busy({1}), 1).pr, 30.0 / 130.0, 1e-12);
}

TEST(MetricsHbp, CommunicationRatioCountsShardedTokens) {
  // CP 2: sequence 1 (100) sharded, sequence 2 (100) local on rank 0. T = 150 and 50; Tcomm = 50 and 50.
  IterationPlan plan;
  plan.replicas = {replica(scheme(1, 1, 2), {0, 1}, {micro_batch({sharded(1, 100), on_rank(2, 100, 0)})})};
  const BalanceMetrics m = compute_metrics(plan, busy({3, 1}), 2);
  EXPECT_DOUBLE_EQ(m.cr, 0.5);
  EXPECT_NEAR(m.dbr, (150.0 - 50.0) / (150.0 * 2), 1e-12);
  // A: 100^2/2 + 100^2 vs 100^2/2.
  EXPECT_NEAR(m.abr, (15000.0 - 5000.0) / (15000.0 * 2), 1e-12);
  EXPECT_DOUBLE_EQ(m.max_min_time_ratio, 3.0);
  // A "sharded" sequence on a CP group of one GPU communicates nothing.
  plan.replicas = {replica(scheme(1, 1, 1), {0}, {micro_batch({sharded(1, 100)})})};
  EXPECT_DOUBLE_EQ(compute_metrics(plan, busy({1}), 1).cr, 0);
}

TEST(MetricsHbp, ModelParallelGroupsCompareByWorkShare) {
  // A tp 2 replica with 200 tokens does the same per-GPU work as a tp 1 replica with 100 tokens.
  IterationPlan plan;
  plan.replicas = {replica(scheme(2, 1, 1), {0, 1}, {micro_batch({on_rank(1, 200, 0)})}),
                   replica(scheme(1, 1, 1), {2}, {micro_batch({on_rank(2, 100, 0)})})};
  EXPECT_NEAR(compute_metrics(plan, busy({1, 1, 1}), 3).dbr, 0, 1e-12);
}

TEST(MetricsHbp, IdleGpuMakesTheTimeRatioInfinite) {
  IterationPlan plan;
  plan.replicas = {replica(scheme(1, 1, 2), {0, 1}, {micro_batch({on_rank(1, 100, 0)})})};
  EXPECT_TRUE(std::isinf(compute_metrics(plan, busy({2, 0}), 2).max_min_time_ratio));
  EXPECT_DOUBLE_EQ(compute_metrics(plan, busy({0, 0}), 2).max_min_time_ratio, 1);
}

TEST(MetricsHbp, MeanOverIterations) {
  const BalanceMetrics mean = mean_metrics({{0.1, 0.2, 0.3, 0.4, 1.0}, {0.3, 0.0, 0.1, 0.0, 3.0}});
  EXPECT_DOUBLE_EQ(mean.dbr, 0.2);
  EXPECT_DOUBLE_EQ(mean.pr, 0.1);
  EXPECT_DOUBLE_EQ(mean.abr, 0.2);
  EXPECT_DOUBLE_EQ(mean.cr, 0.2);
  EXPECT_DOUBLE_EQ(mean.max_min_time_ratio, 2.0);
  EXPECT_DOUBLE_EQ(mean_metrics({}).max_min_time_ratio, 1.0);
}

TEST(MetricsHbp, WorkWeightedAbrWeighsIterationsByAttentionCapacity) {
  // Iteration 1: two 1K sequences on two GPUs, balanced (ABR 0, capacity 2 x 1K^2). Iteration 2: a 4K sequence
  // beside a 2K one (idle 16 - 4 = 12 K^2 of a capacity of 2 x 16 K^2: ABR 0.375). The mean of the ABRs is 0.1875;
  // over the run, 12 K^2 idle of 34 K^2.
  IterationPlan balanced;
  balanced.replicas = {replica(scheme(1, 1, 1), {0}, {micro_batch({on_rank(1, K, 0)})}),
                       replica(scheme(1, 1, 1), {1}, {micro_batch({on_rank(2, K, 0)})})};
  IterationPlan skewed;
  skewed.replicas = {replica(scheme(1, 1, 1), {0}, {micro_batch({on_rank(3, 4 * K, 0)})}),
                     replica(scheme(1, 1, 1), {1}, {micro_batch({on_rank(4, 2 * K, 0)})})};
  const BalanceMetrics a = compute_metrics(balanced, busy({1, 1}), 2);
  const BalanceMetrics b = compute_metrics(skewed, busy({1, 1}), 2);
  EXPECT_DOUBLE_EQ(a.abr_work, a.abr);
  EXPECT_DOUBLE_EQ(b.abr, 0.375);
  EXPECT_DOUBLE_EQ(b.attention_capacity, 2.0 * 16 * K * K);
  const BalanceMetrics run = mean_metrics({a, b});
  EXPECT_DOUBLE_EQ(run.abr, 0.1875);
  EXPECT_DOUBLE_EQ(run.abr_work, 12.0 / 34.0);
}

IterationResult iteration(double seconds, Tokens tokens, bool oom = false) {
  IterationResult it;
  it.seconds = seconds;
  it.tokens = tokens;
  it.oom = oom;
  return it;
}

TEST(MetricsResults, SummarizeUsesNearestRankPercentiles) {
  PolicyResult r;
  r.iterations = {iteration(4, 100), iteration(1, 50, true), iteration(3, 50), iteration(2, 200)};
  r.iterations[0].metrics.dbr = 0.4;
  summarize(r);
  EXPECT_DOUBLE_EQ(r.total_s, 10);
  EXPECT_DOUBLE_EQ(r.mean_iteration_s, 2.5);
  EXPECT_DOUBLE_EQ(r.p50_iteration_s, 2);  // ceil(0.5 x 4) = 2nd smallest
  EXPECT_DOUBLE_EQ(r.p99_iteration_s, 4);
  EXPECT_EQ(r.tokens, 400);
  EXPECT_DOUBLE_EQ(r.tokens_per_s, 40);
  EXPECT_EQ(r.oom_iterations, 1);
  EXPECT_DOUBLE_EQ(r.metrics.dbr, 0.1);

  PolicyResult many;
  for (int i = 1; i <= 200; ++i) many.iterations.push_back(iteration(201 - i, 1));
  summarize(many);
  EXPECT_DOUBLE_EQ(many.p50_iteration_s, 100);
  EXPECT_DOUBLE_EQ(many.p99_iteration_s, 198);  // ceil(0.99 x 200) = 198th smallest

  PolicyResult empty;
  summarize(empty);
  EXPECT_EQ(empty.total_s, 0);
  EXPECT_EQ(empty.tokens_per_s, 0);
}

TEST(MetricsResults, BaselineSpeedupIsTokenThroughputRatio) {
  RunResults run;
  run.scenario_file = "s.json";
  run.baseline = "ds";
  run.policies.resize(2);
  run.policies[0].label = "ds";
  run.policies[0].iterations = {iteration(4, 100)};
  run.policies[1].label = "skrull";
  run.policies[1].iterations = {iteration(1, 50), iteration(1, 50)};
  for (auto& p : run.policies) summarize(p);
  apply_baseline(run);
  EXPECT_DOUBLE_EQ(run.policies[0].speedup_vs_baseline, 1);
  EXPECT_DOUBLE_EQ(run.policies[1].speedup_vs_baseline, 2);  // 50 tokens/s vs 25

  run.baseline = "nope";
  try {
    apply_baseline(run);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("s.json"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("'nope'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("ds, skrull"), std::string::npos);
  }
}

}  // namespace metrics_test
}  // namespace lcsim
