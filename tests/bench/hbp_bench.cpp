// HBP's offline steps (paper Appendix G: auto-selection ~3-15 min of profiling, balance packing of 1M samples
// within 5 s): balance packing of 1,000,000 Tulu3 + LongCite-like samples (Algorithm 2: GroupData, ISF, GreedyFill,
// attention sort, batching, shuffle) and auto-selection (Algorithm 1) from the cost model, on one core.
//   build/tests/lcsim_bench --benchmark_filter=BM_Hbp
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>

#include "model/profile.hpp"
#include "policies/hbp/auto_select.hpp"
#include "policies/hbp/balance_packing.hpp"
#include "policies/hbp/hbp_policy.hpp"

namespace lcsim::hbp {
namespace {

constexpr Tokens K = kKiloTokens;
constexpr int kWorld = 32;

CostModel bench_cost(const std::string& model, int zero_stage) {
  ClusterSpec cluster;
  cluster.gpu = named_gpu("H100-SXM");
  cluster.nodes = 4;
  cluster.gpus_per_node = 8;
  cluster.nvlink_GBps = 450;
  cluster.ib_GBps = 50;
  CostModelOptions options;
  options.zero_stage = zero_stage;
  return CostModel(named_model(model), cluster,
                   load_profile(std::string(LCSIM_SOURCE_DIR) + "/calibrate/profiles/h100-sxm-default.json"), options);
}

/// 1,000,000 samples mixed 939:2 (HBP's Tulu3 + LongCite counts), as in scenarios/hbp/.
const std::vector<Sequence>& million_samples() {
  static const std::vector<Sequence> data = sample_dataset("tulu3+longcite",
                                                           {MixComponent{&named_distribution("tulu3"), 939},
                                                            MixComponent{&named_distribution("longcite"), 2}},
                                                           1'000'000, 42)
                                                .sequences();
  return data;
}

/// Algorithm 2 end to end for the given groups: packs per batch as the policy computes them at 512K tokens.
void BM_HbpBalancePacking(benchmark::State& state, std::vector<Tokens> lengths, std::vector<int> sp) {
  const auto& data = million_samples();
  std::vector<std::size_t> packs_per_batch;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    const Tokens replicas = kWorld / sp[i];
    packs_per_batch.push_back(
        static_cast<std::size_t>(std::max<Tokens>(1, 512 * K / (lengths[i] * replicas)) * replicas));
  }
  std::size_t batches = 0;
  std::size_t packs = 0;
  for (auto _ : state) {
    Rng rng(7);
    auto groups = balance_pack(data, lengths, rng);
    packs = 0;
    for (const auto& g : groups) packs += g.size();
    auto ordered = make_batches(std::move(groups), packs_per_batch, rng);
    apply_curriculum(ordered, 500, lengths.size() - 1);
    batches = ordered.size();
    benchmark::DoNotOptimize(ordered);
  }
  state.counters["samples"] = static_cast<double>(data.size());
  state.counters["packs"] = static_cast<double>(packs);
  state.counters["batches"] = static_cast<double>(batches);
  std::string label;
  for (Tokens l : lengths) label += (label.empty() ? "" : ",") + std::to_string(l / K) + "K";
  state.SetLabel("groups " + label + ", 1M samples, ISF 10 rounds");
}
// LLaMA3.1-8B's auto-selected groups on the default H100 profile, and four groups (more GreedyFill sources).
BENCHMARK_CAPTURE(BM_HbpBalancePacking, two_groups, std::vector<Tokens>{8 * K, 128 * K}, std::vector<int>{1, 16})
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);
BENCHMARK_CAPTURE(BM_HbpBalancePacking, four_groups, std::vector<Tokens>{8 * K, 16 * K, 64 * K, 128 * K},
                  std::vector<int>{1, 1, 4, 8})
    ->Unit(benchmark::kMillisecond)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);

/// Algorithm 1 over the paper's candidate lengths (8K..128K) and every power-of-two SP degree up to 32.
void BM_HbpAutoSelect(benchmark::State& state, const std::string& model, int zero_stage) {
  const CostModel cost = bench_cost(model, zero_stage);
  const std::vector<Tokens> candidates = default_packing_lengths(128 * K);
  const std::vector<int> degrees = default_sp_degrees(kWorld);
  std::size_t groups = 0;
  for (auto _ : state) {
    const AutoSelector selector(cost, kWorld);
    const Selection selection = selector.select(candidates, degrees);
    groups = selection.groups.size();
    benchmark::DoNotOptimize(selection);
  }
  state.counters["groups"] = static_cast<double>(groups);
  state.SetLabel(model + ", 32 H100, 5 lengths x 6 SP degrees");
}
BENCHMARK_CAPTURE(BM_HbpAutoSelect, llama8b, std::string("LLaMA3.1-8B"), 2)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_HbpAutoSelect, llama70b, std::string("LLaMA3.1-70B"), 3)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace lcsim::hbp
