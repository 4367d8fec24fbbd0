#include "policies/flexsp/flexsp_view.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/errors.hpp"
#include "model/plan_demand.hpp"
#include "policies/core/cost_view_support.hpp"

namespace lcsim::flexsp {
namespace {

constexpr int kSamples = 24;

}  // namespace

ParallelScheme group_scheme(int degree, Recompute recompute) {
  ParallelScheme s;
  s.cp = degree;
  s.recompute = recompute;
  return s;
}

FlexSpView::FlexSpView(const CostModel& cost, Recompute recompute, int max_degree, bool allow_sp1)
    : cost_(&cost), recompute_(recompute), gpus_(cost.cluster().world_size()) {
  const int top = std::min(max_degree, gpus_);
  for (int d = allow_sp1 ? 1 : 2; d <= top; d *= 2) {
    const Tokens cap = capacity(d);
    if (cap < views::kShortestSampled) continue;  // the model states alone (nearly) fill a GPU
    std::vector<double> xs, ys;
    for (Tokens l : views::sampled_lengths(views::kShortestSampled, cap, kSamples)) {
      xs.push_back(static_cast<double>(l));
      ys.push_back(group_seconds(d, std::span(&l, 1)));
    }
    degrees_.push_back({d, fit_quadratic(xs, ys), cap});
  }
  if (degrees_.empty())
    throw PlanningError("flexsp: no SP degree up to " + std::to_string(top) + " leaves room for activations beside " +
                        cost.model().name + "'s model states on " + std::to_string(gpus_) + " GPUs");
}

double FlexSpView::group_seconds(int degree, std::span<const Tokens> lengths) const {
  const ParallelScheme scheme = group_scheme(degree, recompute_);
  std::vector<SequenceShare> shares;
  Tokens total = 0;
  for (Tokens l : lengths) {
    shares.push_back({l, degree});
    total += l;
  }
  const LayerSpan layers{0, cost_->model().layers};
  double seconds = cost_->compute_seconds(shares, scheme, layers, true);
  if (degree > 1)
    seconds += cost_->cp_comm_seconds(shares, views::ceil_div(total, degree), scheme, layers,
                                      views::group_link(*cost_, degree));
  return seconds;
}

Tokens FlexSpView::capacity(int degree) const {
  // Model states sharded over every GPU (all hold the whole model: no TP, no PP). A GPU of the group keeps the
  // activations of its ceil(S / d) tokens and, for the sharded attention, its heads of all S tokens: a group holds
  // d x t tokens, t the most per GPU with both within the free memory.
  const ParallelScheme scheme = group_scheme(degree, recompute_);
  const LayerSpan layers{0, cost_->model().layers};
  const double free_bytes = cost_->capacity_bytes() - cost_->static_bytes(scheme, shard_degree(*cost_, scheme), 0);
  if (!(free_bytes > 0)) return 0;
  constexpr Tokens kProbe = 1 << 20;
  const SequenceShare probe{kProbe, degree};
  const double attention_per_token =
      degree > 1 ? cost_->sharded_attention_bytes(std::span(&probe, 1), scheme, layers) / kProbe : 0.0;
  const double per_gpu_token = cost_->activation_bytes_per_token(scheme, layers, true) + attention_per_token * degree;
  return static_cast<Tokens>(degree) * static_cast<Tokens>(std::floor(free_bytes / per_gpu_token));
}

const DegreeCost* FlexSpView::smallest_holding(Tokens tokens) const {
  for (const auto& d : degrees_)
    if (tokens <= d.capacity) return &d;
  return nullptr;
}

Tokens FlexSpView::cluster_capacity() const {
  Tokens best = 0;
  for (const auto& d : degrees_) best = std::max(best, static_cast<Tokens>(gpus_ / d.degree) * d.capacity);
  return best;
}

}  // namespace lcsim::flexsp
