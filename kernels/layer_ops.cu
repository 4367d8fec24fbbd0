#include "kernels/layer_ops.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda_check.hpp"

namespace lcsim::kernels {
namespace {

constexpr int kNormThreads = 256;
constexpr int kNormColumnsPerThread = kMaxNormWidth / kNormThreads;
constexpr int kNormRowsPerBlock = 32;  // backward: rows sharing one dweight partial sum
constexpr int kElementThreads = 256;

unsigned element_blocks(std::int64_t n) {
  return static_cast<unsigned>(std::clamp<std::int64_t>((n + kElementThreads - 1) / kElementThreads, 1, 65535 * 8));
}

/// Sum over the block (kNormThreads threads); every thread gets the total.
__device__ float block_sum(float value, float* scratch) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  const int warp = threadIdx.x / 32;
  __syncthreads();  // scratch may still be read from a previous call
  if (threadIdx.x % 32 == 0) scratch[warp] = value;
  __syncthreads();
  float total = 0.f;
#pragma unroll
  for (int w = 0; w < kNormThreads / 32; ++w) total += scratch[w];
  return total;
}

__global__ void rms_norm_forward_kernel(const bf16* x, const bf16* weight, bf16* y, float* rstd, int width, float eps) {
  __shared__ float scratch[kNormThreads / 32];
  const std::int64_t row = blockIdx.x;
  const bf16* xr = x + row * width;
  float squares = 0.f;
  for (int i = threadIdx.x; i < width; i += kNormThreads) {
    const float v = __bfloat162float(xr[i]);
    squares += v * v;
  }
  const float r = rsqrtf(block_sum(squares, scratch) / static_cast<float>(width) + eps);
  for (int i = threadIdx.x; i < width; i += kNormThreads) {
    y[row * width + i] = __float2bfloat16(__bfloat162float(xr[i]) * r * __bfloat162float(weight[i]));
  }
  if (threadIdx.x == 0) rstd[row] = r;
}

__global__ void rms_norm_apply_kernel(const bf16* x, const bf16* weight, const float* rstd, bf16* y, int rows,
                                      int width) {
  const std::int64_t n = static_cast<std::int64_t>(rows) * width;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    y[i] = __float2bfloat16(__bfloat162float(x[i]) * rstd[i / width] * __bfloat162float(weight[i % width]));
  }
}

// dx = r w dy - x r^3 / width * sum(dy w x); dweight += dy x r. A block owns kNormRowsPerBlock rows and adds its
// dweight partial sums once per column, so the atomics number rows / 32 * width, not rows * width.
__global__ void rms_norm_backward_kernel(const bf16* x, const bf16* weight, const float* rstd, const bf16* dy,
                                         const bf16* residual_grad, bf16* dx, float* dweight, int rows, int width) {
  __shared__ float scratch[kNormThreads / 32];
  float partial[kNormColumnsPerThread];
#pragma unroll
  for (int c = 0; c < kNormColumnsPerThread; ++c) partial[c] = 0.f;
  const int row_end = min(rows, static_cast<int>(blockIdx.x + 1) * kNormRowsPerBlock);
  for (int row = blockIdx.x * kNormRowsPerBlock; row < row_end; ++row) {
    const std::int64_t base = static_cast<std::int64_t>(row) * width;
    const float r = rstd[row];
    float projection = 0.f;
#pragma unroll
    for (int c = 0; c < kNormColumnsPerThread; ++c) {
      const int i = threadIdx.x + c * kNormThreads;
      if (i < width) {
        projection += __bfloat162float(dy[base + i]) * __bfloat162float(weight[i]) * __bfloat162float(x[base + i]);
      }
    }
    const float coefficient = block_sum(projection, scratch) * r * r * r / static_cast<float>(width);
#pragma unroll
    for (int c = 0; c < kNormColumnsPerThread; ++c) {
      const int i = threadIdx.x + c * kNormThreads;
      if (i < width) {
        const float xv = __bfloat162float(x[base + i]);
        const float g = __bfloat162float(dy[base + i]);
        float value = r * g * __bfloat162float(weight[i]) - xv * coefficient;
        if (residual_grad != nullptr) value += __bfloat162float(residual_grad[base + i]);
        dx[base + i] = __float2bfloat16(value);
        partial[c] += g * xv * r;
      }
    }
  }
#pragma unroll
  for (int c = 0; c < kNormColumnsPerThread; ++c) {
    const int i = threadIdx.x + c * kNormThreads;
    if (i < width) atomicAdd(dweight + i, partial[c]);
  }
}

__global__ void rotary_kernel(bf16* x, std::int64_t row_stride, int heads, int head_dim, const int* positions, int rows,
                              float log2_base, float sign) {
  const int half = head_dim / 2;
  const std::int64_t n = static_cast<std::int64_t>(rows) * heads * half;
  for (std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(idx % half);
    const std::int64_t rest = idx / half;
    const int head = static_cast<int>(rest % heads);
    const std::int64_t row = rest / heads;
    const float inv_freq = exp2f(-2.f * static_cast<float>(i) / static_cast<float>(head_dim) * log2_base);
    float s, c;
    sincosf(sign * static_cast<float>(positions[row]) * inv_freq, &s, &c);
    bf16* p = x + row * row_stride + static_cast<std::int64_t>(head) * head_dim;
    const float a = __bfloat162float(p[i]);
    const float b = __bfloat162float(p[i + half]);
    p[i] = __float2bfloat16(a * c - b * s);
    p[i + half] = __float2bfloat16(b * c + a * s);
  }
}

__device__ float sigmoid(float v) {
  return 1.f / (1.f + __expf(-v));
}

__global__ void swiglu_forward_kernel(const bf16* gate_up, bf16* out, int rows, int ffn) {
  const std::int64_t n = static_cast<std::int64_t>(rows) * ffn;
  for (std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = idx / ffn;
    const std::int64_t col = idx % ffn;
    const float gate = __bfloat162float(gate_up[row * 2 * ffn + col]);
    const float up = __bfloat162float(gate_up[row * 2 * ffn + ffn + col]);
    out[idx] = __float2bfloat16(gate * sigmoid(gate) * up);
  }
}

__global__ void swiglu_backward_kernel(const bf16* gate_up, const bf16* dout, bf16* dgate_up, int rows, int ffn) {
  const std::int64_t n = static_cast<std::int64_t>(rows) * ffn;
  for (std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < n;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = idx / ffn;
    const std::int64_t col = idx % ffn;
    const float gate = __bfloat162float(gate_up[row * 2 * ffn + col]);
    const float up = __bfloat162float(gate_up[row * 2 * ffn + ffn + col]);
    const float d = __bfloat162float(dout[idx]);
    const float sg = sigmoid(gate);
    dgate_up[row * 2 * ffn + col] = __float2bfloat16(d * up * sg * (1.f + gate * (1.f - sg)));
    dgate_up[row * 2 * ffn + ffn + col] = __float2bfloat16(d * gate * sg);
  }
}

__global__ void add_kernel(const bf16* a, const bf16* b, bf16* out, std::int64_t n) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    out[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
  }
}

__global__ void adamw_kernel(float* master, float* m, float* v, const float* grad, bf16* param, std::int64_t n,
                             AdamW opt, float correction1, float correction2) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float g = grad[i];
    const float mi = opt.beta1 * m[i] + (1.f - opt.beta1) * g;
    const float vi = opt.beta2 * v[i] + (1.f - opt.beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float w = master[i] * (1.f - opt.lr * opt.weight_decay);
    w -= opt.lr * (mi / correction1) / (sqrtf(vi / correction2) + opt.eps);
    master[i] = w;
    param[i] = __float2bfloat16(w);
  }
}

__device__ float hash_uniform(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (index + 1);  // splitmix64 of (seed, index)
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * 0x1.0p-24f * 2.f - 1.f;  // [-1, 1)
}

template <class T>
__global__ void fill_uniform_kernel(T* x, std::int64_t n, std::uint64_t seed, float scale) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    x[i] = static_cast<T>(scale * hash_uniform(seed, static_cast<std::uint64_t>(i)));
  }
}

__global__ void fill_value_kernel(bf16* x, std::int64_t n, float value) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    x[i] = __float2bfloat16(value);
  }
}

void check_rows(int rows, int width, const char* who) {
  if (rows < 0 || width < 1) throw std::invalid_argument(std::string(who) + ": bad sizes");
}

}  // namespace

void rms_norm_forward(const bf16* x, const bf16* weight, bf16* y, float* rstd, int rows, int width, float eps,
                      cudaStream_t stream) {
  check_rows(rows, width, "rms_norm_forward");
  if (rows == 0) return;
  rms_norm_forward_kernel<<<rows, kNormThreads, 0, stream>>>(x, weight, y, rstd, width, eps);
  check_launch("rms_norm_forward");
}

void rms_norm_apply(const bf16* x, const bf16* weight, const float* rstd, bf16* y, int rows, int width,
                    cudaStream_t stream) {
  check_rows(rows, width, "rms_norm_apply");
  if (rows == 0) return;
  rms_norm_apply_kernel<<<element_blocks(static_cast<std::int64_t>(rows) * width), kElementThreads, 0, stream>>>(
      x, weight, rstd, y, rows, width);
  check_launch("rms_norm_apply");
}

void rms_norm_backward(const bf16* x, const bf16* weight, const float* rstd, const bf16* dy, const bf16* residual_grad,
                       bf16* dx, float* dweight, int rows, int width, cudaStream_t stream) {
  check_rows(rows, width, "rms_norm_backward");
  if (width > kMaxNormWidth) {
    throw std::invalid_argument("rms_norm_backward: width " + std::to_string(width) + " exceeds " +
                                std::to_string(kMaxNormWidth));
  }
  if (rows == 0) return;
  const int blocks = (rows + kNormRowsPerBlock - 1) / kNormRowsPerBlock;
  rms_norm_backward_kernel<<<blocks, kNormThreads, 0, stream>>>(x, weight, rstd, dy, residual_grad, dx, dweight, rows,
                                                                width);
  check_launch("rms_norm_backward");
}

void rotary(bf16* x, std::int64_t row_stride, int heads, int head_dim, const int* positions, int rows, float base,
            bool inverse, cudaStream_t stream) {
  if (head_dim % 2 != 0 || heads < 1 || rows < 0 || !(base > 1.f)) throw std::invalid_argument("rotary: bad sizes");
  if (rows == 0) return;
  const std::int64_t n = static_cast<std::int64_t>(rows) * heads * (head_dim / 2);
  rotary_kernel<<<element_blocks(n), kElementThreads, 0, stream>>>(x, row_stride, heads, head_dim, positions, rows,
                                                                   log2f(base), inverse ? -1.f : 1.f);
  check_launch("rotary");
}

void swiglu_forward(const bf16* gate_up, bf16* out, int rows, int ffn, cudaStream_t stream) {
  check_rows(rows, ffn, "swiglu_forward");
  if (rows == 0) return;
  swiglu_forward_kernel<<<element_blocks(static_cast<std::int64_t>(rows) * ffn), kElementThreads, 0, stream>>>(
      gate_up, out, rows, ffn);
  check_launch("swiglu_forward");
}

void swiglu_backward(const bf16* gate_up, const bf16* dout, bf16* dgate_up, int rows, int ffn, cudaStream_t stream) {
  check_rows(rows, ffn, "swiglu_backward");
  if (rows == 0) return;
  swiglu_backward_kernel<<<element_blocks(static_cast<std::int64_t>(rows) * ffn), kElementThreads, 0, stream>>>(
      gate_up, dout, dgate_up, rows, ffn);
  check_launch("swiglu_backward");
}

void add(const bf16* a, const bf16* b, bf16* out, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  add_kernel<<<element_blocks(n), kElementThreads, 0, stream>>>(a, b, out, n);
  check_launch("add");
}

void adamw_step(float* master, float* m, float* v, const float* grad, bf16* param, std::int64_t n, const AdamW& opt,
                cudaStream_t stream) {
  if (n <= 0) return;
  const float correction1 = 1.f - powf(opt.beta1, static_cast<float>(opt.step));
  const float correction2 = 1.f - powf(opt.beta2, static_cast<float>(opt.step));
  adamw_kernel<<<element_blocks(n), kElementThreads, 0, stream>>>(master, m, v, grad, param, n, opt, correction1,
                                                                  correction2);
  check_launch("adamw_step");
}

void fill_uniform(bf16* x, std::int64_t n, std::uint64_t seed, float scale, cudaStream_t stream) {
  if (n <= 0) return;
  fill_uniform_kernel<<<element_blocks(n), kElementThreads, 0, stream>>>(x, n, seed, scale);
  check_launch("fill_uniform");
}

void fill_uniform(float* x, std::int64_t n, std::uint64_t seed, float scale, cudaStream_t stream) {
  if (n <= 0) return;
  fill_uniform_kernel<<<element_blocks(n), kElementThreads, 0, stream>>>(x, n, seed, scale);
  check_launch("fill_uniform");
}

void fill_value(bf16* x, std::int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return;
  fill_value_kernel<<<element_blocks(n), kElementThreads, 0, stream>>>(x, n, value);
  check_launch("fill_value");
}

}  // namespace lcsim::kernels
