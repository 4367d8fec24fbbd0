#include "policies/baselines/sorted.hpp"

#include <algorithm>
#include <numeric>

#include "policies/baselines/deepspeed.hpp"
#include "base/random.hpp"

namespace lcsim::baselines {
namespace {

constexpr std::uint64_t kSortedSalt = 0x50'52'54'45'44ULL;  // "SORTED": this policy's own random stream

/// Consecutive sequences of one DP rank (ascending length) while the micro-batch stays within `budget` tokens.
std::vector<MicroBatch> cut_micro_batches(const std::vector<Sequence>& sequences, Tokens budget, bool padded) {
  std::vector<MicroBatch> micro_batches;
  std::size_t begin = 0;
  while (begin < sequences.size()) {
    std::size_t end = begin + 1;
    Tokens sum = sequences[begin].tokens;
    Tokens longest = sequences[begin].tokens;
    while (end < sequences.size()) {
      const Tokens next_longest = std::max(longest, sequences[end].tokens);
      const Tokens next_sum = sum + sequences[end].tokens;
      const Tokens cost = padded ? next_longest * static_cast<Tokens>(end - begin + 1) : next_sum;
      if (cost > budget) break;
      sum = next_sum;
      longest = next_longest;
      ++end;
    }
    micro_batches.push_back(sharded_micro_batch(std::span(sequences).subspan(begin, end - begin), padded));
    begin = end;
  }
  return micro_batches;
}

}  // namespace

std::vector<IterationPlan> SortedPolicy::plan(const PlanningContext& context, std::span<const GlobalBatch> batches) {
  const ParallelScheme scheme = layout_scheme(context);
  std::vector<Sequence> window;
  for (const auto& batch : batches) window.insert(window.end(), batch.begin(), batch.end());
  std::stable_sort(window.begin(), window.end(), [](const Sequence& a, const Sequence& b) {
    return a.tokens != b.tokens ? a.tokens < b.tokens : a.id < b.id;
  });

  Tokens budget = micro_batch_tokens_.value_or(context.training.context_length);
  if (budget <= 0)
    for (const auto& s : window) budget = std::max(budget, s.tokens);
  if (one_sequence_per_micro_batch_) budget = 0;  // every sequence is over it: each forms a micro-batch alone

  std::vector<std::size_t> order(batches.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  Rng rng = Rng(context.seed).split(kSortedSalt);
  rng.shuffle(order);

  // Group g holds the sorted window's sequences [start[g], start[g] + batches[g].size()).
  std::vector<std::size_t> start(batches.size(), 0);
  for (std::size_t g = 1; g < batches.size(); ++g) start[g] = start[g - 1] + batches[g - 1].size();

  std::vector<IterationPlan> plans;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::size_t g = order[k];
    const auto group = std::span(window).subspan(start[g], batches[g].size());
    IterationPlan plan;
    plan.index = static_cast<int>(k);
    plan.label = "sorted group " + std::to_string(g);
    plan.replicas = make_homogeneous_replicas(scheme, context.layout.dp);
    const auto dealt = deal_round_robin(group, context.layout.dp);
    for (std::size_t r = 0; r < dealt.size(); ++r)
      plan.replicas[r].micro_batches = cut_micro_batches(dealt[r], budget, padded_);
    plans.push_back(std::move(plan));
  }
  return plans;
}

std::unique_ptr<Policy> make_sorted_policy(const PolicySpec& spec) {
  auto options = policy_options(spec);
  std::optional<Tokens> micro_batch_tokens;
  if (options.has("micro_batch_tokens"))
    micro_batch_tokens = options.integer_in("micro_batch_tokens", 1, std::int64_t{1} << 40);
  const bool padded = options.optional<bool>("padded", true);
  const auto micro_batch = options.optional<std::string>("micro_batch", "budget");
  if (micro_batch != "budget" && micro_batch != "sequence")
    options.fail("micro_batch", "expected \"budget\" or \"sequence\", got \"" + micro_batch + "\"");
  if (micro_batch == "sequence" && micro_batch_tokens)
    options.fail("micro_batch_tokens", "one sequence per micro-batch (micro_batch \"sequence\") takes no token budget");
  options.finish();
  return std::make_unique<SortedPolicy>(micro_batch_tokens, padded, micro_batch == "sequence");
}

}  // namespace lcsim::baselines
