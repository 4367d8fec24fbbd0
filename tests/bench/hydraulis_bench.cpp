// Hydraulis planner speed in the setting of the paper's Table 2 (App. E): the 32B-class LLaMA on CommonCrawl
// lengths, 32K context, A800 nodes; 64 GPUs with 200K tokens per iteration and 1024 GPUs with 3.2M.
//   build/tests/lcsim_bench --benchmark_filter=BM_Hydraulis
// Paper (10 iterations, 10 processes): 64 GPUs -- greedy dispatch 5.46 s, packing 10.15 s, proposal 2.03 s;
// 1024 GPUs -- greedy dispatch 38.56 s, packing 13.46 s, proposal 107.21 s. lcsim runs on one core.
//   BM_HydraulisDispatchPacking  one iteration's dispatch (T = 100 trials) + packing on one strategy: the
//                                proposal's strategy for the longest L
//   BM_HydraulisSelection        one iteration's full selection: every candidate holding the batch screened,
//                                the finalists dispatched and packed, the plan built
//   BM_HydraulisProposal         the strategy proposal (Sec. 7 DP, paper steps) over a 10-iteration window
#include <benchmark/benchmark.h>

#include <stdexcept>
#include <string>

#include "policies/core/policy.hpp"
#include "model/profile.hpp"
#include "policies/hydraulis/hydraulis_policy.hpp"

namespace lcsim::hydraulis {
namespace {

struct Setting {
  std::unique_ptr<CostModel> cost;
  std::vector<GlobalBatch> batches;  ///< 10 iterations
  std::vector<Tokens> window;
  std::shared_ptr<const SchemeSpace> space;
};

Setting make_setting(int gpus) {
  Setting s;
  ClusterSpec cluster;
  cluster.gpu = named_gpu("A800");
  cluster.nodes = gpus / 8;
  cluster.gpus_per_node = 8;
  cluster.nvlink_GBps = 200;
  cluster.ib_GBps = 25;
  cluster.nvlink_latency_us = 2;
  cluster.ib_latency_us = 5;
  s.cost =
      std::make_unique<CostModel>(named_model("LLaMA-32B"), cluster,
                                  load_profile(std::string(LCSIM_SOURCE_DIR) + "/calibrate/profiles/a800-default.json"),
                                  CostModelOptions{.zero_stage = 2});
  TrainingConfig training;
  training.tokens_per_iteration = gpus == 64 ? 200000 : 3200000;
  training.context_length = 32 * kKiloTokens;
  const auto& d = named_distribution("commoncrawl");
  // About 560 tokens per sequence: enough sequences for 10 iterations.
  const std::size_t count = gpus == 64 ? 20000 : 160000;
  const Dataset data = sample_dataset("commoncrawl", {MixComponent{&d, 1.0}}, count, 1);
  s.batches = cut_global_batches(data.sequences(), training, false);
  if (s.batches.size() < 10) throw std::logic_error("hydraulis bench: sample too short for 10 iterations");
  s.batches.resize(10);
  for (const auto& b : s.batches)
    for (const auto& seq : b) s.window.push_back(seq.tokens);
  s.space = shared_scheme_space(*s.cost, gpus, SpaceOptions{});
  return s;
}

const Setting& setting(int gpus) {
  static const Setting s64 = make_setting(64);
  static const Setting s1024 = make_setting(1024);
  return gpus == 64 ? s64 : s1024;
}

void BM_HydraulisDispatchPacking(benchmark::State& state) {
  const Setting& s = setting(static_cast<int>(state.range(0)));
  const Proposal proposal = propose_strategies(s.window, 10, *s.space, {});
  const Strategy& strategy = proposal.strategies.back();
  const std::vector<Pipeline> pipelines = lay_out(strategy, *s.space);
  const HydraulisOptions options;
  std::size_t next = 0;
  double estimate = 0;
  for (auto _ : state) {
    const GlobalBatch& batch = s.batches[next];
    std::vector<Tokens> lengths;
    for (const auto& seq : batch) lengths.push_back(seq.tokens);
    const Assignment a = assign(lengths, pipelines, *s.space, options, next);
    benchmark::DoNotOptimize(a);
    estimate = a.estimate;
    next = (next + 1) % s.batches.size();
  }
  state.counters["pipelines"] = static_cast<double>(pipelines.size());
  state.counters["sequences"] = static_cast<double>(s.batches[0].size());
  state.counters["estimate_s"] = estimate;
  state.SetLabel(strategy.describe(*s.space));
}
BENCHMARK(BM_HydraulisDispatchPacking)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

void BM_HydraulisSelection(benchmark::State& state) {
  const Setting& s = setting(static_cast<int>(state.range(0)));
  const Proposal proposal = propose_strategies(s.window, 10, *s.space, {});
  HydraulisOptions options;
  for (const auto& strategy : proposal.strategies) {
    options.strategies.emplace_back();
    for (const auto& [scheme, count] : strategy.counts)
      options.strategies.back().push_back({(*s.space)[scheme].scheme.tp, (*s.space)[scheme].scheme.pp, count});
  }
  HydraulisPolicy policy(options);
  PlanningContext context;
  context.cost = s.cost.get();
  std::size_t next = 0;
  for (auto _ : state) {
    context.seed = next;
    auto plans = policy.plan(context, std::span(&s.batches[next], 1));
    benchmark::DoNotOptimize(plans);
    next = (next + 1) % s.batches.size();
  }
  state.counters["candidates"] = static_cast<double>(proposal.strategies.size());
  state.counters["held"] = policy.choices().empty() ? 0 : policy.choices().back().candidates;
  state.SetLabel(std::to_string(options.finalists) + " finalists of the candidates holding the batch");
}
BENCHMARK(BM_HydraulisSelection)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

void BM_HydraulisProposal(benchmark::State& state) {
  const Setting& s = setting(static_cast<int>(state.range(0)));
  Proposal proposal;
  for (auto _ : state) {
    proposal = propose_strategies(s.window, 10, *s.space, {});
    benchmark::DoNotOptimize(proposal);
  }
  state.counters["schemes"] = static_cast<double>(proposal.schemes.size());
  state.counters["lengths_L"] = static_cast<double>(proposal.relaxed.size());
  state.counters["candidates"] = static_cast<double>(proposal.strategies.size());
  state.SetLabel("n, d step 0.1; l step 128; " + std::to_string(s.window.size()) + " sequences");
}
BENCHMARK(BM_HydraulisProposal)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace lcsim::hydraulis
