#include "policies/baselines/hotspa.hpp"

#include <algorithm>

#include "policies/baselines/deepspeed.hpp"
#include "base/errors.hpp"
#include "base/random.hpp"

namespace lcsim::baselines {
namespace {

constexpr std::uint64_t kHotSpaSalt = 0x484f'5453'5041ULL;  // "HOTSPA": the packing's random stream

ParallelScheme halved(ParallelScheme s, int layers) {
  if (s.cp > 1) {
    s.cp /= 2;
  } else if (s.tp > 1) {
    s.tp /= 2;
  } else if (s.pp % 2 == 0 && layers % (s.pp / 2) == 0) {
    s.pp /= 2;
    if (s.pp < 2) s.virtual_pp = 1;  // a lone stage has nothing to interleave; halving pp keeps chunks dividing
  }
  return s;
}

std::string describe(const ParallelScheme& s, int gpus) {
  std::string text = "DP" + std::to_string(gpus / s.gpus());
  if (s.tp > 1) text += "TP" + std::to_string(s.tp);
  if (s.pp > 1) text += "PP" + std::to_string(s.pp);
  if (s.virtual_pp > 1) text += "VPP" + std::to_string(s.virtual_pp);
  if (s.cp > 1) text += "SP" + std::to_string(s.cp);
  return text;
}

}  // namespace

std::vector<HotSpaStrategy> default_hotspa_strategies(const ParallelScheme& layout, int layers, Tokens context) {
  std::vector<HotSpaStrategy> out{{layout, context}};
  for (Tokens bound : {context / 2, context / 8}) {
    const ParallelScheme next = halved(out.back().scheme, layers);
    if (next == out.back().scheme || bound < 1) continue;  // the bucket stays with the strategy before
    out.push_back({next, bound});
  }
  return out;
}

std::vector<IterationPlan> HotSpaPolicy::plan(const PlanningContext& context, std::span<const GlobalBatch> batches) {
  const std::string& where = options_.packing.where;
  std::vector<HotSpaStrategy> strategies = options_.strategies;
  if (strategies.empty()) {
    Tokens length = context.training.context_length;
    if (length <= 0)
      for (const auto& batch : batches)
        for (const auto& s : batch) length = std::max(length, s.tokens);
    strategies = default_hotspa_strategies(layout_scheme(context), context.cost->model().layers, length);
  }
  const Recompute recompute = options_.packing.recompute.value_or(context.training.recompute);
  const int gpus = context.layout.gpus();
  for (std::size_t i = 0; i < strategies.size(); ++i) {
    auto& s = strategies[i].scheme;
    s.recompute = recompute;
    if (s.gpus() > gpus || gpus % s.gpus() != 0)
      throw InputError(where + ".strategies[" + std::to_string(i) + "]: tp x pp x sp = " + std::to_string(s.gpus()) +
                       " does not divide the layout's " + std::to_string(gpus) + " GPUs");
  }
  // Buckets: each sequence to the holding strategy of the smallest max_tokens.
  std::vector<std::size_t> by_bound(strategies.size());
  for (std::size_t i = 0; i < by_bound.size(); ++i) by_bound[i] = i;
  std::stable_sort(by_bound.begin(), by_bound.end(),
                   [&](std::size_t x, std::size_t y) { return strategies[x].max_tokens < strategies[y].max_tokens; });

  Rng seeds(context.seed ^ kHotSpaSalt);
  std::vector<IterationPlan> plans;
  for (std::size_t b = 0; b < batches.size(); ++b) {
    std::vector<std::vector<Sequence>> buckets(strategies.size());
    for (const auto& s : batches[b]) {
      auto it = std::find_if(by_bound.begin(), by_bound.end(),
                             [&](std::size_t i) { return strategies[i].max_tokens >= s.tokens; });
      if (it == by_bound.end())
        throw InputError(where + ".strategies: sequence " + std::to_string(s.id) + " has " + std::to_string(s.tokens) +
                         " tokens, more than every strategy's max_tokens");
      buckets[*it].push_back(s);
    }
    IterationPlan plan;
    plan.index = static_cast<int>(b);
    plan.label = "batch " + std::to_string(b) + ":";
    int phase = 0;
    for (std::size_t k = 0; k < strategies.size(); ++k) {
      const std::size_t i = b % 2 == 0 ? k : strategies.size() - 1 - k;
      const std::uint64_t seed = seeds.next();
      if (buckets[i].empty()) continue;
      const auto& st = strategies[i];
      const int replicas = gpus / st.scheme.gpus();
      auto dealt = pack_and_deal(buckets[i], st.max_tokens, options_.packing.algorithm, replicas, seed, where);
      std::vector<Replica> group = make_homogeneous_replicas(st.scheme, replicas);
      for (std::size_t r = 0; r < group.size(); ++r) {
        group[r].micro_batches = std::move(dealt[r]);
        group[r].phase = phase;
        plan.replicas.push_back(std::move(group[r]));
      }
      plan.label += (phase == 0 ? " " : " -> ") + describe(st.scheme, gpus);
      ++phase;
    }
    plans.push_back(std::move(plan));
  }
  return plans;
}

std::unique_ptr<Policy> make_hotspa_policy(const PolicySpec& spec) {
  auto reader = policy_options(spec);
  HotSpaOptions options;
  options.packing = read_static_packing_options(reader, spec);
  if (reader.has("strategies")) {
    const nlohmann::json& list = reader.value("strategies");
    if (!list.is_array() || list.empty()) reader.fail("strategies", "expected a non-empty array of strategies");
    for (std::size_t i = 0; i < list.size(); ++i) {
      JsonObjectReader entry = reader.child(list[i], reader.path("strategies") + "[" + std::to_string(i) + "]");
      auto degree = [&](const char* key) {
        return entry.has(key) ? static_cast<int>(entry.integer_in(key, 1, 1 << 20)) : 1;
      };
      HotSpaStrategy s;
      s.scheme.tp = degree("tp");
      s.scheme.pp = degree("pp");
      s.scheme.cp = degree("sp");
      s.max_tokens = entry.integer_in("max_tokens", 1, std::int64_t{1} << 40);
      entry.finish();
      for (const auto& other : options.strategies)
        if (other.max_tokens == s.max_tokens) entry.fail("max_tokens", "two strategies with the same max_tokens");
      options.strategies.push_back(s);
    }
  }
  reader.finish();
  return std::make_unique<HotSpaPolicy>(std::move(options));
}

}  // namespace lcsim::baselines
