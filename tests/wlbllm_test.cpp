// WLB-LLM (policies/wlbllm/) and its baselines (policies/baselines/four_d.hpp) on hand-worked examples: Algorithm 1's
// greedy, the outlier queues, the adaptive CP split, the baselines' packers, and the heuristic against the exact
// optimum of Eq. 2 on small inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "base/random.hpp"
#include "model/validator.hpp"
#include "policies/baselines/four_d.hpp"
#include "policies/wlbllm/packing.hpp"
#include "policies/wlbllm/wlbllm_policy.hpp"
#include "policies/wlbllm/wlbllm_view.hpp"
#include "tests/policy_test_fixtures.hpp"

namespace lcsim {
namespace wlbllm_test {

using wlbllm::OutlierQueues;
using wlbllm::VariableLengthPacker;

std::vector<Sequence> docs(std::initializer_list<Tokens> lengths) {
  std::vector<Sequence> out;
  std::int64_t id = 0;
  for (Tokens t : lengths) out.push_back({id++, t});
  return out;
}

std::vector<Tokens> lengths(const std::vector<Sequence>& mb) {
  std::vector<Tokens> out;
  for (const auto& d : mb) out.push_back(d.tokens);
  return out;
}

std::vector<std::vector<Tokens>> lengths(const std::vector<std::vector<Sequence>>& mbs) {
  std::vector<std::vector<Tokens>> out;
  for (const auto& mb : mbs) out.push_back(lengths(mb));
  return out;
}

double square(Tokens d) {
  return static_cast<double>(d) * static_cast<double>(d);
}

TEST(WlbLlmPacking, GreedyBalancesEstimatedTimeNotTokens) {
  // W = d^2, N = 2: 10 -> mb0 (100); 6 -> mb1 (36); 6 -> mb1 (72); 6 -> mb1 (72 < 100: 108). Balancing tokens
  // would give [10, 6] | [6, 6] (the third 6 joins the 10: 10 < 12 tokens).
  EXPECT_EQ(lengths(wlbllm::pack_greedy(docs({10, 6, 6, 6}), 2, 100, square, nullptr)),
            (std::vector<std::vector<Tokens>>{{10}, {6, 6, 6}}));
  // Ties go to the lowest index: 10 -> mb0 (100); 8 -> mb1 (64); 6 -> mb1 (100); 5 -> tie, mb0 (125); 3 -> mb1.
  EXPECT_EQ(lengths(wlbllm::pack_greedy(docs({10, 8, 6, 5, 3}), 2, 100, square, nullptr)),
            (std::vector<std::vector<Tokens>>{{10, 5}, {8, 6, 3}}));
}

TEST(WlbLlmPacking, StrictLimitFallsBackToFewestTokensThenCarriesOver) {
  // W = 1 a document, S_max 8: the fifth document's least-work micro-batch (mb0, 7 tokens) has no room below 8,
  // so it goes to the one with fewest tokens (mb1).
  const auto constant = [](Tokens) { return 1.0; };
  EXPECT_EQ(lengths(wlbllm::pack_greedy(docs({6, 1, 1, 1, 1}), 2, 8, constant, nullptr)),
            (std::vector<std::vector<Tokens>>{{6, 1}, {1, 1, 1}}));
  // W = d^2, S_max 12: the last 3 fits nowhere (9 + 3 is not below 12) and is carried.
  std::vector<Sequence> left;
  EXPECT_EQ(lengths(wlbllm::pack_greedy(docs({10, 3, 3, 3, 3}), 2, 12, square, &left)),
            (std::vector<std::vector<Tokens>>{{10}, {3, 3, 3}}));
  EXPECT_EQ(lengths(left), (std::vector<Tokens>{3}));
}

TEST(WlbLlmPacking, QueuesHoldOutliersByLevelAndReleaseNOldest) {
  OutlierQueues q({50, 80}, 2);
  EXPECT_FALSE(q.push({0, 40}));
  EXPECT_TRUE(q.push({1, 60}));
  EXPECT_TRUE(q.push({2, 90}));
  EXPECT_FALSE(q.push({3, 50}));  // outliers are longer than L_1
  EXPECT_TRUE(q.push({4, 81}));
  EXPECT_TRUE(q.push({5, 95}));
  EXPECT_EQ(lengths(q.release()), (std::vector<Tokens>{90, 81}));  // queue 2's two oldest; queue 1 holds one
  EXPECT_EQ(q.size(0), 1u);
  EXPECT_EQ(q.size(1), 1u);
  EXPECT_EQ(lengths(q.flush()), (std::vector<Tokens>{60, 95}));
  EXPECT_TRUE(q.empty());
}

TEST(WlbLlmPacking, OutliersWaitUntilNCanGoTogether) {
  VariableLengthPacker packer(2, 1000, square, OutlierQueues({50}, 2));
  // Batch 0: the 60 waits (one outlier, N = 2); only the short documents train.
  EXPECT_EQ(lengths(packer.next(docs({60, 10, 10, 10}))), (std::vector<std::vector<Tokens>>{{10, 10}, {10}}));
  // Batch 1: the 70 makes two; both are released, one per micro-batch: [70, 60, 20, 10] -> 70 | 60, 20, 10.
  EXPECT_EQ(lengths(packer.next(docs({70, 10, 20}))), (std::vector<std::vector<Tokens>>{{70}, {60, 20, 10}}));
  EXPECT_TRUE(packer.drained());
}

TEST(WlbLlmPacking, FlushTrainsWhatIsStillQueuedAfterTheLastBatch) {
  VariableLengthPacker packer(2, 1000, square, OutlierQueues({50}, 2));
  EXPECT_EQ(lengths(packer.next(docs({60, 5}))), (std::vector<std::vector<Tokens>>{{5}}));
  EXPECT_FALSE(packer.drained());
  EXPECT_EQ(lengths(packer.flush()), (std::vector<std::vector<Tokens>>{{60}}));
  EXPECT_TRUE(packer.drained());
  EXPECT_TRUE(packer.flush().empty());
}

TEST(WlbLlmPacking, HeuristicAgainstExactOptimumOnSmallInputs) {
  // Eq. 2 with W = a d^2 + b d (attention and linear halves equal at 8K tokens), 8 documents from 64 to 16K
  // tokens (log-uniform), N = 2 or 3, S_max above the sum: the heuristic's max over the exact one.
  const auto w = [](Tokens d) { return static_cast<double>(d) * (static_cast<double>(d) + 8192.0); };
  Rng rng(35);
  double sum = 0, worst = 0;
  int optimal = 0;
  constexpr int kInstances = 200;
  for (int i = 0; i < kInstances; ++i) {
    std::vector<Sequence> in;
    for (int k = 0; k < 8; ++k)
      in.push_back({k, static_cast<Tokens>(64.0 * std::exp(rng.uniform() * std::log(256.0)))});
    const int n = 2 + i % 2;
    std::vector<Sequence> sorted = in;
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.tokens > b.tokens; });
    const auto mbs = wlbllm::pack_greedy(sorted, n, 1 << 20, w, nullptr);
    double heuristic = 0;
    for (const auto& mb : mbs) {
      double load = 0;
      for (const auto& d : mb) load += w(d.tokens);
      heuristic = std::max(heuristic, load);
    }
    const double exact = wlbllm::exact_max_workload(in, n, 1 << 20, w);
    ASSERT_LE(exact, heuristic * (1 + 1e-12));  // the optimum is never worse than a feasible packing
    const double gap = heuristic / exact;
    sum += gap;
    worst = std::max(worst, gap);
    optimal += gap < 1 + 1e-12 ? 1 : 0;
  }
  std::printf("WLB-LLM greedy / exact optimum over %d instances: mean %.4f, worst %.4f, optimal in %d\n", kInstances,
              sum / kInstances, worst, optimal);
  // LPT's classic bound for identical machines, 4/3 - 1/(3N), holds for this list order.
  EXPECT_LE(worst, 4.0 / 3.0);
  EXPECT_GT(optimal, 0);
}

TEST(WlbLlmPacking, ExactSolverOnAHandExample) {
  // [5, 4, 3, 3, 3] under W = d over 2: best split 9 | 9.
  EXPECT_DOUBLE_EQ(wlbllm::exact_max_workload(docs({5, 4, 3, 3, 3}), 2, 100, [](Tokens d) { return double(d); }), 9);
  // Nothing fits below S_max 5 for a 5-token document.
  EXPECT_TRUE(std::isinf(wlbllm::exact_max_workload(docs({5}), 2, 5, [](Tokens d) { return double(d); })));
}

/// Ring attention over cp 2 on the toy model, attention kernels 10x faster at 1024 queries than at 16.
CostModel adaptive_cost() {
  Profile p = testing::tiny_profile();
  p.compute.attention_efficiency = Curve{{16, 1024}, {0.1, 1.0}, std::nullopt};
  return CostModel(testing::tiny_model(), testing::tiny_cluster(1, 2, 1e12), std::move(p),
                   CostModelOptions{.zero_stage = 2, .cp_attention = CpAttention::Zigzag});
}

TEST(WlbLlmView, AdaptiveShardingPicksPerSequenceForShortDocumentsAndPerDocumentForALongOne) {
  const CostModel cost = adaptive_cost();
  const wlbllm::WlbView view(cost, testing::scheme(1, 1, 2, Recompute::None), 1024);
  // 32 documents of 32 tokens: per document each kernel sees 16 queries (efficiency 0.1); per sequence each rank
  // holds 16 whole documents (32 queries each) and the same pairs: per sequence wins.
  const std::vector<Tokens> shorts(32, 32);
  EXPECT_LT(view.micro_batch_seconds(shorts, CpSplit::PerSequence),
            view.micro_batch_seconds(shorts, CpSplit::PerDocument));
  EXPECT_EQ(view.choose_split(shorts), CpSplit::PerSequence);
  // [1000, 24]: per sequence rank 1 holds the chunks at 256 and 512 of the long document, 262,400 pairs against
  // 250,144 a rank per document, in kernels of 256 queries instead of 500: per document wins.
  const std::vector<Tokens> skewed{1000, 24};
  EXPECT_LT(view.micro_batch_seconds(skewed, CpSplit::PerDocument),
            view.micro_batch_seconds(skewed, CpSplit::PerSequence));
  EXPECT_EQ(view.choose_split(skewed), CpSplit::PerDocument);
}

TEST(WlbLlmView, UlyssesNeverSplitsPerSequence) {
  const CostModel cost = testing::tiny_cost(1, 2, testing::tiny_profile(), 1e12);
  const wlbllm::WlbView view(cost, testing::scheme(1, 1, 2, Recompute::None), 1024);
  const std::vector<Tokens> shorts(32, 32);
  EXPECT_EQ(view.choose_split(shorts), CpSplit::PerDocument);
}

TEST(WlbLlmView, WorkloadIsTheFittedCurveWithoutItsConstant) {
  const CostModel cost = adaptive_cost();
  const wlbllm::WlbView view(cost, testing::scheme(1, 1, 2, Recompute::None), 1024);
  const auto& f = view.fit();
  EXPECT_GT(f.a, 0);  // attention: quadratic
  EXPECT_GT(f.b, 0);  // GEMMs: linear
  EXPECT_DOUBLE_EQ(view.workload(512), (f.a * 512 + f.b) * 512);
}

TEST(FourDBaselines, PlainPacksInOrderAndFixedBalancesSquares) {
  EXPECT_EQ(lengths(baselines::pack_in_order(docs({5, 4, 3, 3, 1}), 8)),
            (std::vector<std::vector<Tokens>>{{5}, {4, 3}, {3, 1}}));
  // d^2 descending: 5 -> p0 (25); 4 -> p1 (16); 3 -> p1 (25, 7 tokens); 3 -> tie, p0 (34, 8); 1 -> p1 (26, 8).
  EXPECT_EQ(lengths(baselines::pack_fixed_length_greedy(docs({5, 4, 3, 3, 1}), 8, 2)),
            (std::vector<std::vector<Tokens>>{{5, 3}, {4, 3, 1}}));
}

PolicySpec spec(const std::string& kind, nlohmann::json options = nlohmann::json::object()) {
  return PolicySpec{kind, kind, std::move(options), "test.json", "policies[0]"};
}

TEST(WlbLlmPolicy, PlansTheWindowDelayingOutliersAndFlushing) {
  const CostModel cost = adaptive_cost();
  PlanningContext context;
  context.cost = &cost;
  context.training.context_length = 1024;
  context.layout = ParallelLayout{.dp = 1, .cp = 2, .tp = 1, .pp = 1};
  // N = PP x DP = 1; one queue at 512 releasing 2 at a time (N would release every outlier on arrival).
  auto policy = make_policy(spec("wlb-llm", {{"queues", {512}}, {"release", 2}, {"s_max_tokens", 4096}}));
  const std::vector<GlobalBatch> batches{docs({600, 100, 100}), {{3, 700}, {4, 50}}, {{5, 40}}};
  const auto plans = policy->plan(context, batches);
  EXPECT_TRUE(validate_window(plans, batches).empty());
  // Batch 0 trains the two short documents only; the 600 and the 700 go together in batch 1's iteration.
  ASSERT_EQ(plans.size(), 3u);
  EXPECT_EQ(plans[0].sequence_count(), 2u);
  EXPECT_EQ(plans[1].sequence_count(), 3u);
  EXPECT_EQ(plans[1].tokens(), 1350);
  for (const auto& plan : plans) {
    std::vector<Sequence> own;
    for (const auto& r : plan.replicas)
      for (const auto& mb : r.micro_batches)
        for (const auto& p : mb.placements) own.push_back({p.sequence_id, p.tokens});
    EXPECT_TRUE(validate_plan(plan, own, cost).structurally_valid()) << plan.label;
  }
  // Without queues the 600 trains in its own batch.
  auto eager = make_policy(spec("wlb-llm", {{"queues", nlohmann::json::array()}, {"s_max_tokens", 4096}}));
  EXPECT_EQ(eager->plan(context, batches)[0].sequence_count(), 3u);
}

TEST(WlbLlmPolicy, ABatchOfMoreThanPpTimesDpWindowsGetsMoreMicroBatchesNotAnEndlessCarry) {
  // S_max 1,000, DP 1, PP 1: N = 1 would carry most of every 2,000-token batch forever; N = 3 holds each batch.
  const CostModel cost = adaptive_cost();
  PlanningContext context;
  context.cost = &cost;
  context.training.context_length = 512;
  context.layout = ParallelLayout{.dp = 1, .cp = 2, .tp = 1, .pp = 1};
  auto policy = make_policy(spec("wlb-llm", {{"queues", nlohmann::json::array()}, {"s_max_tokens", 1000}}));
  std::vector<GlobalBatch> batches;
  for (int b = 0; b < 4; ++b) {
    GlobalBatch batch;
    for (int i = 0; i < 5; ++i) batch.push_back({10 * b + i, 400});
    batches.push_back(batch);
  }
  const auto plans = policy->plan(context, batches);
  EXPECT_TRUE(validate_window(plans, batches).empty());
  ASSERT_EQ(plans.size(), 4u);  // no flush iteration: nothing was carried
  for (const auto& plan : plans) {
    EXPECT_EQ(plan.sequence_count(), 5u);
    EXPECT_EQ(plan.replicas.front().micro_batches.size(), 3u);  // 2 x 400 per micro-batch: ceil(2000 / 999) = 3
  }
}

TEST(WlbLlmPolicy, UnknownOptionsAndBadQueuesAreInputErrors) {
  EXPECT_THROW(make_policy(spec("wlb-llm", {{"queue", {512}}})), InputError);
  EXPECT_THROW(make_policy(spec("wlb-llm", {{"queues", {512, 256}}})), InputError);
  EXPECT_THROW(make_policy(spec("wlb-llm", {{"cp_sharding", "zigzag"}})), InputError);
  EXPECT_THROW(make_policy(spec("fixed-4d", {{"cp_split", "heads"}})), InputError);
  EXPECT_THROW(make_policy(spec("plain-4d", {{"anything", 1}})), InputError);
}

}  // namespace wlbllm_test
}  // namespace lcsim
