#pragma once
// Varlen causal self-attention over packed sequences, BF16 in / FP32 accumulate, grouped-query attention.
//
// Layout (FlashAttention's varlen convention): the tokens of all sequences are packed back to back; sequence i
// owns tokens [cu_seqlens[i], cu_seqlens[i + 1]). A tensor is a row per token, `row_stride` elements apart, and
// head h of a token occupies the head_dim elements starting at h * head_dim in its row, so Q, K and V may live
// in one packed QKV buffer. Query head h reads key/value head h / (heads / kv_heads).
//
// attention_forward / attention_backward are the tiled tensor-core kernels (FlashAttention-2 style: online
// softmax, the S and P tiles never leave the chip, the backward recomputes P from the saved log-sum-exp).
// naive_attention_* are the reference: one thread per query row, FP32 throughout, written for obviousness.
#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace lcsim::kernels {

using bf16 = __nv_bfloat16;

struct VarlenLayout {
  const int* cu_seqlens = nullptr;  ///< device array of num_seqs + 1 offsets, cu_seqlens[0] == 0
  int num_seqs = 0;
  int total_tokens = 0;  ///< cu_seqlens[num_seqs]
  int max_seqlen = 0;    ///< longest sequence (sizes the launch grid)
};

struct AttentionDims {
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;  ///< 64 or 128 for the tiled kernels; any value up to 128 for the naive ones
};

template <class T>
struct Rows {
  T* data = nullptr;
  std::int64_t row_stride = 0;  ///< elements between consecutive tokens
};

struct AttentionForwardArgs {
  VarlenLayout layout;
  AttentionDims dims;
  Rows<const bf16> q, k, v;
  Rows<bf16> out;
  float* lse = nullptr;  ///< [heads][total_tokens], natural-log log-sum-exp of the scaled scores
  float softmax_scale = 0;
};

struct AttentionBackwardArgs {
  VarlenLayout layout;
  AttentionDims dims;
  Rows<const bf16> q, k, v, out, dout;
  const float* lse = nullptr;  ///< as written by attention_forward
  Rows<bf16> dq, dk, dv;
  float softmax_scale = 0;
};

/// True when the tiled kernels handle these dims (head_dim 64 or 128, heads a multiple of kv_heads).
bool attention_supported(const AttentionDims& dims);

/// Device scratch the backward needs: an FP32 dQ accumulator and the per-row dot(dO, O).
std::size_t attention_backward_workspace_bytes(const VarlenLayout& layout, const AttentionDims& dims);

/// Throw std::invalid_argument for unsupported dims or misaligned rows (pointers and strides must allow 16-byte
/// loads), std::runtime_error when a launch fails.
void attention_forward(const AttentionForwardArgs& args, cudaStream_t stream);
void attention_backward(const AttentionBackwardArgs& args, void* workspace, cudaStream_t stream);

/// Reference forward: out is FP32 [total_tokens][heads][head_dim] (dense), lse as attention_forward.
void naive_attention_forward(const AttentionForwardArgs& args, float* out, float* lse, cudaStream_t stream);
/// Reference backward, recomputing the forward in FP32: dq is FP32 [total][heads][head_dim], dk and dv FP32
/// [total][kv_heads][head_dim] (dense; zeroed here, then accumulated with atomics). args.out is not read.
void naive_attention_backward(const AttentionBackwardArgs& args, float* dq, float* dk, float* dv, cudaStream_t stream);

}  // namespace lcsim::kernels
