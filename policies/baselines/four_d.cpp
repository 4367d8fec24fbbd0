#include "policies/baselines/four_d.hpp"

#include <algorithm>
#include <numeric>

#include "base/errors.hpp"

namespace lcsim::baselines {
namespace {

void check_lengths(std::span<const Sequence> documents, Tokens length, const std::string& where) {
  for (const auto& d : documents)
    if (d.tokens > length)
      throw InputError(where + ": document " + std::to_string(d.id) + " has " + std::to_string(d.tokens) +
                       " tokens, more than the context window of " + std::to_string(length) +
                       "; packing does not truncate (set dataset.truncate_to_context)");
}

MicroBatch pack_micro_batch(const std::vector<Sequence>& pack, CpSplit split) {
  MicroBatch mb;
  mb.cp_split = split;
  for (const auto& d : pack) mb.placements.push_back(Placement{d.id, d.tokens, Placement::kSharded});
  return mb;
}

}  // namespace

std::vector<std::vector<Sequence>> pack_in_order(std::span<const Sequence> documents, Tokens length) {
  std::vector<std::vector<Sequence>> packs;
  Tokens used = 0;
  for (const auto& d : documents) {
    if (packs.empty() || used + d.tokens > length) {
      packs.emplace_back();
      used = 0;
    }
    packs.back().push_back(d);
    used += d.tokens;
  }
  return packs;
}

std::vector<std::vector<Sequence>> pack_fixed_length_greedy(std::span<const Sequence> documents, Tokens length,
                                                            int min_packs) {
  Tokens total = 0;
  for (const auto& d : documents) total += d.tokens;
  const auto needed = static_cast<std::size_t>(std::max<Tokens>(min_packs, (total + length - 1) / length));
  std::vector<std::size_t> order(documents.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  // d^2 descending is d descending; stable keeps data order among equal lengths.
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return documents[a].tokens > documents[b].tokens; });
  std::vector<std::vector<Sequence>> packs(needed);
  std::vector<double> squares(needed, 0.0);
  std::vector<Tokens> used(needed, 0);
  for (std::size_t i : order) {
    const Sequence& d = documents[i];
    std::size_t best = packs.size();
    for (std::size_t k = 0; k < packs.size(); ++k)
      if (used[k] + d.tokens <= length && (best == packs.size() || squares[k] < squares[best])) best = k;
    if (best == packs.size()) {  // no room anywhere: one more micro-batch
      packs.emplace_back();
      squares.push_back(0);
      used.push_back(0);
    }
    const auto dd = static_cast<double>(d.tokens);
    packs[best].push_back(d);
    squares[best] += dd * dd;
    used[best] += d.tokens;
  }
  std::erase_if(packs, [](const auto& p) { return p.empty(); });
  // Heaviest first: the order micro-batches are dealt and run in.
  std::stable_sort(packs.begin(), packs.end(), [](const auto& a, const auto& b) {
    const auto sum_sq = [](const std::vector<Sequence>& p) {
      double s = 0;
      for (const auto& d : p) s += static_cast<double>(d.tokens) * static_cast<double>(d.tokens);
      return s;
    };
    return sum_sq(a) > sum_sq(b);
  });
  return packs;
}

std::vector<IterationPlan> FourDPolicy::plan(const PlanningContext& context, std::span<const GlobalBatch> batches) {
  const ParallelScheme scheme = layout_scheme(context);
  const Tokens length = context.training.context_length;
  if (length <= 0) throw InputError(where_ + ": needs training.context_length_tokens (the packed sequence length)");
  const int dp = context.layout.dp;
  // A per-sequence split deals head-tail chunks: Ulysses shards heads and a plain ring contiguous tokens, so
  // neither has one, and the validator refuses it.
  const CpSplit split = head_tail_chunks(context.cost->options().cp_attention) ? split_ : CpSplit::PerDocument;
  std::vector<IterationPlan> plans;
  for (std::size_t b = 0; b < batches.size(); ++b) {
    check_lengths(batches[b], length, where_);
    const auto packs = packing_ == Packing::InOrder ? pack_in_order(batches[b], length)
                                                    : pack_fixed_length_greedy(batches[b], length, scheme.pp * dp);
    IterationPlan plan;
    plan.index = static_cast<int>(b);
    plan.label =
        "batch " + std::to_string(b) + ": " + std::to_string(packs.size()) + " packs, " + std::string(to_string(split));
    plan.replicas = make_homogeneous_replicas(scheme, dp);
    for (std::size_t k = 0; k < packs.size(); ++k)
      plan.replicas[k % plan.replicas.size()].micro_batches.push_back(pack_micro_batch(packs[k], split));
    plans.push_back(std::move(plan));
  }
  return plans;
}

std::unique_ptr<Policy> make_plain_4d_policy(const PolicySpec& spec) {
  auto reader = policy_options(spec);
  reader.finish();
  return std::make_unique<FourDPolicy>("plain-4d", FourDPolicy::Packing::InOrder, CpSplit::PerSequence,
                                       spec.file + ": " + reader.path());
}

std::unique_ptr<Policy> make_fixed_4d_policy(const PolicySpec& spec) {
  auto reader = policy_options(spec);
  CpSplit split = CpSplit::PerSequence;
  if (reader.has("cp_split")) {
    const auto name = reader.required<std::string>("cp_split");
    const auto parsed = cp_split_from_string(name);
    if (!parsed) reader.fail("cp_split", "unknown CP split '" + name + "' (known: per_sequence, per_document)");
    split = *parsed;
  }
  reader.finish();
  return std::make_unique<FourDPolicy>("fixed-4d", FourDPolicy::Packing::FixedGreedy, split,
                                       spec.file + ": " + reader.path());
}

}  // namespace lcsim::baselines
