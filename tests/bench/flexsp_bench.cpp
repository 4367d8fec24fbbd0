// FlexSP planner speed in the setting of the paper's Sec. 6 (GPT-7B shape, Wikipedia lengths measured on FlexSP's
// released sample, 192K context, A100 40GB nodes of 8): 64 GPUs with its global batch of 512 sequences, and 1024
// GPUs with 16 times the batch (8,192 sequences).
//   build/tests/lcsim_bench --benchmark_filter=BM_FlexSp
// Paper: the bucketed MILP takes 5-15 s per batch with SCIP (Sec. 4.3), every micro-batch count and micro-batch in
// parallel processes, overlapped with training; lcsim's heuristic runs on one core.
//   BM_FlexSpPlanBatch     one global batch: the blaster's micro-batch counts, each micro-batch grouped
//   BM_FlexSpBatchAdaPlan  the same for FlexSP-BatchAda (every degree tried)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "model/profile.hpp"
#include "policies/core/policy.hpp"

namespace lcsim {
namespace {

struct Setting {
  std::unique_ptr<CostModel> cost;
  std::vector<GlobalBatch> batches;
};

Setting make_setting(int gpus) {
  ModelConfig gpt7b;
  gpt7b.name = "GPT-7B";
  gpt7b.hidden = 4096;
  gpt7b.layers = 32;
  gpt7b.heads = gpt7b.kv_heads = 64;
  gpt7b.head_dim = 64;
  gpt7b.ffn = 10923;
  gpt7b.vocab = 50257;
  ClusterSpec cluster;
  cluster.gpu = named_gpu("A100-40GB");
  cluster.nodes = gpus / 8;
  cluster.gpus_per_node = 8;
  cluster.nvlink_GBps = 300;
  cluster.ib_GBps = 6.25;
  Setting s;
  s.cost = std::make_unique<CostModel>(
      gpt7b, cluster, load_profile(std::string(LCSIM_SOURCE_DIR) + "/calibrate/profiles/a100-40gb-default.json"),
      CostModelOptions{.zero_stage = 3});
  TrainingConfig training;
  training.global_batch_sequences = 512 * (gpus / 64);
  training.context_length = 192 * kKiloTokens;
  const auto& d = named_distribution("wikipedia-galvatron");
  const Dataset data = sample_dataset("wikipedia-galvatron", {MixComponent{&d, 1.0}},
                                      static_cast<std::size_t>(training.global_batch_sequences) * 4, 1);
  std::vector<Sequence> sequences = data.sequences();
  for (auto& seq : sequences) seq.tokens = std::min(seq.tokens, training.context_length);  // as the scenario does
  s.batches = cut_global_batches(sequences, training, false);
  s.batches.resize(4);
  return s;
}

const Setting& setting(int gpus) {
  static const Setting s64 = make_setting(64);
  static const Setting s1024 = make_setting(1024);
  return gpus == 64 ? s64 : s1024;
}

void plan_batches(benchmark::State& state, const char* kind) {
  const Setting& s = setting(static_cast<int>(state.range(0)));
  PolicySpec spec;
  spec.kind = kind;
  spec.file = "bench";
  spec.path = "policies[0]";
  auto policy = make_policy(spec);
  PlanningContext context;
  context.cost = s.cost.get();
  context.training.recompute = Recompute::Selective;
  std::size_t next = 0;
  std::string label;
  for (auto _ : state) {
    auto plans = policy->plan(context, std::span(&s.batches[next], 1));
    label = plans.front().label;
    benchmark::DoNotOptimize(plans);
    next = (next + 1) % s.batches.size();
  }
  state.counters["sequences"] = static_cast<double>(s.batches[0].size());
  // Every batch's choices (groups and the sequences each runs) folded into one number: a change of speed that
  // changes a choice shows here.
  std::uint64_t h = 0xCBF29CE484222325ULL;
  const auto fold = [&](std::uint64_t v) { h = (h ^ v) * 0x100000001B3ULL; };
  for (const auto& batch : s.batches)
    for (const auto& plan : policy->plan(context, std::span(&batch, 1)))
      for (const auto& replica : plan.replicas) {
        fold(static_cast<std::uint64_t>(replica.phase));
        fold(replica.gpus.size());
        for (const auto& mb : replica.micro_batches)
          for (const auto& p : mb.placements) fold(static_cast<std::uint64_t>(p.sequence_id));
      }
  state.counters["choices"] = static_cast<double>(h % 1000000007ULL);
  state.SetLabel(label.substr(0, 60));
}

void BM_FlexSpPlanBatch(benchmark::State& state) {
  plan_batches(state, "flexsp");
}
BENCHMARK(BM_FlexSpPlanBatch)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

void BM_FlexSpBatchAdaPlan(benchmark::State& state) {
  plan_batches(state, "flexsp-batchada");
}
BENCHMARK(BM_FlexSpBatchAdaPlan)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace lcsim
