// The cost model's formulas. Notation: h hidden, q = heads * head_dim, kv = kv_heads * head_dim, f ffn, V vocab,
// P peak FLOP/s, e_g(T) and e_a(s) the profile's GEMM and attention efficiency curves.
//
// Time of one layer over a micro-batch on one GPU (TP degree t), T = sum over shares of sequence_tokens / cp:
//   GEMM forward       G = T * gemm_flops_per_token / t / (P * e_g(T))
//   attention forward  A = sum over shares of attention_flops(s) x share / (P * e_a(s)); share = 1/t for whole
//                          sequences; Ulysses: all s tokens for the busiest rank's whole heads (ulysses_rank_heads
//                          of the TP slice, heads / (cp t) when cp divides them); ring, zigzag and all-gather:
//                          the slowest rank's steps (cp_step_seconds, model/cp_attention.cpp); a per-sequence CP
//                          chunk of c queries p tokens into its sequence: 4 q (c p + c (c + 1) / 2) / t at e_a(c)
//   busiest SM         with the profile's attention_blocks (tile b, S SMs, o blocks per SM): a call's forward
//                          lasts at least the tile pairs its busiest SM holds (the blocks of ranks 0, S, ..., (o-1) S,
//                          launched longest first: attention_blocks.hpp) x one tile pair's time on one SM,
//                          S 4 b^2 head_dim / (P e_a(s_max)); its backward r x that, over the backward blocks. A lone
//                          sequence or a 2-head Ulysses shard has few blocks, and that SM sets the time.
//   work  = 3 G + (1 + attention_backward_ratio) A   (backward GEMMs cost twice the forward)
//         + (G + A) when the layer is checkpointed (or recompute is Full): its forward runs again in backward.
//   elementwise E = T / t x layer_elementwise_bytes_per_token / HBM bandwidth (the cluster GPU's datasheet
//                          figure): the least traffic of the norms, rotary, residual adds and SwiGLU, forward and
//                          backward, the forward's again when recomputed; the LM head adds the loss's over the logits
//   CPU floor         a trained layer costs max(layer, layer_issue_us) and the optimizer step max(its time,
//                          step_issue_us): a framework that issues kernels more slowly than they run leaves the GPU
//                          waiting (profiles fitted with a job's untraced steps; 0 in every other: docs/calibration.md)
//   layer = (1 + gemm_work_overhead) GEMM passes + attention terms + E + layer_overhead: the element-wise kernels
//           (norms, rotary, SwiGLU, residuals) read and write every row, so what they cost beyond E grows with the
//           rows the GEMMs see, not with attention's s^2; the attention terms are the kernels' own times (the
//           attention sweep measures them alone); and a fixed cost per layer (launches, tiny kernels) that a small
//           micro-batch pays (docs/measurements/h200-2026-11-26.md, docs/model.md).
// LoRA (docs/model.md): the frozen base GEMMs run forward and for the activation gradient only, 2 G instead of
// 3 G; the adapters add L forward and 2 L backward (lora_forward_seconds); the frozen LM head skips its weight
// gradient too. Partial freezing: a frozen layer runs 2 G + (1 + r_a) A (no weight gradient); one with nothing
// trained before it runs under no_grad, its forward only (LayerGrad::None). Selective recomputation adds no time here:
// with FlashAttention the attention core already recomputes its softmax in backward, and what selective recomputation
// re-runs beyond that (norms, the SwiGLU product) is element-wise work that k and the layer overhead absorb (E
// counts it once). It only changes memory coefficients.
#include "model/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "base/errors.hpp"
#include "model/attention_blocks.hpp"

namespace lcsim {

std::string_view to_string(Recompute recompute) {
  switch (recompute) {
    case Recompute::None:
      return "none";
    case Recompute::Selective:
      return "selective";
    case Recompute::Full:
      return "full";
  }
  return "unknown";
}

std::string_view to_string(Elementwise elementwise) {
  return elementwise == Elementwise::Eager ? "eager" : "fused";
}

std::string_view to_string(TpOverlap overlap) {
  return overlap == TpOverlap::Async ? "async" : "none";
}

std::string_view to_string(Precision precision) {
  return precision == Precision::Fp8 ? "fp8" : "bf16";
}

namespace {

constexpr double kBf16Bytes = 2;

double local_tokens(std::span<const SequenceShare> work) {
  double tokens = 0;
  for (const auto& share : work)
    tokens +=
        share.chunk() ? static_cast<double>(share.chunk_tokens) : static_cast<double>(share.sequence_tokens) / share.cp;
  return tokens;
}

void check_degree(int degree, const char* what) {
  if (degree < 1) throw std::invalid_argument(std::string("cost model: ") + what + " must be >= 1");
}

/// Layers of a stage with `layers` layers with a backward that are fully checkpointed: all under Full
/// recomputation, else the scheme's count up to those layers.
int checkpointed_layers(const ParallelScheme& scheme, int layers) {
  if (scheme.checkpointed_layers < 0) throw std::invalid_argument("cost model: negative checkpointed_layers");
  return scheme.recompute == Recompute::Full ? layers : std::min(scheme.checkpointed_layers, layers);
}

void check_span(LayerSpan span) {
  if (span.first < 0 || span.count < 0) throw std::invalid_argument("cost model: negative layer index or count");
}

/// Layers of `span` inside [begin, end).
int overlap(LayerSpan span, int begin, int end) {
  return std::max(0, std::min(span.end(), end) - std::max(span.first, begin));
}

}  // namespace

double causal_pairs(Tokens queries, Tokens offset) {
  const auto c = static_cast<double>(queries);
  return c * static_cast<double>(offset) + c * (c + 1) / 2;
}

LayerSpan stage_span(const ModelConfig& model, int pp, int stage) {
  check_degree(pp, "pp");
  if (stage < 0 || stage >= pp) throw std::invalid_argument("cost model: pipeline stage outside [0, pp)");
  const int per_stage = model.layers / pp;
  return {stage * per_stage, per_stage};
}

LayerSpan chunk_span(const ModelConfig& model, const ParallelScheme& scheme, int stage, int chunk) {
  if (chunk < 0 || chunk >= scheme.virtual_pp) throw std::invalid_argument("cost model: model chunk outside [0, vpp)");
  return stage_span(model, scheme.virtual_stages(), chunk * scheme.pp + stage);
}

CostModel::CostModel(ModelConfig model, ClusterSpec cluster, Profile profile, CostModelOptions options)
    : model_(std::move(model)), cluster_(std::move(cluster)), profile_(std::move(profile)), options_(options) {
  if (options_.zero_stage < 0 || options_.zero_stage > 3)
    throw InputError("zero_stage must be 0, 1, 2 or 3, got " + std::to_string(options_.zero_stage));
  const Finetuning& f = options_.finetuning;
  if (f.frozen() && (f.frozen_layers < 0 || f.frozen_layers > model_.layers))
    throw InputError("finetuning: " + std::to_string(f.frozen_layers) + " frozen layers outside [0, " +
                     std::to_string(model_.layers) + "]");
  if (options_.precision == Precision::Fp8 && !profile_.compute.fp8_gemm_speedup)
    throw InputError("precision fp8 needs the profile's compute.fp8_gemm_speedup (profile '" + profile_.label() +
                     "' prices BF16 GEMMs only)");
}

double CostModel::gemm_speedup() const {
  return options_.precision == Precision::Fp8 ? *profile_.compute.fp8_gemm_speedup : 1.0;
}

double CostModel::gemm_flops_per_token() const {
  const double h = model_.hidden;
  const double q = model_.q_hidden();
  const double kv = model_.kv_hidden();
  const double f = model_.ffn;
  // QKV projection, output projection, gate + up + down of the gated MLP; 2 FLOPs per multiply-add.
  return 2 * (h * (q + 2 * kv) + q * h + 3 * h * f);
}

double CostModel::attention_flops(Tokens s) const {
  const double len = static_cast<double>(s);
  // QK^T and PV: 4 s^2 q FLOPs, halved by the causal mask.
  return 2 * len * len * model_.q_hidden();
}

CostModel::ElementwiseBytes CostModel::layer_elementwise_bytes_per_token() const {
  const double h = model_.hidden, q = model_.q_hidden(), kv = model_.kv_hidden(), f = model_.ffn;
  // Forward: two RMSNorms (read h, write h), rotary on Q and K (read and write q + kv), two residual adds (read 2h,
  // write h), SwiGLU (read gate and up, write f). Backward: each norm reads x and dy and writes dx, rotary as
  // forward, the two gradient sums at the residuals 3h each, SwiGLU reads gate, up and dy and writes two gradients.
  ElementwiseBytes bytes{kBf16Bytes * (10 * h + 2 * (q + kv) + 3 * f), kBf16Bytes * (12 * h + 2 * (q + kv) + 5 * f)};
  if (options_.elementwise == Elementwise::Eager) {
    // Eager PyTorch (torchtitan's Llama code): each op its own kernel. Each RMSNorm upcasts to FP32, squares,
    // averages, scales, downcasts and multiplies by its weight (36 h bytes forward, 56 h backward, against the
    // floor's 4 h and 6 h); rotary goes through FP32 complex numbers (20 bytes an element each way, against 4); the
    // attention output is made contiguous; SwiGLU is a silu and a product (10 f forward, 18 f backward, against 6 f
    // and 10 f); under GQA, the repeat of K and V to every query head is a copy and its gradient a sum.
    // docs/model.md, "Element-wise kernels", counts each kernel.
    const double repeat_kv = kv < q ? 4 * (q + kv) : 0;
    bytes.forward += 64 * h + 20 * q + 16 * kv + 4 * f + repeat_kv;
    bytes.backward += 100 * h + 20 * q + 16 * kv + 8 * f + repeat_kv;
  }
  if (options_.precision == Precision::Fp8) {
    // FP8 GEMMs read FP8 copies of both operands, row-major and transposed (Hopper's FP8 MMA takes one layout).
    // Forward: the attention output (q) and the SwiGLU output (f) are cast and transposed (read 2 bytes, write
    // 1 + 1); the norms write their output in FP8 (1 byte less) but its transpose still costs a pass (1 + 1).
    // Backward: each GEMM group's output gradient (Q, K, V; output; gate, up; down) is cast and transposed.
    bytes.forward += 4 * q + 4 * f + 2 * h;
    bytes.backward += 4 * (q + 2 * kv + 2 * h + 2 * f);
  }
  return bytes;
}

CostModel::ElementwiseBytes CostModel::head_elementwise_bytes_per_token() const {
  // The loss: the logits written, then read by the softmax cross-entropy; backward reads them again and writes
  // their gradient.
  const double v = static_cast<double>(model_.vocab);
  return {kBf16Bytes * 2 * v, kBf16Bytes * 2 * v};
}

double CostModel::hbm_seconds(double bytes, int tp) const {
  // A GPU kind without a datasheet bandwidth (a profile's own device name) charges no traffic.
  const double rate = cluster_.gpu.hbm_TBps * 1e12;
  return rate > 0 ? bytes / tp / rate : 0;
}

double CostModel::head_flops_per_token() const {
  return 2.0 * model_.hidden * static_cast<double>(model_.vocab);
}

LayerGrad CostModel::layer_grad(int layer) const {
  const Finetuning& f = options_.finetuning;
  if (!f.frozen() || layer >= f.frozen_layers) return LayerGrad::Full;
  // Gradients reach a frozen layer only from something trained before it; the frozen prefix behind frozen
  // embeddings has none, so frameworks run it under no_grad.
  return f.frozen_embeddings ? LayerGrad::None : LayerGrad::Activations;
}

int CostModel::no_grad_layers(LayerSpan span) const {
  const Finetuning& f = options_.finetuning;
  return f.frozen() && f.frozen_embeddings ? overlap(span, 0, f.frozen_layers) : 0;
}

LayerMix CostModel::layer_mix(const ParallelScheme& scheme, LayerSpan stage, LayerSpan part) const {
  check_span(stage);
  check_span(part);
  if (part.first < stage.first || part.end() > stage.end())
    throw std::invalid_argument("cost model: layer span outside its stage");
  const Finetuning& f = options_.finetuning;
  const int frozen_end = f.frozen() ? f.frozen_layers : 0;
  const int no_grad_end = f.frozen() && f.frozen_embeddings ? frozen_end : 0;
  LayerMix mix;
  mix.none = overlap(part, 0, no_grad_end);
  mix.activations = overlap(part, no_grad_end, frozen_end);
  mix.full = part.count - mix.none - mix.activations;
  // Checkpointing covers the stage's first layers with a backward: a no_grad layer keeps nothing to drop.
  const int backward_first = std::max(stage.first, no_grad_end);
  const int checkpointed_end = backward_first + checkpointed_layers(scheme, std::max(0, stage.end() - backward_first));
  mix.checkpointed_activations = overlap(part, backward_first, std::min(checkpointed_end, frozen_end));
  mix.checkpointed_full = overlap(part, std::max(backward_first, frozen_end), checkpointed_end);
  return mix;
}

double CostModel::tensor_peak_flops() const {
  return profile_.compute.peak_tflops * 1e12 * cluster_.tensor_peak_share;
}

double CostModel::gemm_bf16_seconds(double tokens, int tp) const {
  return tokens * gemm_flops_per_token() / tp / (tensor_peak_flops() * profile_.compute.gemm_efficiency.at(tokens));
}

CostModel::LayerParts CostModel::layer_parts(std::span<const SequenceShare> work, int tp) const {
  const double tokens = local_tokens(work);
  const auto& c = profile_.compute;
  const double peak = tensor_peak_flops();
  LayerParts parts;
  parts.gemm_bf16 = gemm_bf16_seconds(tokens, tp);
  parts.gemm = parts.gemm_bf16 / gemm_speedup();
  parts.adapters = lora_forward_seconds(tokens, tp);
  const ElementwiseBytes bytes = layer_elementwise_bytes_per_token();
  parts.elementwise = hbm_seconds(tokens * bytes.forward, tp);
  parts.elementwise_backward = hbm_seconds(tokens * bytes.backward, tp);
  const AttentionBlocks& blocks = c.attention_blocks;
  const bool token_split = shards_tokens(options_.cp_attention);
  // Ring and all-gather kernels run in steps whose blocks the busiest-SM model does not follow: not applied.
  const bool block_model = blocks.tile_tokens > 0 && !token_split;
  std::vector<BlockRun> forward_runs, backward_runs;
  double longest_tokens = 0, largest_block = 0;
  for (const auto& share : work) {
    if (share.sequence_tokens <= 0) continue;
    check_degree(share.cp, "share cp");
    if (share.chunk()) {
      // A per-sequence CP chunk: its own causal pairs, every head of the TP slice (4 head_dim FLOPs a pair and
      // head, as attention_flops), in a kernel of chunk_tokens queries. The busiest-SM model is not applied: chunks
      // run under ring attention, whose blocks it does not model either.
      if (share.chunk_offset < 0 || share.chunk_offset + share.chunk_tokens > share.sequence_tokens)
        throw std::invalid_argument("cost model: CP chunk outside its sequence");
      const auto queries = static_cast<double>(share.chunk_tokens);
      parts.attention +=
          block_attention_seconds(causal_pairs(share.chunk_tokens, share.chunk_offset), queries, queries, tp);
      continue;
    }
    if (token_split && share.cp > 1) {  // the ring's (or the gathered K,V's) steps, as the slowest rank runs them
      for (double step : cp_step_seconds(share, tp)) parts.attention += step;
      continue;
    }
    const double kernel_tokens = static_cast<double>(share.sequence_tokens);
    parts.attention += attention_flops(share.sequence_tokens) * attention_share(share.cp, tp) /
                       (peak * c.attention_efficiency.at(kernel_tokens));
    if (!block_model) continue;
    const UlyssesHeads rank = rank_heads(share.cp, tp);
    const double tiles = std::ceil(kernel_tokens / blocks.tile_tokens);
    const bool group = blocks.backward_walk == AttentionBlocks::BackwardWalk::KvGroup;
    const double walk = group ? static_cast<double>(rank.heads) / rank.kv_heads : 1.0;
    forward_runs.push_back({static_cast<double>(rank.heads), tiles, 1.0});
    backward_runs.push_back({static_cast<double>(group ? rank.kv_heads : rank.heads), tiles, walk});
    longest_tokens = std::max(longest_tokens, kernel_tokens);
    largest_block = std::max(largest_block, tiles * std::max(1.0, walk));
  }
  parts.attention_backward = c.attention_backward_ratio * parts.attention;
  if (!forward_runs.empty()) {
    // One tile pair (QK^T and PV of tile x tile x head_dim) on one SM at full occupancy, at the longest
    // sequence's efficiency; the busiest SM's tile pairs at that pace bound the call from below.
    const double b = blocks.tile_tokens;
    const double sm_pair_s =
        blocks.sm_count * 4.0 * b * b * model_.head_dim / (peak * c.attention_efficiency.at(longest_tokens));
    const int most = std::max(blocks.forward_blocks_per_sm, blocks.backward_blocks_per_sm);
    // Many short sequences: even `most` of the largest blocks on one SM stay below the work; skip the ranks.
    if (most * largest_block * sm_pair_s * c.attention_backward_ratio > parts.attention_backward ||
        most * largest_block * sm_pair_s > parts.attention) {
      parts.attention =
          std::max(parts.attention,
                   busiest_sm_tile_pairs(forward_runs, blocks.sm_count, blocks.forward_blocks_per_sm) * sm_pair_s);
      parts.attention_backward =
          std::max(parts.attention_backward,
                   c.attention_backward_ratio * sm_pair_s *
                       busiest_sm_tile_pairs(backward_runs, blocks.sm_count, blocks.backward_blocks_per_sm));
    }
  }
  return parts;
}

UlyssesHeads CostModel::rank_heads(int cp, int tp) const {
  // The TP rank's slice (Megatron keeps one KV head per rank when there are fewer than TP ranks), then Ulysses'
  // busiest rank of it.
  const int heads = (model_.heads + tp - 1) / tp, kv_heads = (model_.kv_heads + tp - 1) / tp;
  return cp == 1 ? UlyssesHeads{heads, kv_heads} : ulysses_rank_heads(heads, kv_heads, cp);
}

double CostModel::attention_share(int cp, int tp) const {
  if (cp == 1) return 1.0 / tp;
  return static_cast<double>(rank_heads(cp, tp).heads) / model_.heads;  // Ulysses: all tokens, whole heads
}

double CostModel::layer_gemm_seconds(const LayerParts& parts, bool recomputed, LayerGrad grad) const {
  const double passes = base_gemm_passes(grad) + (recomputed ? 1 : 0);
  return passes * parts.gemm + (3 + (recomputed ? 1 : 0)) * parts.adapters;
}

double CostModel::layer_seconds(std::span<const SequenceShare> work, int tp, Recompute recompute, bool checkpointed,
                                LayerGrad grad) const {
  check_degree(tp, "tp");
  if (local_tokens(work) <= 0) return 0;
  const LayerParts parts = layer_parts(work, tp);
  if (grad == LayerGrad::None) return layer_forward_seconds(parts, LayerGrad::Activations);
  const auto& c = profile_.compute;
  const bool recomputed = checkpointed || recompute == Recompute::Full;
  const double attention = (recomputed ? 2 : 1) * parts.attention + parts.attention_backward;
  const double elementwise = (recomputed ? 2 : 1) * parts.elementwise + parts.elementwise_backward;
  LayerParts rows = parts;  // the element-wise overhead grows with the GEMMs' rows, whatever their precision
  rows.gemm = parts.gemm_bf16;
  const double again = selective_gemm_share(recompute, recomputed);
  const double gpu = layer_gemm_seconds(parts, recomputed, grad) + again * parts.gemm +
                     c.gemm_work_overhead * (layer_gemm_seconds(rows, recomputed, grad) + again * rows.gemm) +
                     attention + elementwise + c.layer_overhead_us * 1e-6;
  // The GPU waits for a framework that issues the layer's kernels more slowly than it runs them.
  return std::max(gpu, c.layer_issue_us * 1e-6);
}

double CostModel::layer_work_seconds(std::span<const SequenceShare> work, int tp, Recompute recompute,
                                     bool checkpointed, LayerGrad grad, double* gemm_seconds) const {
  check_degree(tp, "tp");
  const LayerParts parts = layer_parts(work, tp);
  const bool recomputed = checkpointed || recompute == Recompute::Full;
  const double gemm =
      layer_gemm_seconds(parts, recomputed, grad) + selective_gemm_share(recompute, recomputed) * parts.gemm;
  if (gemm_seconds) *gemm_seconds = gemm;
  return gemm + (recomputed ? 2 : 1) * (parts.attention + parts.elementwise) + parts.attention_backward +
         parts.elementwise_backward;
}

double CostModel::selective_gemm_share(Recompute recompute, bool recomputed) const {
  // A layer recomputed whole runs its forward again anyway; selective recomputation reruns the profile's share.
  return !recomputed && recompute == Recompute::Selective ? profile_.compute.selective_recompute_gemm_share : 0.0;
}

double CostModel::base_gemm_passes(LayerGrad grad) const {
  return options_.finetuning.lora() || grad != LayerGrad::Full ? 2.0 : 3.0;
}

double CostModel::head_gemm_passes() const {
  const Finetuning& f = options_.finetuning;
  return f.lora() || (f.frozen() && f.frozen_lm_head) ? 2.0 : 3.0;
}

double CostModel::lora_forward_seconds(double tokens, int tp) const {
  const Finetuning& f = options_.finetuning;
  if (!f.lora() || tokens <= 0) return 0;
  const auto& c = profile_.compute;
  const double flop_rate = tensor_peak_flops() * c.gemm_efficiency.at(tokens);
  const double byte_rate = cluster_.gpu.hbm_TBps * 1e12;
  const double r = f.lora_rank;
  double seconds = 0;
  for (LoraTarget target : f.lora_targets) {
    const auto [d_in, d_out] = lora_target_shape(model_, target);
    // x A then (x A) B: 2 r (d_in + d_out) FLOPs per token; bf16 traffic: read x, write and read x A, and add
    // into the base output (read and write it).
    const double flops = tokens * 2 * r * (d_in + d_out) / tp;
    const double bytes = tokens * kBf16Bytes * (d_in + 2 * r + 2 * d_out) / tp;
    seconds += std::max(flops / flop_rate, byte_rate > 0 ? bytes / byte_rate : 0.0);
  }
  return seconds;
}

double CostModel::head_forward_seconds(double tokens, int tp) const {
  return tokens * head_flops_per_token() / tp / (tensor_peak_flops() * profile_.compute.gemm_efficiency.at(tokens));
}

double CostModel::compute_seconds(std::span<const SequenceShare> work, const ParallelScheme& scheme, LayerSpan layers,
                                  bool with_head) const {
  check_span(layers);
  const double tokens = local_tokens(work);
  if (tokens <= 0) return 0;
  check_degree(scheme.tp, "tp");
  const LayerMix mix = layer_mix(scheme, layers);
  // `count` layers of one kind, asked of the cost model only when there are any (the LM head alone has none).
  const auto layer = [&](int count, bool checkpointed, LayerGrad grad) {
    return count > 0 ? count * layer_seconds(work, scheme.tp, scheme.recompute, checkpointed, grad) : 0.0;
  };
  double seconds = layer(mix.checkpointed_full, true, LayerGrad::Full) +
                   layer(mix.full - mix.checkpointed_full, false, LayerGrad::Full);
  if (mix.activations > 0)
    seconds += layer(mix.checkpointed_activations, true, LayerGrad::Activations) +
               layer(mix.activations - mix.checkpointed_activations, false, LayerGrad::Activations);
  if (mix.none > 0) seconds += layer(mix.none, false, LayerGrad::None);
  // The LM head: forward plus a backward of twice its FLOPs (once when frozen: no weight gradient).
  if (with_head) {
    const ElementwiseBytes loss = head_elementwise_bytes_per_token();
    seconds += head_gemm_passes() * head_forward_seconds(tokens, scheme.tp) +
               hbm_seconds(tokens * (loss.forward + loss.backward), scheme.tp);
  }
  return seconds;
}

double CostModel::forward_seconds(std::span<const SequenceShare> work, const ParallelScheme& scheme, LayerSpan layers,
                                  bool with_head) const {
  check_span(layers);
  check_degree(scheme.tp, "tp");
  const double tokens = local_tokens(work);
  if (tokens <= 0) return 0;
  const LayerParts parts = layer_parts(work, scheme.tp);
  // A no_grad layer's forward is timed as a frozen layer's (layer_seconds).
  const int frozen = options_.finetuning.frozen() ? overlap(layers, 0, options_.finetuning.frozen_layers) : 0;
  double seconds = (layers.count - frozen) * layer_forward_seconds(parts, LayerGrad::Full);
  if (frozen > 0) seconds += frozen * layer_forward_seconds(parts, LayerGrad::Activations);
  if (with_head)
    seconds += head_forward_seconds(tokens, scheme.tp) +
               hbm_seconds(tokens * head_elementwise_bytes_per_token().forward, scheme.tp);
  return seconds;
}

double CostModel::layer_forward_seconds(const LayerParts& parts, LayerGrad grad) const {
  const auto& c = profile_.compute;
  const double gemm = parts.gemm, adapters = parts.adapters;
  const double forward = gemm + adapters + parts.attention + parts.elementwise;
  // The element-wise overhead grows with the forward's GEMM rows, the fixed layer overhead goes with each pass in
  // proportion to its share of the layer's work.
  const double work_seconds = base_gemm_passes(grad) * gemm + 3 * adapters + parts.attention +
                              parts.attention_backward + parts.elementwise + parts.elementwise_backward;
  const double overhead = c.gemm_work_overhead * (parts.gemm_bf16 + adapters) +
                          (work_seconds > 0 ? c.layer_overhead_us * 1e-6 * forward / work_seconds : 0.0);
  return forward + overhead;
}

std::vector<CollectiveCall> CostModel::ulysses_calls(Tokens tokens_on_gpu, int cp, LayerSpan layers) const {
  check_degree(cp, "cp");
  check_span(layers);
  if (cp == 1 || tokens_on_gpu <= 0 || layers.count <= 0) return {};
  // nccl-tests all_to_all size = the per-rank buffer: the GPU's tokens times the tensor width.
  const double tokens = static_cast<double>(tokens_on_gpu);
  const double q_bytes = tokens * model_.q_hidden() * kBf16Bytes;
  const double kv_bytes = tokens * model_.kv_hidden() * kBf16Bytes;
  // Per layer, forward: Q and the output (q width), K and V (kv width); backward: their gradients the other way.
  const int no_grad = no_grad_layers(layers);
  const double per_width = 4.0 * (layers.count - no_grad) + 2.0 * no_grad;
  return {{CollectiveOp::AllToAll, cp, q_bytes, per_width}, {CollectiveOp::AllToAll, cp, kv_bytes, per_width}};
}

std::vector<CpExchange> CostModel::cp_exchanges(std::span<const SequenceShare> dist, Tokens tokens_on_gpu,
                                                const ParallelScheme& scheme, LayerSpan layers,
                                                int checkpointed) const {
  check_degree(scheme.cp, "cp");
  check_degree(scheme.tp, "tp");
  check_span(layers);
  const int backward = layers.count - no_grad_layers(layers);
  if (checkpointed < 0 || checkpointed > backward)
    throw std::invalid_argument("cost model: checkpointed layers outside [0, layers with a backward]");
  if (scheme.cp == 1 || tokens_on_gpu <= 0 || layers.count <= 0 || dist.empty()) return {};
  switch (options_.cp_attention) {
    case CpAttention::Ring:
    case CpAttention::Zigzag:
      return ring_exchanges(dist, tokens_on_gpu, scheme, layers.count, backward, checkpointed);
    case CpAttention::AllGather:
      return all_gather_exchanges(tokens_on_gpu, scheme, layers.count, backward, checkpointed);
    case CpAttention::Ulysses:
      break;
  }
  return {{CpExchange::Pass::Both, ulysses_calls(tokens_on_gpu, scheme.cp, layers), 0.0}};
}

double CostModel::exposed_seconds(const CpExchange& exchange, LinkClass link) const {
  return std::max(0.0, collective_time(exchange.calls, link).seconds() - exchange.beside_s);
}

double CostModel::exposed_seconds(const CpExchange& exchange, std::span<const int> group) const {
  return std::max(0.0, collective_time(exchange.calls, group).seconds() - exchange.beside_s);
}

double CostModel::cp_comm_seconds(std::span<const SequenceShare> dist, Tokens tokens_on_gpu,
                                  const ParallelScheme& scheme, LayerSpan layers, LinkClass link) const {
  check_span(layers);
  double seconds = 0;
  for (const CpExchange& exchange :
       cp_exchanges(dist, tokens_on_gpu, scheme, layers, layer_mix(scheme, layers).checkpointed()))
    seconds += exposed_seconds(exchange, link);
  return seconds;
}

std::vector<CollectiveCall> CostModel::tp_comm_calls(Tokens tokens, int tp, LayerSpan layers) const {
  check_degree(tp, "tp");
  check_span(layers);
  if (tp == 1 || tokens <= 0 || layers.count <= 0) return {};
  const double bytes = static_cast<double>(tokens) * model_.hidden * kBf16Bytes;  // the full, gathered buffer
  // Forward: all-gather before and reduce-scatter after attention and the MLP; backward mirrors it.
  const int no_grad = no_grad_layers(layers);
  const double per_op = 4.0 * (layers.count - no_grad) + 2.0 * no_grad;
  return {{CollectiveOp::AllGather, tp, bytes, per_op}, {CollectiveOp::ReduceScatter, tp, bytes, per_op}};
}

double CostModel::tp_hidden_seconds(Tokens tokens, int tp, LayerSpan layers, double collective_s) const {
  if (options_.tp_overlap != TpOverlap::Async || tp == 1 || tokens <= 0 || collective_s <= 0) return 0;
  check_span(layers);
  const int no_grad = no_grad_layers(layers);
  const int trained = layers.count - no_grad;
  const int passes = 2 * trained + no_grad;  // a pass: 2 all-gathers and 2 reduce-scatters (tp_comm_calls)
  const double one = collective_s / (4.0 * passes);
  const double h = model_.hidden;
  const double q = model_.q_hidden();
  const double f = model_.ffn;
  const double gemm_s = gemm_bf16_seconds(static_cast<double>(tokens), tp) / gemm_speedup();
  // The GEMMs' shares of a layer's forward FLOPs: QKV, output, gate + up, down (gemm_flops_per_token).
  const double total = h * (q + 2 * model_.kv_hidden()) + q * h + 3 * h * f;
  const double shares[] = {h * (q + 2 * model_.kv_hidden()) / total, q * h / total, 2 * h * f / total, h * f / total};
  double per_pass = 0;
  for (const double share : shares) per_pass += std::min(one, gemm_s * share);
  return per_pass * (1.0 - 1.0 / tp) * passes;
}

double CostModel::tp_comm_seconds(Tokens tokens, int tp, LayerSpan layers, LinkClass link) const {
  const double seconds = collective_time(tp_comm_calls(tokens, tp, layers), link).seconds();
  return seconds - tp_hidden_seconds(tokens, tp, layers, seconds);
}

std::vector<CollectiveCall> CostModel::pp_transfer_calls(Tokens tokens, int tp) const {
  check_degree(tp, "tp");
  if (tokens <= 0) return {};
  const double bytes = static_cast<double>(tokens) * model_.hidden * kBf16Bytes / tp;
  return {{CollectiveOp::SendRecv, 2, bytes, 1.0}};
}

double CostModel::pp_transfer_seconds(Tokens tokens, int tp, LinkClass link) const {
  return collective_time(pp_transfer_calls(tokens, tp), link).seconds();
}

namespace {

/// Sequential wire hops of the algorithm NCCL runs: a ring all-gather or reduce-scatter n - 1, a ring all-reduce
/// 2 (n - 1); all-to-all and send/recv post every message at once, one hop.
double wire_hops(CollectiveOp op, int n) {
  switch (op) {
    case CollectiveOp::AllGather:
    case CollectiveOp::ReduceScatter:
      return n - 1;
    case CollectiveOp::AllReduce:
      return 2.0 * (n - 1);
    case CollectiveOp::AllToAll:
    case CollectiveOp::SendRecv:
      break;
  }
  return 1;
}

}  // namespace

CollectiveTime CostModel::on_cluster_links(const CollectiveCall& call, const CollectivePath& path) const {
  CollectiveTime time = profile_.collective_time(call.op, path.link, call.group_size, call.bytes);
  if (!profile_.network) {  // the fits are the cluster's own: only the wiring moves them
    if (path.bandwidth_scale != 1.0) time.transfer_s /= path.bandwidth_scale;
    return spread_over_nvlink(time, call, path);
  }
  const NetworkReference& reference = *profile_.network;
  const bool nvlink = path.link == LinkClass::NvLink;
  const double bandwidth = nvlink ? cluster_.nvlink_GBps : cluster_.ib_GBps;
  if (!(bandwidth > 0))
    throw std::invalid_argument("cost model: the cluster gives no " + std::string(to_string(path.link)) + " bandwidth");
  // The profile's efficiency (bus bandwidth over its reference link) applied to the cluster's link, as wired.
  time.transfer_s *= (nvlink ? reference.nvlink_GBps : reference.ib_GBps) / (bandwidth * path.bandwidth_scale);
  const double wire_delta_us = nvlink ? cluster_.nvlink_latency_us - reference.nvlink_latency_us
                                      : cluster_.ib_latency_us - reference.ib_latency_us;
  time.latency_s = std::max(0.0, time.latency_s + wire_hops(call.op, call.group_size) * wire_delta_us * 1e-6);
  return spread_over_nvlink(time, call, path);
}

CollectiveTime CostModel::spread_over_nvlink(CollectiveTime time, const CollectiveCall& call,
                                             const CollectivePath& path) const {
  // Rings spread over a node's NICs move every byte over NVLink too: the spread ends at NVLink's bus bandwidth
  // (C5 of docs/published-measurements: 8 GPUs per node reach 320-345 GB/s, not 8 NICs' 390).
  if (path.link != LinkClass::InfiniBand || !(path.bandwidth_scale > 1.0)) return time;
  const CollectiveTime nvlink = on_cluster_links(call, {LinkClass::NvLink, 1.0});
  time.transfer_s = std::max(time.transfer_s, nvlink.transfer_s);
  return time;
}

CollectiveTime CostModel::collective_time(std::span<const CollectiveCall> calls, LinkClass link) const {
  return collective_time(calls, link, GroupPlacement::Aligned);
}

CollectiveTime CostModel::collective_time(std::span<const CollectiveCall> calls, LinkClass link,
                                          GroupPlacement placement) const {
  CollectiveTime total;
  const Topology topology = cluster_.topology();
  for (const auto& call : calls) {
    const CollectivePath path = placement == GroupPlacement::Aligned
                                    ? topology.aligned_path(call.op, call.group_size, link)
                                    : topology.scattered_path(call.op, call.group_size, link);
    const CollectiveTime one = on_cluster_links(call, path);
    total.latency_s += call.count * one.latency_s;
    total.transfer_s += call.count * one.transfer_s;
  }
  return total;
}

CollectiveTime CostModel::collective_time(std::span<const CollectiveCall> calls, std::span<const int> group) const {
  CollectiveTime total;
  const Topology topology = cluster_.topology();
  // The group's link class and layout once for all its calls (as Topology::collective_path would per call).
  const LinkClass link = topology.link_class(group);
  const bool shaped = link == LinkClass::InfiniBand && topology.kind().shapes_collectives();
  const GroupLayout layout = shaped ? topology.layout_of(group) : GroupLayout{};
  for (const auto& call : calls) {
    const CollectivePath path = shaped && call.op != CollectiveOp::SendRecv
                                    ? topology.kind().network_path(topology.shape(), call.op, layout)
                                    : CollectivePath{link, 1.0};
    const CollectiveTime one = on_cluster_links(call, path);
    total.latency_s += call.count * one.latency_s;
    total.transfer_s += call.count * one.transfer_s;
  }
  return total;
}

double CostModel::parameters_per_gpu(const ParallelScheme& scheme) const {
  check_degree(scheme.tp, "tp");
  check_degree(scheme.pp, "pp");
  // Layers are spread evenly over the stages (a fractional share when pp does not divide them); the vocabulary
  // matrices sit on the first (embedding) and last (LM head) stage, so the most loaded stage holds one of them,
  // or both when there is no pipeline and they are not tied.
  const double layers = model_.layers * model_.layer_parameters() / (scheme.pp * scheme.tp);
  const double vocab_matrix = static_cast<double>(model_.vocab) * model_.hidden / scheme.tp;
  const double vocab_matrices = scheme.pp == 1 && !model_.tied_embeddings ? 2 : 1;
  return layers + vocab_matrices * vocab_matrix;
}

double CostModel::trained_parameters_per_gpu(const ParallelScheme& scheme, int stage) const {
  const Finetuning& f = options_.finetuning;
  if (!f.lora() && !f.frozen()) return parameters_per_gpu(scheme);
  check_degree(scheme.tp, "tp");
  // The adapters of the stage's layers; embeddings and the LM head stay frozen.
  if (f.lora()) return model_.layers * lora_parameters_per_layer(model_, f) / (scheme.pp * scheme.tp);
  // An interleaved stage holds one chunk in each stretch of pp chunks, so a frozen prefix spares it fewer layers.
  double trained_layers = 0;
  for (int chunk = 0; chunk < scheme.virtual_pp; ++chunk) {
    const LayerSpan layers = chunk_span(model_, scheme, stage, chunk);
    trained_layers += layers.count - overlap(layers, 0, f.frozen_layers);
  }
  // The vocabulary matrices parameters_per_gpu charges: both without a pipeline (one when tied, which the
  // scenario freezes together); else the embeddings on stage 0, the head on the last stage, and a middle stage
  // charged as the more loaded end.
  const double vocab_matrix = static_cast<double>(model_.vocab) * model_.hidden / scheme.tp;
  double vocab = 0;
  if (scheme.pp == 1 && !model_.tied_embeddings)
    vocab = (f.frozen_embeddings ? 0 : 1) + (f.frozen_lm_head ? 0 : 1);
  else if (scheme.pp == 1 || (stage > 0 && stage < scheme.pp - 1))
    vocab = f.frozen_embeddings && f.frozen_lm_head ? 0 : 1;
  else
    vocab = (stage == 0 ? f.frozen_embeddings : f.frozen_lm_head) ? 0 : 1;
  return trained_layers * model_.layer_parameters() / scheme.tp + vocab * vocab_matrix;
}

double CostModel::trained_parameters() const {
  const Finetuning& f = options_.finetuning;
  if (!f.lora() && !f.frozen()) return model_.parameters();
  return trained_parameters_per_gpu(ParallelScheme{}, 0);  // tp = pp = 1: the whole model on one GPU
}

double CostModel::frozen_parameters_per_gpu(const ParallelScheme& scheme, int stage) const {
  const Finetuning& f = options_.finetuning;
  if (f.lora()) return parameters_per_gpu(scheme);  // every base weight; the adapters come on top
  return f.frozen() ? parameters_per_gpu(scheme) - trained_parameters_per_gpu(scheme, stage) : 0.0;
}

std::vector<CollectiveCall> CostModel::gradient_sync_calls(const ParallelScheme& scheme, int shard_degree,
                                                           int stage) const {
  check_degree(shard_degree, "shard degree");
  if (shard_degree == 1) return {};
  const double trained = trained_parameters_per_gpu(scheme, stage);
  if (trained <= 0) return {};  // a stage that trains nothing has no gradients to sync
  // Gradients reduce in their main-gradient precision (fp32 under Megatron's and torchtitan's defaults); the
  // updated parameters come back in bf16.
  const double gradients = trained * profile_.memory.gradient_reduce_bytes;
  if (options_.zero_stage == 0) return {{CollectiveOp::AllReduce, shard_degree, gradients, 1.0}};
  // ZeRO 1-3: gradients reduce-scattered onto their optimizer shard, updated bf16 parameters all-gathered back.
  return {{CollectiveOp::ReduceScatter, shard_degree, gradients, 1.0},
          {CollectiveOp::AllGather, shard_degree, trained * kBf16Bytes, 1.0}};
}

double CostModel::gradient_sync_seconds(const ParallelScheme& scheme, int shard_degree, LinkClass link, int stage,
                                        GroupPlacement placement) const {
  return collective_time(gradient_sync_calls(scheme, shard_degree, stage), link, placement).seconds();
}

double CostModel::gradient_sync_hidden_seconds(double sync_seconds, int layers, double beside_seconds) {
  if (layers < 1) throw std::invalid_argument("gradient_sync_hidden_seconds: layers must be at least 1");
  return std::max(0.0, std::min(sync_seconds * (1.0 - 1.0 / layers), beside_seconds));
}

double CostModel::optimizer_seconds(const ParallelScheme& scheme, int shard_degree, int stage) const {
  check_degree(shard_degree, "shard degree");
  const double updated = trained_parameters_per_gpu(scheme, stage) / (options_.zero_stage >= 1 ? shard_degree : 1);
  return std::max(profile_.compute.optimizer_us_per_mparam * (updated / 1e6) * 1e-6,
                  profile_.compute.step_issue_us * 1e-6);
}

double CostModel::switch_seconds(const ParallelScheme& scheme) const {
  return profile_.compute.hot_switch_us_per_mparam * parameters_per_gpu(scheme) / 1e6 * 1e-6;
}

double CostModel::static_bytes(const ParallelScheme& scheme, int shard_degree, int stage) const {
  check_degree(shard_degree, "shard degree");
  const auto zero = static_cast<std::size_t>(options_.zero_stage);
  const auto& m = profile_.memory;
  const double trained = trained_parameters_per_gpu(scheme, stage) *
                         (m.replicated_bytes_per_param[zero] + m.sharded_bytes_per_param[zero] / shard_degree);
  if (!options_.finetuning.lora() && !options_.finetuning.frozen()) return trained;
  // Frozen weights: bf16, no gradient or optimizer state; ZeRO-3 shards them too.
  const double frozen =
      frozen_parameters_per_gpu(scheme, stage) * kBf16Bytes / (options_.zero_stage == 3 ? shard_degree : 1);
  return frozen + trained;
}

double CostModel::activation_bytes_per_token_layer(const ActivationCoefficients& c) const {
  return c.per_hidden * model_.hidden + c.per_kv_hidden * model_.kv_hidden() + c.per_ffn * model_.ffn;
}

double CostModel::activation_bytes_per_token(const ParallelScheme& scheme, LayerSpan layers, bool with_head) const {
  check_degree(scheme.tp, "tp");
  check_span(layers);
  const auto& m = profile_.memory;
  // A no_grad layer keeps nothing: its output is the next layer's input, which that layer keeps.
  const LayerMix mix = layer_mix(scheme, layers);
  const int checkpointed = mix.checkpointed();
  // A layer that is not checkpointed keeps what its recomputation setting keeps; a Full-recompute layer being
  // recomputed holds everything again for its backward.
  // LoRA keeps each adapter's x A (r values per token) for B's weight gradient, on top of what full fine-tuning
  // keeps (x itself is kept either way: A's weight gradient needs it).
  const double adapters = kBf16Bytes * options_.finetuning.lora_rank *
                          static_cast<double>(options_.finetuning.lora() ? options_.finetuning.lora_targets.size() : 0);
  const double kept =
      adapters + activation_bytes_per_token_layer(scheme.recompute == Recompute::Selective ? m.activations_selective
                                                                                           : m.activations_none);
  const double full = activation_bytes_per_token_layer(m.activations_full);
  const double stored = checkpointed * full + (mix.with_backward() - checkpointed) * kept;
  // On top of what is stored, the peak holds either the logits (end of forward) or, while a checkpointed layer is
  // recomputed in backward, that one layer's activations beyond its checkpoint, whichever is larger.
  const double logits = with_head ? m.logits_bytes_per_token_per_vocab * static_cast<double>(model_.vocab) : 0;
  const double recomputing = checkpointed > 0 ? std::max(0.0, kept - full) : 0;
  return (stored + std::max(logits, recomputing)) / scheme.tp;
}

double CostModel::sharded_attention_bytes(std::span<const SequenceShare> dist, const ParallelScheme& scheme,
                                          LayerSpan layers) const {
  const ShardedAttentionBytes& b = profile_.memory.sharded_attention;
  if (!b.any() || options_.cp_attention != CpAttention::Ulysses) return 0;
  const LayerMix mix = layer_mix(scheme, layers);
  const int keeping = mix.with_backward() - mix.checkpointed();  // a checkpointed layer keeps its input only
  if (keeping <= 0) return 0;
  double bytes = 0;
  for (const SequenceShare& share : dist) {
    if (share.cp <= 1 || share.sequence_tokens <= 0) continue;
    const UlyssesHeads rank = rank_heads(share.cp, scheme.tp);
    const double d = model_.head_dim;
    bytes += static_cast<double>(share.sequence_tokens) *
             (b.per_q_element * rank.heads * d + b.per_kv_element * rank.kv_heads * d + b.per_head * rank.heads);
  }
  return bytes * keeping;
}

double CostModel::capacity_bytes() const {
  return cluster_.gpu.memory_bytes - profile_.memory.reserve_bytes;
}

}  // namespace lcsim
