#include "calibrate/measure/measurement_plan.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <string>

#include "base/errors.hpp"
#include "base/random.hpp"

namespace lcsim {
namespace {

// Points of a full run; a quick run takes every other one.
constexpr Tokens kGemmTokensFirst = 128;
constexpr Tokens kGemmTokensLast = 32768;
constexpr int kAttentionFirst = 128;
constexpr int kAttentionLast = 32768;
constexpr int kAttentionPackTokens = 32768;  // short sequences are packed up to this many tokens
constexpr int kLayerBudgets[] = {4096, 16384};
// Lone short sequences: the launch-bound end, where the layer's fixed cost shows (quick runs take the first).
constexpr int kLayerShortSequences[] = {16, 128, 1024};
constexpr int kMemoryTokens = 2048;
constexpr int kMemoryDepths[] = {1, 2, 3};
constexpr int kUlyssesSequenceTokens[] = {4096, 16384, 65536};
constexpr double kOptimizerParameters[] = {1e6, 4e6, 1.6e7, 6.4e7, 2.56e8};
constexpr int kWarmup = 5;  // nccl-tests' defaults: 5 warm-up iterations, 20 timed
constexpr int kRepetitions = 20;
constexpr int kQuickWarmup = 2;
constexpr int kQuickRepetitions = 5;
// Measurements use at most this share of the free memory: the CUDA context, cuBLASLt workspace and allocator
// caching need the rest.
constexpr double kMemoryShare = 0.8;
constexpr int kCompositionShortest = 64;

double bf16(double elements) {
  return 2 * elements;
}

double layer_weight_elements(const ModelConfig& m) {
  const double h = m.hidden;
  return h * (m.q_hidden() + 2.0 * m.kv_hidden()) + m.q_hidden() * h + 3 * h * m.ffn + 2 * h;
}

std::string gib(double bytes) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << bytes / (1024.0 * 1024.0 * 1024.0) << " GiB";
  return out.str();
}

}  // namespace

double estimate_gemm_bytes(const ModelConfig& m, Tokens tokens) {
  const double t = static_cast<double>(tokens);
  const double h = m.hidden, q = m.q_hidden(), kv = m.kv_hidden(), f = m.ffn;
  // Weights and their gradients; inputs and outputs of the four GEMMs, and as much again for their gradients.
  return bf16(2 * layer_weight_elements(m)) + 2 * bf16(t * (h + q + 2 * kv + q + h + 2 * f + f + h));
}

double estimate_attention_bytes(const ModelConfig& m, Tokens tokens) {
  const double t = static_cast<double>(tokens);
  const double q = m.q_hidden(), kv = m.kv_hidden();
  // q, k, v, out, dout, dq, dk, dv in BF16; lse, delta and the FP32 dQ accumulator.
  return bf16(t * (4 * q + 4 * kv)) + 4 * t * (q + 2.0 * m.heads);
}

double estimate_layer_bytes(const ModelConfig& m, Tokens tokens, int layers) {
  const double t = static_cast<double>(tokens);
  const double h = m.hidden, q = m.q_hidden(), kv = m.kv_hidden(), f = m.ffn;
  const double kept_per_token = bf16(6 * h + q + 2 * kv + q + 2 * f + f) + 4.0 * (2 + m.heads);
  const double transient_per_token = bf16(4 * h + 2 * (q + 2 * kv) + 4 * f) + 4 * q;
  return bf16(2 * layer_weight_elements(m)) + t * (layers * kept_per_token + transient_per_token);
}

std::vector<double> collective_sizes(bool quick) {
  std::vector<double> sizes;
  for (int p = 10; p <= 30; p += quick ? 2 : 1) sizes.push_back(std::ldexp(1.0, p));
  return sizes;
}

std::vector<int> collective_groups(int gpus) {
  std::vector<int> groups;
  for (int n = 2; n <= gpus; n *= 2) groups.push_back(n);
  if (gpus >= 2 && groups.back() != gpus) groups.push_back(gpus);
  return groups;
}

std::vector<std::vector<int>> layer_compositions(int budget, std::uint64_t seed) {
  if (budget < 2 * kCompositionShortest) throw std::invalid_argument("layer_compositions: budget too small");
  std::vector<std::vector<int>> out;
  out.push_back({budget});
  out.emplace_back(static_cast<std::size_t>(budget / 512), 512);
  if (budget % 512 != 0) out.back().push_back(budget % 512);
  std::vector<int> mixed = {budget / 2};
  for (int rest = budget - budget / 2; rest > 0; rest -= 256) mixed.push_back(std::min(rest, 256));
  out.push_back(mixed);
  Rng rng(seed);
  std::vector<int> random;
  const double lo = std::log(static_cast<double>(kCompositionShortest));
  const double hi = std::log(budget / 2.0);
  for (int used = 0; used < budget;) {
    const int len = std::min(budget - used, static_cast<int>(std::lround(std::exp(lo + rng.uniform() * (hi - lo)))));
    random.push_back(len);
    used += len;
  }
  out.push_back(random);
  return out;
}

int rotation_sets(double bytes_per_set, double l2_bytes) {
  constexpr int kMaxSets = 8;
  if (!(bytes_per_set > 0)) throw std::invalid_argument("rotation_sets: empty working set");
  if (!(l2_bytes > 0)) return 1;
  return static_cast<int>(std::clamp(std::ceil(3 * l2_bytes / bytes_per_set), 1.0, static_cast<double>(kMaxSets)));
}

MeasurementPlan plan_measurements(const ModelConfig& model, const MeasurementOptions& options) {
  if (model.head_dim != 64 && model.head_dim != 128) {
    throw InputError("model " + model.name + ": head_dim " + std::to_string(model.head_dim) +
                     " is not supported by the attention kernels (64 or 128)");
  }
  if (!(options.memory_bytes > 0)) throw InputError("calibrate: device memory budget must be positive");
  if (options.gpus < 1) throw InputError("calibrate: needs at least one GPU");
  const bool quick = options.quick;
  const int stride = quick ? 4 : 2;
  const double budget = kMemoryShare * options.memory_bytes;
  MeasurementPlan plan;
  plan.warmup = quick ? kQuickWarmup : kWarmup;
  plan.repetitions = quick ? kQuickRepetitions : kRepetitions;
  const auto fits = [&](double bytes, const std::string& what) {
    if (bytes <= budget) return true;
    plan.skipped.push_back(what + ": needs ~" + gib(bytes) + ", over the " + gib(budget) + " budget (" +
                           std::to_string(static_cast<int>(kMemoryShare * 100)) + "% of free memory)");
    return false;
  };

  for (Tokens t = kGemmTokensFirst; t <= kGemmTokensLast; t *= stride) {
    if (fits(estimate_gemm_bytes(model, t), "GEMMs at " + std::to_string(t) + " tokens")) plan.gemm_tokens.push_back(t);
  }
  const int pack = quick ? kAttentionPackTokens / 2 : kAttentionPackTokens;
  for (int s = kAttentionFirst; s <= kAttentionLast; s *= stride) {
    const AttentionPoint point{s, std::max(1, pack / s)};
    if (fits(estimate_attention_bytes(model, static_cast<Tokens>(s) * point.sequences),
             "attention at sequence length " + std::to_string(s))) {
      plan.attention.push_back(point);
    }
  }
  for (int s : kLayerShortSequences) {
    if (quick && s != kLayerShortSequences[0]) continue;
    plan.layer_batches.push_back({s});
  }
  for (int b : kLayerBudgets) {
    if (quick && b != kLayerBudgets[0]) continue;
    if (!fits(estimate_layer_bytes(model, b, 1), "layer proxy at " + std::to_string(b) + " tokens")) continue;
    for (auto& c : layer_compositions(b, options.seed + static_cast<std::uint64_t>(b))) plan.layer_batches.push_back(c);
  }
  plan.layer_recompute = {Recompute::None, Recompute::Selective, Recompute::Full};

  // Memory: every named model with a supported shape, so per_hidden, per_kv_hidden and per_ffn can be told apart.
  for (const auto& m : named_models()) {
    if (m.head_dim != 64 && m.head_dim != 128) {
      plan.skipped.push_back("memory probe of " + m.name + ": head_dim " + std::to_string(m.head_dim));
      continue;
    }
    std::vector<int> depths(std::begin(kMemoryDepths), std::end(kMemoryDepths));
    if (quick) depths.pop_back();
    if (!fits(estimate_layer_bytes(m, kMemoryTokens, depths.back()), "memory probe of " + m.name)) continue;
    for (auto r : {Recompute::None, Recompute::Selective, Recompute::Full}) {
      plan.memory.push_back({m, kMemoryTokens, r, depths});
    }
  }

  if (options.gpus < 2) {
    plan.skipped.push_back(
        "collectives and the Ulysses all-to-all: one GPU visible, so the prior values are kept (measured: false)");
  } else {
    const auto sizes = collective_sizes(quick);
    for (int n : collective_groups(options.gpus)) {
      for (auto op :
           {CollectiveOp::AllGather, CollectiveOp::ReduceScatter, CollectiveOp::AllReduce, CollectiveOp::AllToAll}) {
        plan.collectives.push_back({op, n, sizes});
      }
      if (n == 2) plan.collectives.push_back({CollectiveOp::SendRecv, 2, sizes});
      for (int s : kUlyssesSequenceTokens) plan.ulysses.push_back({n, s / n});
    }
  }
  for (double p : kOptimizerParameters) {
    // FP32 master, moments and gradient, BF16 parameter: 18 bytes per parameter.
    if (fits(18 * p, "optimizer step of " + std::to_string(static_cast<long long>(p)) + " parameters")) {
      plan.optimizer_parameters.push_back(p);
    }
  }
  return plan;
}

}  // namespace lcsim
