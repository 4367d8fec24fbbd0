#include "policies/wlbllm/wlbllm_view.hpp"

#include <algorithm>
#include <cmath>

#include "model/plan_demand.hpp"
#include "policies/core/cost_view_support.hpp"

namespace lcsim::wlbllm {
namespace {

constexpr int kSamples = 12;

}  // namespace

WlbView::WlbView(const CostModel& cost, const ParallelScheme& scheme, Tokens context_length)
    : cost_(&cost),
      scheme_(scheme),
      last_stage_(stage_span(cost.model(), scheme.pp, scheme.pp - 1)),
      tp_link_(views::group_link(cost, scheme.tp)),
      cp_link_(views::group_link(cost, scheme.tp * scheme.cp)) {
  const Tokens longest = std::max<Tokens>(context_length, 4 * views::kShortestSampled);
  std::vector<double> xs, ys;
  for (Tokens d : views::sampled_lengths(views::kShortestSampled, longest, kSamples)) {
    xs.push_back(static_cast<double>(d));
    ys.push_back(micro_batch_seconds(std::span(&d, 1), CpSplit::PerDocument));
  }
  fit_ = fit_quadratic(xs, ys);
}

double WlbView::workload(Tokens d) const {
  const double x = static_cast<double>(d);
  return std::max(0.0, (fit_.a * x + fit_.b) * x);
}

double WlbView::rank_seconds(std::span<const SequenceShare> shares, Tokens tokens_on_gpu) const {
  double seconds = cost_->compute_seconds(shares, scheme_, last_stage_, true) +
                   cost_->tp_comm_seconds(tokens_on_gpu, scheme_.tp, last_stage_, tp_link_);
  if (scheme_.cp > 1) seconds += cost_->cp_comm_seconds(shares, tokens_on_gpu, scheme_, last_stage_, cp_link_);
  return seconds;
}

double WlbView::micro_batch_seconds(std::span<const Tokens> documents, CpSplit split) const {
  Tokens total = 0;
  for (Tokens d : documents) total += d;
  const Tokens per_gpu = views::ceil_div(total, scheme_.cp);
  if (split == CpSplit::PerSequence && scheme_.cp > 1) {
    double busiest = 0;
    for (const auto& shares : head_tail_chunks(documents, scheme_.cp)) {
      Tokens tokens = 0;
      for (const auto& s : shares) tokens += s.chunk_tokens;
      busiest = std::max(busiest, rank_seconds(shares, tokens));
    }
    return busiest;
  }
  std::vector<SequenceShare> shares;
  for (Tokens d : documents) shares.push_back({d, scheme_.cp});
  return rank_seconds(shares, per_gpu);
}

CpSplit WlbView::choose_split(std::span<const Tokens> documents) const {
  if (scheme_.cp == 1 || !head_tail_chunks(cost_->options().cp_attention)) return CpSplit::PerDocument;
  return micro_batch_seconds(documents, CpSplit::PerSequence) <= micro_batch_seconds(documents, CpSplit::PerDocument)
             ? CpSplit::PerSequence
             : CpSplit::PerDocument;
}

Tokens WlbView::memory_s_max() const {
  const int shards = shard_degree(*cost_, scheme_);
  const double capacity = cost_->capacity_bytes();
  double bound = std::numeric_limits<double>::infinity();
  for (int stage : {0, scheme_.pp - 1}) {
    const bool last = stage == scheme_.pp - 1;
    const double free = capacity - cost_->static_bytes(scheme_, shards, stage);
    const LayerSpan layers = stage_span(cost_->model(), scheme_.pp, stage);
    // A GPU keeps its ceil(S / cp) tokens' activations and, under Ulysses, its heads of all S tokens: the bound is
    // cp x the most tokens per GPU, so that rounding never takes a micro-batch below S_max over the memory.
    constexpr Tokens kProbe = 1 << 20;
    const SequenceShare probe{kProbe, scheme_.cp};
    const double attention_per_token =
        scheme_.cp > 1 ? cost_->sharded_attention_bytes(std::span(&probe, 1), scheme_, layers) / kProbe : 0.0;
    const double per_gpu_token =
        cost_->activation_bytes_per_token(scheme_, layers, last) + attention_per_token * scheme_.cp;
    // All-gather CP's gathered K,V (and dK,dV): one micro-batch's, one layer at a time, on top of those in flight.
    const double buffer_per_gpu_token = cost_->cp_buffer_bytes(kProbe, scheme_, layers) / kProbe;
    const int in_flight = scheme_.pp - stage;
    const double per_token = in_flight * per_gpu_token + buffer_per_gpu_token;
    if (per_token > 0) bound = std::min(bound, scheme_.cp * std::floor(free / per_token));
  }
  return std::isfinite(bound) ? static_cast<Tokens>(std::max(0.0, std::floor(bound))) : Tokens{1} << 40;
}

}  // namespace lcsim::wlbllm
