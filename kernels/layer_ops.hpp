#pragma once
// Element-wise and row-wise kernels of the transformer-layer proxy: RMSNorm, rotary embedding, SwiGLU, residual
// adds, AdamW, and fills/conversions for tests. BF16 tensors, FP32 arithmetic. Each throws CudaError when its launch
// fails and std::invalid_argument on sizes it cannot handle.
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace lcsim::kernels {

using bf16 = __nv_bfloat16;

/// Widest row the RMSNorm kernels take (LLaMA3.1-70B's hidden size is 8192).
inline constexpr int kMaxNormWidth = 8192;

/// y = x / sqrt(mean(x^2) + eps) * weight per row; rstd[row] = 1 / sqrt(mean(x^2) + eps) is saved for backward.
void rms_norm_forward(const bf16* x, const bf16* weight, bf16* y, float* rstd, int rows, int width, float eps,
                      cudaStream_t stream);
/// y from x and a saved rstd (selective recomputation re-creates the normalised input this way).
void rms_norm_apply(const bf16* x, const bf16* weight, const float* rstd, bf16* y, int rows, int width,
                    cudaStream_t stream);
/// dx = residual_grad (may be null) + d rms_norm / dx . dy; dweight (FP32, width) += sum over rows of dy x rstd.
void rms_norm_backward(const bf16* x, const bf16* weight, const float* rstd, const bf16* dy, const bf16* residual_grad,
                       bf16* dx, float* dweight, int rows, int width, cudaStream_t stream);

/// In place, rotate-half convention: heads `heads` of `head_dim` starting at x, rows `row_stride` apart, token
/// `t` at position positions[t]; angle position * base^(-2i / head_dim); `inverse` turns back (the backward).
void rotary(bf16* x, std::int64_t row_stride, int heads, int head_dim, const int* positions, int rows, float base,
            bool inverse, cudaStream_t stream);

/// gate_up rows [gate (ffn) | up (ffn)] -> out = silu(gate) * up, rows of ffn.
void swiglu_forward(const bf16* gate_up, bf16* out, int rows, int ffn, cudaStream_t stream);
void swiglu_backward(const bf16* gate_up, const bf16* dout, bf16* dgate_up, int rows, int ffn, cudaStream_t stream);

/// out = a + b (n elements).
void add(const bf16* a, const bf16* b, bf16* out, std::int64_t n, cudaStream_t stream);

/// One AdamW step over n parameters: FP32 master weights, moments and gradients, BF16 copy of the weights.
struct AdamW {
  float lr = 1e-5f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
  int step = 1;
};
void adamw_step(float* master, float* m, float* v, const float* grad, bf16* param, std::int64_t n, const AdamW& opt,
                cudaStream_t stream);

/// Uniform values in [-scale, scale) from a counter-based hash of (seed, index): reproducible, never all zeros.
void fill_uniform(bf16* x, std::int64_t n, std::uint64_t seed, float scale, cudaStream_t stream);
void fill_uniform(float* x, std::int64_t n, std::uint64_t seed, float scale, cudaStream_t stream);
/// Every element set to `value` (e.g. NaN to poison an output before a kernel must overwrite it).
void fill_value(bf16* x, std::int64_t n, float value, cudaStream_t stream);

}  // namespace lcsim::kernels
