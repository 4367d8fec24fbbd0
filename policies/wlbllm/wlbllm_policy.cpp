#include "policies/wlbllm/wlbllm_policy.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "base/errors.hpp"
#include "policies/baselines/four_d.hpp"
#include "policies/wlbllm/packing.hpp"
#include "policies/wlbllm/wlbllm_view.hpp"

namespace lcsim::wlbllm {
namespace {

struct Packed {
  std::vector<Sequence> docs;
  double workload = 0;
  CpSplit split = CpSplit::PerDocument;
};

std::vector<Tokens> lengths(const std::vector<Sequence>& docs) {
  std::vector<Tokens> out;
  out.reserve(docs.size());
  for (const auto& d : docs) out.push_back(d.tokens);
  return out;
}

CpSplit split_for(const WlbView& view, CpSharding mode, const std::vector<Sequence>& docs, bool head_tail) {
  // Ulysses shards heads and a plain ring contiguous tokens: neither deals head-tail chunks of a pack.
  if (!head_tail) return CpSplit::PerDocument;
  switch (mode) {
    case CpSharding::PerDocument:
      return CpSplit::PerDocument;
    case CpSharding::PerSequence:
      return CpSplit::PerSequence;
    case CpSharding::Adaptive:
      break;
  }
  return view.choose_split(lengths(docs));
}

/// One iteration: micro-batches by estimated time, heaviest first, each to the least loaded DP replica with room.
IterationPlan make_plan(int index, std::vector<Packed> packed, const ParallelScheme& scheme, int dp,
                        std::string label) {
  std::stable_sort(packed.begin(), packed.end(),
                   [](const Packed& a, const Packed& b) { return a.workload > b.workload; });
  IterationPlan plan;
  plan.index = index;
  plan.replicas = make_homogeneous_replicas(scheme, dp);
  const std::size_t room = (packed.size() + static_cast<std::size_t>(dp) - 1) / static_cast<std::size_t>(dp);
  std::vector<double> load(static_cast<std::size_t>(dp), 0.0);
  int per_sequence = 0;
  for (Packed& p : packed) {
    std::size_t to = load.size();
    for (std::size_t r = 0; r < load.size(); ++r)
      if (plan.replicas[r].micro_batches.size() < room && (to == load.size() || load[r] < load[to])) to = r;
    MicroBatch mb;
    mb.cp_split = p.split;
    per_sequence += p.split == CpSplit::PerSequence ? 1 : 0;
    for (const auto& d : p.docs) mb.placements.push_back(Placement{d.id, d.tokens, Placement::kSharded});
    plan.replicas[to].micro_batches.push_back(std::move(mb));
    load[to] += p.workload;
  }
  plan.label =
      std::move(label) + ", per-sequence CP " + std::to_string(per_sequence) + "/" + std::to_string(packed.size());
  return plan;
}

/// Alg. 1's N. The paper's global batch is PP x DP windows, which PP x DP micro-batches below S_max hold. A global
/// batch of more tokens runs more micro-batches per iteration (gradient accumulation): the smallest multiple of
/// PP x DP that holds the largest batch below S_max; with PP x DP alone, what does not fit would be carried from
/// iteration to iteration without end.
int micro_batches_per_iteration(std::span<const GlobalBatch> batches, int pp_dp, Tokens s_max) {
  Tokens largest = 0;
  for (const auto& batch : batches) {
    Tokens tokens = 0;
    for (const auto& d : batch) tokens += d.tokens;
    largest = std::max(largest, tokens);
  }
  const Tokens per_round = static_cast<Tokens>(pp_dp) * (s_max - 1);
  return pp_dp * static_cast<int>(std::max<Tokens>(1, (largest + per_round - 1) / per_round));
}

std::vector<Tokens> default_queues(Tokens context) {
  return {std::max<Tokens>(1, context / 4), std::max<Tokens>(2, context / 2)};
}

}  // namespace

std::vector<IterationPlan> WlbLlmPolicy::plan(const PlanningContext& context, std::span<const GlobalBatch> batches) {
  const ParallelScheme scheme = layout_scheme(context);
  const Tokens window = context.training.context_length;
  if (window <= 0) throw InputError(options_.where + ": needs training.context_length_tokens");
  const int dp = context.layout.dp;
  const WlbView view(*context.cost, scheme, window);
  const bool head_tail = head_tail_chunks(context.cost->options().cp_attention);
  const auto workload = [&view](Tokens d) { return view.workload(d); };
  const auto pack_up = [&](const std::vector<std::vector<Sequence>>& mbs) {
    std::vector<Packed> packed;
    for (const auto& docs : mbs) {
      double w = 0;
      for (const auto& d : docs) w += view.workload(d.tokens);
      packed.push_back({docs, w, split_for(view, options_.cp_sharding, docs, head_tail)});
    }
    return packed;
  };
  std::vector<IterationPlan> plans;
  if (!options_.variable_length) {  // the loader's packs, WLB-LLM's CP sharding only
    for (std::size_t b = 0; b < batches.size(); ++b) {
      for (const auto& d : batches[b])
        if (d.tokens > window)
          throw InputError(options_.where + ": document " + std::to_string(d.id) + " has " + std::to_string(d.tokens) +
                           " tokens, more than the context window; set dataset.truncate_to_context");
      plans.push_back(make_plan(static_cast<int>(plans.size()), pack_up(baselines::pack_in_order(batches[b], window)),
                                scheme, dp, "batch " + std::to_string(b) + ": original packing"));
    }
    return plans;
  }
  const Tokens s_max = options_.s_max.value_or(std::max(view.memory_s_max(), window + 1));
  const int n = micro_batches_per_iteration(batches, scheme.pp * dp, s_max);
  const std::vector<Tokens> thresholds = options_.queues.value_or(default_queues(window));
  const auto release = static_cast<std::size_t>(options_.release.value_or(n));
  VariableLengthPacker packer(n, s_max, workload, OutlierQueues(thresholds, release));
  const auto emit = [&](const std::vector<std::vector<Sequence>>& mbs, const std::string& what) {
    if (mbs.empty()) return;
    std::string queued;
    for (std::size_t q = 0; q < packer.queues().queue_count(); ++q)
      queued += (q ? "," : "") + std::to_string(packer.queues().size(q));
    plans.push_back(make_plan(static_cast<int>(plans.size()), pack_up(mbs), scheme, dp,
                              what + ": queued [" + queued + "], carried " + std::to_string(packer.carried())));
  };
  for (std::size_t b = 0; b < batches.size(); ++b) {
    for (const auto& d : batches[b])
      if (d.tokens >= s_max)
        throw InputError(options_.where + ".s_max_tokens: document " + std::to_string(d.id) + " has " +
                         std::to_string(d.tokens) + " tokens, not below S_max " + std::to_string(s_max));
    emit(packer.next(batches[b]), "batch " + std::to_string(b));
  }
  while (!packer.drained()) emit(packer.flush(), "flush");
  return plans;
}

std::vector<TuneKnobSpec> WlbLlmPolicy::tune_knobs(const TuneKnobContext& context) const {
  const Tokens c = context.context_length;
  // Table 2's queue counts (1, 2, 3) at window fractions, and no delay.
  return {{"options.queues",
           {nullptr, nlohmann::json::array(), nlohmann::json::array({c / 2}),
            nlohmann::json::array({c / 8, c / 4, c / 2})}}};
}

std::unique_ptr<Policy> make_wlbllm_policy(const PolicySpec& spec) {
  auto reader = policy_options(spec);
  WlbOptions o;
  o.where = spec.file + ": " + reader.path();
  if (reader.has("queues")) {
    const nlohmann::json& q = reader.value("queues");
    if (!q.is_array()) reader.fail("queues", "must be an array of token thresholds");
    std::vector<Tokens> thresholds;
    for (const auto& v : q) {
      if (!v.is_number_integer() || v.get<std::int64_t>() < 1)
        reader.fail("queues", "thresholds must be positive integers (tokens)");
      if (!thresholds.empty() && v.get<Tokens>() <= thresholds.back())
        reader.fail("queues", "thresholds must be strictly increasing");
      thresholds.push_back(v.get<Tokens>());
    }
    o.queues = std::move(thresholds);
  }
  if (reader.has("release")) o.release = static_cast<int>(reader.integer_in("release", 1, 1 << 20));
  if (reader.has("s_max_tokens")) o.s_max = reader.integer_in("s_max_tokens", 2, std::int64_t{1} << 40);
  if (reader.has("cp_sharding")) {
    const auto name = reader.required<std::string>("cp_sharding");
    if (name == "adaptive")
      o.cp_sharding = CpSharding::Adaptive;
    else if (name == "per_document")
      o.cp_sharding = CpSharding::PerDocument;
    else if (name == "per_sequence")
      o.cp_sharding = CpSharding::PerSequence;
    else
      reader.fail("cp_sharding", "unknown '" + name + "' (known: adaptive, per_document, per_sequence)");
  }
  if (reader.has("packing")) {
    const auto name = reader.required<std::string>("packing");
    if (name != "variable_length" && name != "original")
      reader.fail("packing", "unknown '" + name + "' (known: variable_length, original)");
    o.variable_length = name == "variable_length";
  }
  reader.finish();
  return std::make_unique<WlbLlmPolicy>(std::move(o));
}

}  // namespace lcsim::wlbllm
