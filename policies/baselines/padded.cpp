#include "policies/baselines/padded.hpp"

#include <algorithm>

#include "base/random.hpp"
#include "policies/baselines/deepspeed.hpp"

namespace lcsim::baselines {
namespace {

constexpr std::uint64_t kPaddedSalt = 0x50'41'44'44'45'44ULL;  // "PADDED": this policy's own random stream

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
  const std::size_t per_iteration = static_cast<std::size_t>(context.layout.dp) *
                                    static_cast<std::size_t>(options_.micro_batches_per_rank) * n;
  std::vector<IterationPlan> plans;
  for (std::size_t first = 0; first < window.size(); first += per_iteration) {
    const std::size_t last = std::min(window.size(), first + per_iteration);
    IterationPlan plan;
    plan.index = static_cast<int>(plans.size());
    plan.label = std::string(options_.shuffle ? "random" : "padded") + " sequences " + std::to_string(first) + "-" +
                 std::to_string(last - 1);
    plan.replicas = make_homogeneous_replicas(scheme, context.layout.dp);
    const auto dealt = deal_round_robin(std::span(window).subspan(first, last - first), context.layout.dp);
    for (std::size_t r = 0; r < dealt.size(); ++r)
      for (std::size_t begin = 0; begin < dealt[r].size(); begin += n) {
        const std::size_t count = std::min(n, dealt[r].size() - begin);
        plan.replicas[r].micro_batches.push_back(sharded_micro_batch(std::span(dealt[r]).subspan(begin, count), true));
      }
    plans.push_back(std::move(plan));
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
