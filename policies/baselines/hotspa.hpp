#pragma once
// `hotspa`: HotSPa as Hydraulis's baseline (Sec. 8, Table 3, App. F): a few homogeneous strategies, each for a
// bucket of sequence lengths, run one after another inside every iteration -- phase i of the plan is the i-th
// strategy that has sequences -- and every switch between them pays the profile's hot_switch_us_per_mparam x the
// new scheme's parameters per GPU (the estimate prices it before every phase after the first); gradients accumulate
// over the phases, with one sync and optimizer step after the last. Odd iterations run
// the strategies in reverse order, so an iteration starts with the strategy the previous one ended with and no
// switch falls between iterations. Each strategy uses all the layout's GPUs (dp = GPUs / (tp pp sp)); a sequence
// goes to the strategy with the smallest max_tokens that holds it; inside a strategy its sequences are packed to
// its max_tokens and dealt evenly, as megatron.hpp does.
// Options:
//   strategies  [{"tp": 4, "pp": 2, "sp": 1, "max_tokens": 32768}, ...]: tp, pp, sp default 1, max_tokens
//               required, distinct; run in this order. Default, three strategies from the layout (App. F's buckets
//               16K-32K, 4K-16K, < 4K at a 32K context): the layout's scheme for (context/2, context], its
//               model-parallel width halved for (context/8, context/2], halved again for <= context/8 (halving SP
//               first, then TP, then PP when the half divides the layers; a strategy equal to the one before
//               merges into it).
//   algorithm, recompute   as megatron ("ffd" default)
// A sequence longer than every max_tokens is an InputError.
#include <memory>
#include <vector>

#include "policies/baselines/megatron.hpp"

namespace lcsim::baselines {

struct HotSpaStrategy {
  ParallelScheme scheme;  ///< tp, pp, cp = sp
  Tokens max_tokens = 0;
};

struct HotSpaOptions {
  std::vector<HotSpaStrategy> strategies;  ///< empty: the default from the layout
  StaticPackingOptions packing;
};

class HotSpaPolicy : public Policy {
 public:
  explicit HotSpaPolicy(HotSpaOptions options) : options_(std::move(options)) {}
  std::string kind() const override { return "hotspa"; }
  std::vector<IterationPlan> plan(const PlanningContext& context, std::span<const GlobalBatch> batches) override;

 private:
  HotSpaOptions options_;
};

/// The default strategies for a layout scheme, `layers` model layers and a context length (see above).
std::vector<HotSpaStrategy> default_hotspa_strategies(const ParallelScheme& layout, int layers, Tokens context);

std::unique_ptr<Policy> make_hotspa_policy(const PolicySpec& spec);

}  // namespace lcsim::baselines
