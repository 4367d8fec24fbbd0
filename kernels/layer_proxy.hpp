#pragma once
// A transformer layer of any ModelConfig, run forward and backward over a packed varlen micro-batch: the work a
// training framework does per layer, built from lcsim's kernels and cuBLASLt.
//
//   forward:  n1 = RMSNorm(x); qkv = n1 Wqkv^T; rotary(q, k); a = attention(q, k, v); x2 = x + a Wo^T;
//             n2 = RMSNorm(x2); gu = n2 Wgu^T; h = SwiGLU(gu); y = x2 + h Wdown^T
//   backward: the matching dgrad and wgrad GEMMs (weight gradients accumulate, beta = 1), SwiGLU, attention,
//             rotary and RMSNorm backward.
// What the forward keeps for the backward depends on the recomputation:
//   none       x, n1, rstd1, qkv, a, lse, x2, n2, rstd2, gu, h
//   selective  as none without n1, n2, h (re-created from x, x2, gu and the saved rstd in the backward)
//   full       x only; the backward re-runs the forward first
// Every buffer comes from a DeviceArena, so the arena's high-water mark is the activation memory.
//
// Ulysses-sharded sequences (`lcsim-gpu live`): besides whole sequences, a batch may hold a CP rank's shards of
// longer ones. Each adds ceil(S / cp) rows to every GEMM, norm and rotary, and its attention runs over all S tokens
// for the rank's heads, on buffers of the post-all-to-all shape saved for the backward as a real rank saves them.
// The all-to-alls themselves are not run: the exchanged tensors are filled by local copies of the same data.
// Rotary base 10000, RMSNorm eps 1e-6, softmax scale 1/sqrt(head_dim); biases are left out (as in the cost model).
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kernels/device_arena.hpp"
#include "kernels/gemm.hpp"
#include "model/cost_model.hpp"
#include "model/model.hpp"

namespace lcsim::kernels {

class LayerProxy {
 public:
  /// Allocates and initialises the layer's weights and weight gradients (random, fixed by `seed`). Throws
  /// std::invalid_argument for a model the attention kernels do not support.
  LayerProxy(const ModelConfig& model, DeviceArena& arena, GemmRunner& gemm, std::uint64_t seed);

  /// Ulysses shards of sequences of `seqlens` tokens over `cp` ranks; this rank attends with `heads` query and
  /// `kv_heads` KV heads of head_dim (heads a multiple of kv_heads).
  struct Sharded {
    std::vector<int> seqlens;
    int cp = 1;
    int heads = 0;
    int kv_heads = 0;
  };

  /// The micro-batch: packed sequence lengths (each > 0). Allocates the input x and the output gradient dy.
  void set_batch(std::span<const int> seqlens);
  /// Whole sequences of `seqlens` (may be empty) and the rank's shards of `sharded`. Throws std::invalid_argument
  /// for an empty batch, a non-positive length or sharded heads the attention kernels do not support.
  void set_batch(std::span<const int> seqlens, const Sharded& sharded);
  int tokens() const { return tokens_; }
  const ModelConfig& model() const { return model_; }

  /// `layers` layers sharing these weights: forward through all, then backward through all. The input gradient of
  /// the first layer is kept (input_grad()); weight gradients accumulate.
  void run(int layers, Recompute recompute);
  /// As run(layers, recompute), with the first `checkpointed` layers fully recomputed (Recompute::Full, HBP's GC
  /// layers) and `between`, when set, called after the last forward and before the first backward (where the LM
  /// head runs, with every layer's saved activations alive).
  void run(int layers, Recompute recompute, int checkpointed, const std::function<void()>& between);

  // For the self-test.
  const bf16* input() const { return x0_.as<bf16>(); }
  const bf16* input_grad() const { return dx0_.as<bf16>(); }
  /// Frees the kept input gradient (before a memory high-water-mark measurement).
  void clear_input_grad() { dx0_.reset(); }
  struct Tensor {
    std::string name;
    const bf16* data;
    std::int64_t elements;
  };
  /// The BF16 weight gradients (Wqkv, Wo, Wgu, Wdown).
  std::vector<Tensor> weight_grads() const;
  void zero_weight_grads();

 private:
  struct Saved;
  Saved forward(const bf16* x, Recompute recompute, DeviceBuffer& y);
  DeviceBuffer backward(Saved& saved, Recompute recompute, const bf16* dy);

  DeviceBuffer zeros_bf16(std::int64_t elements);
  DeviceBuffer random_bf16(std::int64_t elements, float scale);

  ModelConfig model_;
  DeviceArena& arena_;
  GemmRunner& gemm_;
  cudaStream_t stream_;
  std::uint64_t seed_;
  int q_width_, kv_width_, qkv_width_;
  DeviceBuffer w_qkv_, w_o_, w_gu_, w_down_, norm1_, norm2_;
  DeviceBuffer g_qkv_, g_o_, g_gu_, g_down_, g_norm1_, g_norm2_;
  /// dst <- src repeated until dst is full (the sharded attention's exchanged tensors from this rank's rows).
  void copy_cyclic(void* dst, std::size_t dst_bytes, const void* src, std::size_t src_bytes);
  void sharded_forward(Saved& s);
  void sharded_backward(Saved& s, const bf16* d_attn, bf16* d_qkv);

  int tokens_ = 0;
  int local_tokens_ = 0;  // rows of the whole sequences; the sharded rows follow them
  int num_seqs_ = 0;
  int max_seqlen_ = 0;
  DeviceBuffer cu_seqlens_, positions_, x0_, dy0_, dx0_;
  // Sharded sequences: their full lengths, attention heads and layout.
  Sharded sharded_;
  int u_tokens_ = 0;
  int u_max_seqlen_ = 0;
  int u_width_ = 0;  // (heads + 2 kv_heads) * head_dim of the exchanged QKV
  DeviceBuffer u_cu_seqlens_;
};

}  // namespace lcsim::kernels
