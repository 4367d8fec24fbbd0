#include "policies/baselines/padded.hpp"

#include <algorithm>

#include "base/random.hpp"
#include "policies/baselines/deepspeed.hpp"

namespace lcsim::baselines {
namespace {

constexpr std::uint64_t kPaddedSalt = 0x50'41'44'44'45'44ULL;  // "PADDED": this policy's own random stream

/// Where each iteration's sequences end in the window: after each global batch's worth, or every `count`.
std::vector<std::size_t> iteration_ends(std::span<const GlobalBatch> batches, std::size_t window, std::size_t count) {
  std::vector<std::size_t> ends;
  if (count == 0) {
    std::size_t end = 0;
    for (const auto& batch : batches) ends.push_back(end += batch.size());
  } else {
    for (std::size_t end = count; end < window + count; end += count) ends.push_back(std::min(end, window));
  }
  return ends;
}

}  // namespace

std::vector<IterationPlan> PaddedPolicy::plan(const PlanningContext& context, std::span<const GlobalBatch> batches) {
  const ParallelScheme scheme = layout_scheme(context);
  std::vector<Sequence> window;
  for (const auto& batch : batches) window.insert(window.end(), batch.begin(), batch.end());
  if (options_.shuffle) {
    Rng rng = Rng(context.seed).split(kPaddedSalt);
    rng.shuffle(window);
  }

  const auto n = static_cast<std::size_t>(options_.sequences_per_micro_batch);
  const std::size_t count =
      options_.micro_batches_per_rank
          ? static_cast<std::size_t>(context.layout.dp) * static_cast<std::size_t>(*options_.micro_batches_per_rank) * n
          : 0;
  std::vector<IterationPlan> plans;
  std::size_t first = 0;
  for (const std::size_t last : iteration_ends(batches, window.size(), count)) {
    IterationPlan plan;
    plan.index = static_cast<int>(plans.size());
    plan.label = std::string(options_.shuffle ? "random" : "padded") + " sequences [" + std::to_string(first) + ", " +
                 std::to_string(last) + ")";
    plan.replicas = make_homogeneous_replicas(scheme, context.layout.dp);
    const auto dealt = deal_round_robin(std::span(window).subspan(first, last - first), context.layout.dp);
    for (std::size_t r = 0; r < dealt.size(); ++r)
      for (std::size_t begin = 0; begin < dealt[r].size(); begin += n) {
        const std::size_t size = std::min(n, dealt[r].size() - begin);
        plan.replicas[r].micro_batches.push_back(sharded_micro_batch(std::span(dealt[r]).subspan(begin, size), true));
      }
    plans.push_back(std::move(plan));
    first = last;
  }
  return plans;
}

std::unique_ptr<Policy> make_padded_policy(const PolicySpec& spec) {
  auto reader = policy_options(spec);
  PaddedOptions options;
  if (reader.has("sequences_per_micro_batch"))
    options.sequences_per_micro_batch = static_cast<int>(reader.integer_in("sequences_per_micro_batch", 1, 1 << 20));
  if (reader.has("micro_batches_per_rank"))
    options.micro_batches_per_rank = static_cast<int>(reader.integer_in("micro_batches_per_rank", 1, 1 << 20));
  options.shuffle = reader.optional<bool>("shuffle", false);
  reader.finish();
  return std::make_unique<PaddedPolicy>(options);
}

}  // namespace lcsim::baselines
