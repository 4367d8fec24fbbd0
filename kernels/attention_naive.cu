// Reference attention on the GPU: one thread per (query token, head), FP32 arithmetic on the BF16 inputs, no
// tiling, no online softmax (two passes: max, then sums). Slow and obvious on purpose: the tiled kernels are
// checked against it at sizes the CPU reference cannot reach.
#include <cmath>
#include <stdexcept>

#include "kernels/attention.hpp"
#include "kernels/cuda_check.hpp"

namespace lcsim::kernels {
namespace {

constexpr int kMaxHeadDim = 128;
constexpr int kThreads = 128;

struct RowIndex {
  int token, head, seq_start;
};

__device__ RowIndex row_index(const VarlenLayout& layout, int heads, std::int64_t row) {
  const auto token = static_cast<int>(row / heads);
  const int head = static_cast<int>(row % heads);
  int lo = 0;
  int hi = layout.num_seqs - 1;
  while (lo < hi) {  // the last sequence whose start is <= token
    const int mid = (lo + hi + 1) / 2;
    if (layout.cu_seqlens[mid] <= token) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return {token, head, layout.cu_seqlens[lo]};
}

__device__ float load(const Rows<const bf16>& rows, int token, int head, int head_dim, int d) {
  return __bfloat162float(rows.data[static_cast<std::int64_t>(token) * rows.row_stride + head * head_dim + d]);
}

__device__ float score(const Rows<const bf16>& k, const float* q, int key, int kv_head, int head_dim, float scale) {
  float dot = 0.f;
  for (int d = 0; d < head_dim; ++d) dot += q[d] * load(k, key, kv_head, head_dim, d);
  return dot * scale;
}

__global__ void naive_forward_kernel(AttentionForwardArgs args, float* out, float* lse) {
  const int heads = args.dims.heads;
  const int hd = args.dims.head_dim;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= static_cast<std::int64_t>(args.layout.total_tokens) * heads) return;
  const RowIndex at = row_index(args.layout, heads, row);
  const int kv_head = at.head / (heads / args.dims.kv_heads);
  float q[kMaxHeadDim];
  float acc[kMaxHeadDim];
  for (int d = 0; d < hd; ++d) {
    q[d] = load(args.q, at.token, at.head, hd, d);
    acc[d] = 0.f;
  }
  float max_score = -INFINITY;
  for (int key = at.seq_start; key <= at.token; ++key) {
    max_score = fmaxf(max_score, score(args.k, q, key, kv_head, hd, args.softmax_scale));
  }
  float sum = 0.f;
  for (int key = at.seq_start; key <= at.token; ++key) {
    const float p = expf(score(args.k, q, key, kv_head, hd, args.softmax_scale) - max_score);
    sum += p;
    for (int d = 0; d < hd; ++d) acc[d] += p * load(args.v, key, kv_head, hd, d);
  }
  for (int d = 0; d < hd; ++d) out[row * hd + d] = acc[d] / sum;
  lse[static_cast<std::int64_t>(at.head) * args.layout.total_tokens + at.token] = max_score + logf(sum);
}

__global__ void naive_backward_kernel(AttentionBackwardArgs args, float* dq, float* dk, float* dv) {
  const int heads = args.dims.heads;
  const int hd = args.dims.head_dim;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= static_cast<std::int64_t>(args.layout.total_tokens) * heads) return;
  const RowIndex at = row_index(args.layout, heads, row);
  const int kv_head = at.head / (heads / args.dims.kv_heads);
  float q[kMaxHeadDim];
  float d_o[kMaxHeadDim];
  float acc[kMaxHeadDim];
  for (int d = 0; d < hd; ++d) {
    q[d] = load(args.q, at.token, at.head, hd, d);
    d_o[d] = load(args.dout, at.token, at.head, hd, d);
    acc[d] = 0.f;
  }
  // Forward again in FP32: the row's softmax statistics and delta = dot(dO, O).
  float max_score = -INFINITY;
  for (int key = at.seq_start; key <= at.token; ++key) {
    max_score = fmaxf(max_score, score(args.k, q, key, kv_head, hd, args.softmax_scale));
  }
  float sum = 0.f;
  for (int key = at.seq_start; key <= at.token; ++key) {
    const float p = expf(score(args.k, q, key, kv_head, hd, args.softmax_scale) - max_score);
    sum += p;
    for (int d = 0; d < hd; ++d) acc[d] += p * load(args.v, key, kv_head, hd, d);
  }
  const float lse = max_score + logf(sum);
  float delta = 0.f;
  for (int d = 0; d < hd; ++d) {
    delta += d_o[d] * acc[d] / sum;
    acc[d] = 0.f;  // now the dQ accumulator
  }
  const std::int64_t kv_width = static_cast<std::int64_t>(args.dims.kv_heads) * hd;
  for (int key = at.seq_start; key <= at.token; ++key) {
    const float p = expf(score(args.k, q, key, kv_head, hd, args.softmax_scale) - lse);
    float dp = 0.f;
    for (int d = 0; d < hd; ++d) dp += d_o[d] * load(args.v, key, kv_head, hd, d);
    const float ds = p * (dp - delta);
    float* dk_row = dk + key * kv_width + kv_head * hd;
    float* dv_row = dv + key * kv_width + kv_head * hd;
    for (int d = 0; d < hd; ++d) {
      acc[d] += ds * load(args.k, key, kv_head, hd, d);
      atomicAdd(dk_row + d, ds * q[d] * args.softmax_scale);
      atomicAdd(dv_row + d, p * d_o[d]);
    }
  }
  for (int d = 0; d < hd; ++d) dq[row * hd + d] = acc[d] * args.softmax_scale;
}

unsigned blocks_for(const VarlenLayout& layout, int heads) {
  const std::int64_t rows = static_cast<std::int64_t>(layout.total_tokens) * heads;
  return static_cast<unsigned>((rows + kThreads - 1) / kThreads);
}

void check_naive(const VarlenLayout& layout, const AttentionDims& dims, const char* who) {
  if (dims.head_dim < 1 || dims.head_dim > kMaxHeadDim || dims.heads < 1 || dims.kv_heads < 1 ||
      dims.heads % dims.kv_heads != 0 || layout.cu_seqlens == nullptr) {
    throw std::invalid_argument(std::string(who) + ": unsupported dims or layout");
  }
}

}  // namespace

void naive_attention_forward(const AttentionForwardArgs& args, float* out, float* lse, cudaStream_t stream) {
  check_naive(args.layout, args.dims, "naive_attention_forward");
  if (args.layout.total_tokens == 0) return;
  naive_forward_kernel<<<blocks_for(args.layout, args.dims.heads), kThreads, 0, stream>>>(args, out, lse);
  check_launch("naive_attention_forward");
}

void naive_attention_backward(const AttentionBackwardArgs& args, float* dq, float* dk, float* dv, cudaStream_t stream) {
  check_naive(args.layout, args.dims, "naive_attention_backward");
  if (args.layout.total_tokens == 0) return;
  const std::size_t kv_bytes =
      static_cast<std::size_t>(args.layout.total_tokens) * args.dims.kv_heads * args.dims.head_dim * sizeof(float);
  check_cuda(cudaMemsetAsync(dk, 0, kv_bytes, stream), "naive_attention_backward: clearing dK");
  check_cuda(cudaMemsetAsync(dv, 0, kv_bytes, stream), "naive_attention_backward: clearing dV");
  naive_backward_kernel<<<blocks_for(args.layout, args.dims.heads), kThreads, 0, stream>>>(args, dq, dk, dv);
  check_launch("naive_attention_backward");
}

}  // namespace lcsim::kernels
