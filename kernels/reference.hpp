#pragma once
// CPU references in double precision for the GPU kernels, for small sizes: varlen causal GQA attention forward and
// backward, RMSNorm, rotary embedding and SwiGLU, each with its backward. Plain C++ (no CUDA): the host tests check
// them against finite differences, and `lcsim-gpu selftest` checks the GPU kernels against them.
//
// Tensors are dense row-major std::vector<double>: attention q/out [tokens][heads][head_dim], k/v
// [tokens][kv_heads][head_dim]; the layer ops [tokens][width].
#include <cstdint>
#include <span>
#include <vector>

namespace lcsim::reference {

/// BF16 as its 16 bits: round-to-nearest-even from float (NaN stays NaN), and back (exact).
std::uint16_t float_to_bf16_bits(float value);
float bf16_bits_to_float(std::uint16_t bits);
/// value rounded to the nearest BF16.
double round_to_bf16(double value);

struct AttentionShape {
  std::vector<int> seqlens;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int total_tokens() const;
  /// Offsets of the packed sequences: {0, s0, s0+s1, ...}.
  std::vector<int> cu_seqlens() const;
};

struct AttentionForward {
  std::vector<double> out;
  std::vector<double> lse;  ///< [heads][tokens], natural log
};

struct AttentionGradients {
  std::vector<double> dq, dk, dv;
};

/// Throws std::invalid_argument when sizes disagree with the shape.
AttentionForward attention_forward(const AttentionShape& shape, std::span<const double> q, std::span<const double> k,
                                   std::span<const double> v, double scale);
AttentionGradients attention_backward(const AttentionShape& shape, std::span<const double> q, std::span<const double> k,
                                      std::span<const double> v, std::span<const double> dout, double scale);

/// y = x / sqrt(mean(x^2) + eps) * weight, per row of `width`.
std::vector<double> rms_norm(std::span<const double> x, std::span<const double> weight, int width, double eps);
struct RmsNormGradients {
  std::vector<double> dx, dweight;
};
RmsNormGradients rms_norm_backward(std::span<const double> x, std::span<const double> weight,
                                   std::span<const double> dy, int width, double eps);

/// Rotary embedding (rotate-half convention) of rows of `heads` heads of `head_dim`, each token at `positions[t]`:
/// (x_i, x_{i+d/2}) turned by angle position * base^(-2i/d). `inverse` turns the other way, which is the backward.
std::vector<double> rotary(std::span<const double> x, std::span<const int> positions, int heads, int head_dim,
                           double base, bool inverse);

/// gate_up rows hold [gate (ffn) | up (ffn)]; out = silu(gate) * up.
std::vector<double> swiglu(std::span<const double> gate_up, int ffn);
/// Gradient with respect to gate_up, [tokens][2 ffn].
std::vector<double> swiglu_backward(std::span<const double> gate_up, std::span<const double> dout, int ffn);

/// C[m][n] = sum_k A[m][k] B[k][n] with A [m][k] (or [k][m] when trans_a) and B [k][n] (or [n][k] when trans_b).
std::vector<double> matmul(std::span<const double> a, std::span<const double> b, int m, int n, int k, bool trans_a,
                           bool trans_b);

/// ||x - ref|| / ||ref|| (Euclidean); NaN anywhere in x gives NaN.
double relative_l2_error(std::span<const double> x, std::span<const double> ref);

}  // namespace lcsim::reference
