// WLB-LLM's planning time per global batch (the paper's Table 2: 8, 20, 23 ms a batch with 1, 2, 3 queues on
// 7B-128K, 64 GPUs): the whole wlb-llm plan() for one batch of wlbllm-fig3 documents (the cost view's fit, Algorithm
// 1 with two queues, the adaptive CP split of every micro-batch, the deal), LLaMA2-7B at 128K, (TP, CP, PP) =
// (8, 2, 4), DP 1 (64 GPUs, N = 4) or 16 (1024 GPUs, N = 64), ring attention.
//   build/tests/lcsim_bench --benchmark_filter=BM_WlbLlm
#include <benchmark/benchmark.h>

#include <string>

#include "model/profile.hpp"
#include "model/training.hpp"
#include "policies/wlbllm/wlbllm_policy.hpp"

namespace lcsim::wlbllm {
namespace {

constexpr Tokens kWindow = 128 * kKiloTokens;

void BM_WlbLlmPlan(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  const int dp = gpus / 64;
  ClusterSpec cluster;
  cluster.gpu = named_gpu("H100-SXM");
  cluster.nodes = gpus / 8;
  cluster.gpus_per_node = 8;
  cluster.nvlink_GBps = 450;
  cluster.ib_GBps = 50;
  const CostModel cost(named_model("LLaMA2-7B"), cluster,
                       load_profile(std::string(LCSIM_SOURCE_DIR) + "/calibrate/profiles/h100-sxm-default.json"),
                       CostModelOptions{.zero_stage = 3, .cp_attention = CpAttention::Ring});
  PlanningContext context;
  context.cost = &cost;
  context.layout = ParallelLayout{.dp = dp, .cp = 2, .tp = 8, .pp = 4};
  context.training.context_length = kWindow;
  context.training.tokens_per_iteration = 4 * dp * kWindow;
  std::vector<Sequence> docs = sample_dataset("wlbllm-fig3", {MixComponent{&named_distribution("wlbllm-fig3"), 1}},
                                              static_cast<std::size_t>(800 * dp), 35)
                                   .sequences();
  const std::vector<GlobalBatch> batches{cut_global_batches(docs, context.training, false).front()};
  auto policy = make_wlbllm_policy(PolicySpec{"wlb-llm", "wlb-llm", nlohmann::json::object(), "bench", "policies[0]"});
  std::size_t micro_batches = 0;
  for (auto _ : state) {
    const auto plans = policy->plan(context, batches);
    micro_batches = 0;
    for (const auto& r : plans.front().replicas) micro_batches += r.micro_batches.size();
    benchmark::DoNotOptimize(plans.data());
  }
  state.counters["documents"] = static_cast<double>(batches.front().size());
  state.counters["micro_batches"] = static_cast<double>(micro_batches);
}
BENCHMARK(BM_WlbLlmPlan)->Arg(64)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace lcsim::wlbllm
