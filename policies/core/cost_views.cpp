#include "policies/core/cost_views.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "policies/core/errors.hpp"

namespace lcsim {
namespace {

constexpr Tokens kShortestSampled = 128;
constexpr Tokens kLongestSampled = 256 * kKiloTokens;
constexpr int kSkrullSamples = 40;
constexpr int kHydraulisSamples = 32;

/// Distinct token counts, log-spaced from lo to hi.
std::vector<Tokens> sampled_lengths(Tokens lo, Tokens hi, int count) {
  std::vector<Tokens> lengths;
  for (double x : log_spaced(static_cast<double>(lo), static_cast<double>(hi), count)) {
    const auto s = static_cast<Tokens>(std::llround(x));
    if (lengths.empty() || s > lengths.back()) lengths.push_back(s);
  }
  return lengths;
}

Tokens ceil_div(Tokens a, Tokens b) {
  return (a + b - 1) / b;
}

/// The link a group of `gpus` contiguous GPUs communicates over.
LinkClass link_for(const CostModel& cost, int gpus) {
  return gpus <= cost.cluster().gpus_per_node ? LinkClass::NvLink : LinkClass::InfiniBand;
}

int stage_layers(const CostModel& cost, int pp) {
  return (cost.model().layers + pp - 1) / pp;
}

}  // namespace

// ---- Skrull ----

SkrullView::SkrullView(const CostModel& cost, const ParallelScheme& scheme, int shard_degree,
                       std::optional<Tokens> bucket_size_override)
    : cost_(&cost), scheme_(scheme) {
  if (scheme.pp != 1) throw InputError("Skrull (DACP) runs without pipeline parallelism: pp must be 1");
  if (scheme.cp < 1 || scheme.tp < 1) throw std::invalid_argument("SkrullView: cp and tp must be >= 1");
  const int layers = cost.model().layers;
  const auto lengths = sampled_lengths(kShortestSampled, kLongestSampled, kSkrullSamples);

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
    const LinkClass link = link_for(cost, n * scheme.tp);
    for (Tokens s : lengths) {
      const SequenceShare share{s, n};
      const double seconds = cost.cp_comm_seconds({&share, 1}, ceil_div(s, n), scheme, layers, link);
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
    const double free_bytes = cost.capacity_bytes() - cost.static_bytes(scheme, shard_degree) - memory_.intercept;
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

// ---- Hydraulis ----

HydraulisView::HydraulisView(const CostModel& cost, int total_gpus) : cost_(&cost), total_gpus_(total_gpus) {
  if (total_gpus < 1) throw std::invalid_argument("HydraulisView: total_gpus must be >= 1");
}

double HydraulisView::stage_seconds(const ParallelScheme& scheme, Tokens l) const {
  if (scheme.cp != 1) throw InputError("Hydraulis strategies are <TP, PP>: cp must be 1");
  const int layers = stage_layers(*cost_, scheme.pp);
  const LinkClass tp_link = link_for(*cost_, scheme.tp);
  const LinkClass pp_link = link_for(*cost_, scheme.tp * scheme.pp);
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
  for (Tokens l : sampled_lengths(kShortestSampled, longest, kHydraulisSamples)) {
    xs.push_back(static_cast<double>(l));
    ys.push_back(stage_seconds(scheme, l));
  }
  return fit_quadratic(xs, ys);
}

Tokens HydraulisView::util_len(const ParallelScheme& scheme, double threshold) const {
  if (!(threshold > 0 && threshold <= 1)) throw std::invalid_argument("HydraulisView::util_len: threshold in (0, 1]");
  const Tokens longest = std::max<Tokens>(max_len(scheme), 4 * kKiloTokens);
  const auto lengths = sampled_lengths(kShortestSampled, longest, kHydraulisSamples);
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
  const int layers = stage_layers(*cost_, scheme.pp);
  // Appendix B.1: under 1F1B the first stage holds PP micro-batches of its layers' activations; the last stage
  // holds one plus the logits. The larger of the two bounds the sequence length.
  double per_token = scheme.pp * cost_->activation_bytes_per_token(scheme, layers, scheme.pp == 1);
  if (scheme.pp > 1) per_token = std::max(per_token, cost_->activation_bytes_per_token(scheme, layers, true));
  // Optimizer states (and master weights) sharded across every GPU; 16-bit parameters and gradients held per
  // scheme. That is ZeRO-1 at least, whatever stage the scenario sets for other policies.
  const auto& memory = cost_->profile().memory;
  const auto stage = static_cast<std::size_t>(std::max(1, cost_->options().zero_stage));
  const double static_bytes = cost_->parameters_per_gpu(scheme) * memory.replicated_bytes_per_param[stage] +
                              cost_->model().parameters() * memory.sharded_bytes_per_param[stage] / total_gpus_;
  const double tokens = std::floor((cost_->capacity_bytes() - static_bytes) / per_token);
  return tokens > 0 ? static_cast<Tokens>(tokens) : 0;
}

// ---- HBP ----

HbpView::HbpView(const CostModel& cost, int world) : cost_(&cost), world_(world) {
  if (world < 1) throw std::invalid_argument("HbpView: world must be >= 1");
}

namespace {

/// HBP trains each pack with SP (Ulysses) over `sp` GPUs and full checkpointing on `gc` layers; the other layers
/// keep all their activations.
ParallelScheme hbp_scheme(const CostModel& cost, int world, int sp, int gc_layers) {
  if (sp < 1 || sp > world) throw std::invalid_argument("HbpView: sp must be in [1, world]");
  if (gc_layers < 0 || gc_layers > cost.model().layers)
    throw std::invalid_argument("HbpView: gc layers must be in [0, layers]");
  ParallelScheme scheme;
  scheme.cp = sp;
  scheme.recompute = Recompute::None;
  scheme.checkpointed_layers = gc_layers;
  return scheme;
}

}  // namespace

double HbpView::step_seconds(Tokens packing_length, int sp, int gc_layers) const {
  const ParallelScheme scheme = hbp_scheme(*cost_, world_, sp, gc_layers);
  const int layers = cost_->model().layers;
  const SequenceShare share{packing_length, sp};
  return cost_->compute_seconds({&share, 1}, scheme, layers, true) +
         cost_->cp_comm_seconds({&share, 1}, ceil_div(packing_length, sp), scheme, layers, link_for(*cost_, sp));
}

double HbpView::peak_bytes(Tokens packing_length, int sp, int gc_layers) const {
  const ParallelScheme scheme = hbp_scheme(*cost_, world_, sp, gc_layers);
  // Every GPU holds the whole model (no TP/PP), so ZeRO shards across the whole world.
  return cost_->static_bytes(scheme, world_) + cost_->activation_bytes_per_token(scheme, cost_->model().layers, true) *
                                                   static_cast<double>(ceil_div(packing_length, sp));
}

bool HbpView::fits(Tokens packing_length, int sp, int gc_layers) const {
  return peak_bytes(packing_length, sp, gc_layers) <= cost_->capacity_bytes();
}

}  // namespace lcsim
