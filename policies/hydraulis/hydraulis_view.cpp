#include "policies/hydraulis/hydraulis_view.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "policies/core/cost_view_support.hpp"
#include "base/errors.hpp"

namespace lcsim::hydraulis {
namespace {

constexpr int kSamples = 32;

/// The layers of a pipeline stage; strategies only use pp dividing the layers (pp_degrees).
LayerSpan stage_layers(const CostModel& cost, int pp, int stage) {
  if (cost.model().layers % pp != 0) throw std::invalid_argument("HydraulisView: pp must divide the layers");
  return stage_span(cost.model(), pp, stage);
}

}  // namespace

HydraulisView::HydraulisView(const CostModel& cost, int total_gpus) : cost_(&cost), total_gpus_(total_gpus) {
  if (total_gpus < 1) throw std::invalid_argument("HydraulisView: total_gpus must be >= 1");
}

double HydraulisView::stage_seconds(const ParallelScheme& scheme, Tokens l) const {
  if (scheme.cp != 1) throw InputError("Hydraulis strategies are <TP, PP>: cp must be 1");
  // The last stage: a frozen part of the model is a prefix, so the last stage trains the most.
  const LayerSpan layers = stage_layers(*cost_, scheme.pp, scheme.pp - 1);
  const LinkClass tp_link = views::group_link(*cost_, scheme.tp);
  const LinkClass pp_link = views::group_link(*cost_, scheme.tp * scheme.pp);
  const SequenceShare share{l, 1};
  // The last stage (its layers plus the LM head) is the slowest; with a pipeline it also receives the
  // activations and sends back their gradient.
  double seconds =
      cost_->compute_seconds({&share, 1}, scheme, layers, true) + cost_->tp_comm_seconds(l, scheme.tp, layers, tp_link);
  if (scheme.pp > 1) seconds += 2 * cost_->pp_transfer_seconds(l, scheme.tp, pp_link);
  return seconds;
}

QuadraticFit HydraulisView::latency(const ParallelScheme& scheme) const {
  // Fit where the scheme is used: from short sequences up to what it can hold (at least 4K, so a scheme that
  // holds little still gets a curve over a meaningful range).
  const Tokens longest = std::max<Tokens>(max_len(scheme), 4 * kKiloTokens);
  std::vector<double> xs, ys;
  for (Tokens l : views::sampled_lengths(views::kShortestSampled, longest, kSamples)) {
    xs.push_back(static_cast<double>(l));
    ys.push_back(stage_seconds(scheme, l));
  }
  return fit_quadratic(xs, ys);
}

Tokens HydraulisView::util_len(const ParallelScheme& scheme, double threshold) const {
  if (!(threshold > 0 && threshold <= 1)) throw std::invalid_argument("HydraulisView::util_len: threshold in (0, 1]");
  const Tokens longest = std::max<Tokens>(max_len(scheme), 4 * kKiloTokens);
  const auto lengths = views::sampled_lengths(views::kShortestSampled, longest, kSamples);
  auto throughput = [&](Tokens l) { return static_cast<double>(l) / stage_seconds(scheme, l); };
  double best = 0;
  for (Tokens l : lengths) best = std::max(best, throughput(l));
  const double target = threshold * best;
  // The first sampled length that reaches the target, then bisection down to the token between it and the
  // sample before (throughput rises with length there: GEMMs fill the GPU, fixed overheads amortise).
  std::size_t first = 0;
  while (throughput(lengths[first]) < target) ++first;
  if (first == 0) return lengths[0];
  Tokens lo = lengths[first - 1];  // below the target
  Tokens hi = lengths[first];      // at or above it
  while (hi - lo > 1) {
    const Tokens mid = lo + (hi - lo) / 2;
    (throughput(mid) >= target ? hi : lo) = mid;
  }
  return hi;
}

Tokens HydraulisView::max_len(const ParallelScheme& scheme) const {
  if (scheme.cp != 1) throw InputError("Hydraulis strategies are <TP, PP>: cp must be 1");
  // Appendix B.1: under 1F1B the first stage holds PP micro-batches of its layers' activations; the last stage
  // holds one plus the logits. The larger of the two bounds the sequence length.
  double per_token =
      scheme.pp * cost_->activation_bytes_per_token(scheme, stage_layers(*cost_, scheme.pp, 0), scheme.pp == 1);
  if (scheme.pp > 1)
    per_token = std::max(
        per_token, cost_->activation_bytes_per_token(scheme, stage_layers(*cost_, scheme.pp, scheme.pp - 1), true));
  // Optimizer states (and master weights) of the trained parameters sharded across every GPU; their 16-bit
  // parameters and gradients held per scheme, on the stage that holds the most; frozen weights (LoRA's base, a
  // frozen prefix) in bf16 alone. That is ZeRO-1 at least, whatever stage the scenario sets for other policies.
  constexpr double kBf16Bytes = 2;
  const auto& memory = cost_->profile().memory;
  const auto zero = static_cast<std::size_t>(std::max(1, cost_->options().zero_stage));
  double held = 0;
  for (int stage = 0; stage < scheme.pp; ++stage) {
    held = std::max(held, cost_->trained_parameters_per_gpu(scheme, stage) * memory.replicated_bytes_per_param[zero] +
                              cost_->frozen_parameters_per_gpu(scheme, stage) * kBf16Bytes);
  }
  const double static_bytes = held + cost_->trained_parameters() * memory.sharded_bytes_per_param[zero] / total_gpus_;
  const double tokens = std::floor((cost_->capacity_bytes() - static_bytes) / per_token);
  return tokens > 0 ? static_cast<Tokens>(tokens) : 0;
}

}  // namespace lcsim::hydraulis
