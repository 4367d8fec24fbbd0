#include "policies/skrull/skrull_view.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "policies/core/cost_view_support.hpp"
#include "base/errors.hpp"

namespace lcsim::skrull {
namespace {

constexpr Tokens kLongestSampled = 256 * kKiloTokens;
constexpr int kSamples = 40;

}  // namespace

SkrullView::SkrullView(const CostModel& cost, const ParallelScheme& scheme, int shard_degree,
                       std::optional<Tokens> bucket_size_override)
    : cost_(&cost), scheme_(scheme) {
  if (scheme.pp != 1) throw InputError("Skrull (DACP) runs without pipeline parallelism: pp must be 1");
  if (scheme.cp < 1 || scheme.tp < 1) throw std::invalid_argument("SkrullView: cp and tp must be >= 1");
  const LayerSpan layers = stage_span(cost.model(), 1, 0);
  const auto lengths = views::sampled_lengths(views::kShortestSampled, kLongestSampled, kSamples);

  // Eq. 14: a local sequence runs whole on one CP rank.
  ParallelScheme local = scheme;
  local.cp = 1;
  std::vector<double> flop_counts, compute_times, volumes, comm_times, token_counts, bytes;
  for (Tokens s : lengths) {
    const SequenceShare share{s, 1};
    flop_counts.push_back(flops(s));
    compute_times.push_back(cost.compute_seconds({&share, 1}, local, layers, true));
    token_counts.push_back(static_cast<double>(s));
    bytes.push_back(cost.activation_bytes_per_token(scheme, layers, true) * static_cast<double>(s));
  }
  tcomp_ = fit_linear(flop_counts, compute_times);

  // Eq. 16: a distributed sequence is sharded over the N ranks of the CP group; each rank holds ceil(s / N).
  const int n = scheme.cp;
  if (n > 1) {
    const LinkClass link = views::group_link(cost, n * scheme.tp);
    for (Tokens s : lengths) {
      const SequenceShare share{s, n};
      const double seconds = cost.cp_comm_seconds({&share, 1}, views::ceil_div(s, n), scheme, layers, link);
      // Ring attention hides its transfers behind the attention of long sequences: Eq. 16 is fitted where the
      // cost model leaves communication exposed (every length under Ulysses), and tcomm() is 0 where it is not.
      if (seconds <= 0) continue;
      volumes.push_back(volume(s));
      comm_times.push_back(seconds);
    }
    if (comm_times.size() >= 2) tcomm_ = fit_linear(volumes, comm_times);
  }  // else no CP group, no all-to-all: Tcomm stays 0

  // Eq. 12, then C = tokens of activations that fit beside the static memory.
  memory_ = fit_linear(token_counts, bytes);
  if (bucket_size_override) {
    if (*bucket_size_override <= 0)
      throw InputError("Skrull bucket size override must be positive, got " + std::to_string(*bucket_size_override));
    bucket_size_ = *bucket_size_override;
  } else {
    const double free_bytes = cost.capacity_bytes() - cost.static_bytes(scheme, shard_degree, 0) - memory_.intercept;
    const double tokens = std::floor(free_bytes / memory_.slope);
    if (!(tokens >= 1)) {
      throw InputError("Skrull bucket size: " + cost.model().name + " leaves no memory for activations (" +
                       std::to_string(free_bytes / 1e9) + " GB free after static memory and reserve)");
    }
    bucket_size_ = static_cast<Tokens>(tokens);
  }
}

double SkrullView::flops(Tokens s) const {
  const auto& m = cost_->model();
  const double h = m.hidden;
  const double len = static_cast<double>(s);
  // Eq. 13 with its 20 h^2 split into Q and O projections (4 h^2) and the gated MLP (6 h ffn; 16 h^2 at the
  // LLaMA ratio ffn = 8h/3 the paper assumes), so models with another ffn ratio are counted right.
  const double per_layer = 4 * h * h * len + 4 * h * m.kv_hidden() * len + 6 * h * m.ffn * len + 4 * h * len * len;
  return per_layer * m.layers;
}

double SkrullView::flops_sharded(Tokens s, int n) const {
  if (n < 1) throw std::invalid_argument("SkrullView::flops_sharded: n must be >= 1");
  return flops(s) / n;
}

double SkrullView::volume(Tokens s) const {
  return static_cast<double>(s) * cost_->model().kv_hidden();
}

double SkrullView::tcomm(double total_volume) const {
  // No distributed sequence, no all-to-all: the fixed term only applies when something is sent.
  if (total_volume <= 0) return 0;
  // Exposed ring time falls with the volume (longer sequences hide more): the fitted line may cross zero.
  return std::max(0.0, tcomm_(total_volume));
}

}  // namespace lcsim::skrull
