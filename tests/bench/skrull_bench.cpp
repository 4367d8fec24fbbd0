// Skrull planner speed (the paper's setting: DP=4, CP=8, BatchSize=64, Qwen2.5-0.5B, BucketSize 26K) and the
// DACP heuristic's distance from the exact optimum on 1,000 random small micro-batches.
//   build/tests/lcsim_bench --benchmark_filter=BM_Skrull
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>

#include "policies/core/policy.hpp"
#include "policies/skrull/objective.hpp"
#include "policies/skrull/skrull_view.hpp"

namespace lcsim::skrull {
namespace {

CostModel bench_cost(const std::string& model = "Qwen2.5-0.5B") {
  ClusterSpec cluster;
  cluster.gpu = named_gpu("H100-SXM");
  cluster.nodes = 4;
  cluster.gpus_per_node = 8;
  cluster.nvlink_GBps = 450;
  cluster.ib_GBps = 50;
  return CostModel(named_model(model), cluster,
                   load_profile(std::string(LCSIM_SOURCE_DIR) + "/calibrate/profiles/h100-sxm-default.json"));
}

void BM_SkrullPlanGlobalBatch(benchmark::State& state, const std::string& distribution) {
  const CostModel cost = bench_cost();
  PlanningContext context;
  context.cost = &cost;
  context.layout.dp = 4;
  context.layout.cp = 8;
  context.training.global_batch_sequences = 256;
  context.training.bucket_size_tokens = 26 * kKiloTokens;
  constexpr std::size_t kBatches = 64;
  const Dataset data =
      sample_dataset(distribution, {MixComponent{&named_distribution(distribution), 1.0}}, kBatches * 256, 42);
  std::vector<GlobalBatch> batches(kBatches);
  for (std::size_t i = 0; i < data.size(); ++i) batches[i / 256].push_back(data.sequences()[i]);
  PolicySpec spec;
  spec.kind = "skrull";
  auto policy = make_policy(spec);
  std::size_t next = 0;
  for (auto _ : state) {
    auto plans = policy->plan(context, std::span(&batches[next], 1));  // one global batch per iteration
    benchmark::DoNotOptimize(plans);
    next = (next + 1) % kBatches;
  }
  state.SetLabel(distribution + ", DP=4 CP=8 BatchSize=64, one global batch");
}
BENCHMARK_CAPTURE(BM_SkrullPlanGlobalBatch, chatqa2, std::string("chatqa2-long-sft"))
    ->Unit(benchmark::kMicrosecond)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK_CAPTURE(BM_SkrullPlanGlobalBatch, wikipedia, std::string("wikipedia"))
    ->Unit(benchmark::kMicrosecond)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

// GDS at scale, as issue #32 measured it (scenarios/skrull/qwen7b-wikipedia.json with 100,000 sequences per global
// batch): Qwen2.5-7B on wikipedia lengths, DP=4, CP=8, BucketSize from the cost model's memory view, planned by
// skrull (DACP) or rr (round-robin placement). Both share gds_schedule_rank, whose search over micro-batch counts
// was O(n) per count tried (2.84 s for rr in the issue) and is O(n log n) in all since.
void BM_SkrullPlanLargeBatch(benchmark::State& state, const std::string& kind) {
  const CostModel cost = bench_cost("Qwen2.5-7B");
  PlanningContext context;
  context.cost = &cost;
  context.layout.dp = 4;
  context.layout.cp = 8;
  constexpr std::size_t kSequences = 100000;
  context.training.global_batch_sequences = kSequences;
  const Dataset data =
      sample_dataset("wikipedia", {MixComponent{&named_distribution("wikipedia"), 1.0}}, kSequences, 42);
  const std::vector<GlobalBatch> batches = {GlobalBatch(data.sequences().begin(), data.sequences().end())};
  PolicySpec spec;
  spec.kind = kind;
  auto policy = make_policy(spec);
  std::size_t micro_batches = 0;
  for (auto _ : state) {
    auto plans = policy->plan(context, batches);
    benchmark::DoNotOptimize(plans);
    micro_batches = 0;
    for (const auto& replica : plans.front().replicas) micro_batches += replica.micro_batches.size();
  }
  state.counters["micro_batches"] = static_cast<double>(micro_batches);
  state.SetLabel(kind + ", Qwen2.5-7B, wikipedia, DP=4 CP=8, one global batch of 100k sequences");
}
BENCHMARK_CAPTURE(BM_SkrullPlanLargeBatch, skrull, std::string("skrull"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_SkrullPlanLargeBatch, rr, std::string("rr"))->Unit(benchmark::kMillisecond);

// Heuristic / optimum TDACP over 1,000 random feasible micro-batches of up to 12 sequences, CP 2 or 4
// (chatqa2-long-sft lengths capped at 2 C): reported as counters p50, p90, p99 and max of the ratio.
void BM_SkrullOptimalityGap(benchmark::State& state) {
  const CostModel cost = bench_cost();
  const Tokens bucket = 24 * kKiloTokens;
  std::vector<double> ratios;
  long long nodes = 0;
  for (auto _ : state) {
    ratios.clear();
    Rng rng(2024);
    const auto& dist = named_distribution("chatqa2-long-sft");
    while (ratios.size() < 1000) {
      const int cp = rng.below(2) == 0 ? 2 : 4;
      ParallelScheme scheme;
      scheme.cp = cp;
      const SkrullView view(cost, scheme, 32, bucket);
      std::vector<Tokens> lengths(1 + rng.below(12));
      LengthSampler sampler(dist, rng.next());
      for (auto& s : lengths) s = std::min<Tokens>(sampler.sample(), 2 * bucket);
      const auto optimum = optimal_dacp(view, lengths, static_cast<double>(bucket), cp);
      if (!optimum) continue;
      nodes += optimum->nodes;
      std::vector<double> flops;
      for (const Tokens s : lengths) flops.push_back(view.flops(s));
      const auto heuristic = dacp_schedule(lengths, flops, static_cast<double>(bucket), cp, true);
      ratios.push_back(tdacp_seconds(view, lengths, heuristic.ranks, cp) / optimum->seconds);
    }
  }
  std::sort(ratios.begin(), ratios.end());
  const auto at = [&](double q) {
    return ratios[static_cast<std::size_t>(q * static_cast<double>(ratios.size() - 1))];
  };
  state.counters["p50"] = at(0.5);
  state.counters["p90"] = at(0.9);
  state.counters["p99"] = at(0.99);
  state.counters["max"] = ratios.back();
  state.counters["optimal_share"] =
      static_cast<double>(std::count_if(ratios.begin(), ratios.end(), [](double r) { return r <= 1 + 1e-9; })) /
      static_cast<double>(ratios.size());
  state.SetLabel("heuristic/optimum TDACP, 1000 micro-batches");
}
BENCHMARK(BM_SkrullOptimalityGap)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace lcsim::skrull
