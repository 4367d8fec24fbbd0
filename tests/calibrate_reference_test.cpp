// The CPU references the GPU kernels are checked against (kernels/reference.hpp), the arena's memory accounting and
// GPU-kind detection: everything of the GPU side that can be verified without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "base/random.hpp"
#include "kernels/memory_tracker.hpp"
#include "kernels/reference.hpp"
#include "model/gpu_kind.hpp"

namespace lcsim {
namespace calibrate_reference_test {

using reference::AttentionShape;

std::vector<double> random_values(std::size_t n, Rng& rng, double scale = 1) {
  std::vector<double> v(n);
  for (auto& x : v) x = scale * (2 * rng.uniform() - 1);
  return v;
}

/// Central-difference gradient of f at x.
std::vector<double> numeric_gradient(const std::function<double(const std::vector<double>&)>& f,
                                     std::vector<double> x) {
  constexpr double h = 1e-6;
  std::vector<double> g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + h;
    const double up = f(x);
    x[i] = keep - h;
    const double down = f(x);
    x[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

TEST(CalibrateBf16, RoundsToNearestEven) {
  EXPECT_EQ(reference::float_to_bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(reference::float_to_bf16_bits(-2.0f), 0xC000);
  // BF16 keeps 7 mantissa bits: at 1.0 its step is 2^-7. Halfway cases go to the even neighbour.
  EXPECT_EQ(reference::float_to_bf16_bits(1.0f + 0x1p-8f), 0x3F80);
  EXPECT_EQ(reference::float_to_bf16_bits(1.0f + 3 * 0x1p-8f), 0x3F82);
  EXPECT_EQ(reference::float_to_bf16_bits(1.0f + 0x1p-8f + 0x1p-12f), 0x3F81);  // above half: up
  EXPECT_TRUE(std::isnan(
      reference::bf16_bits_to_float(reference::float_to_bf16_bits(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(reference::bf16_bits_to_float(0x4049), 3.140625f);
  EXPECT_EQ(reference::round_to_bf16(3.14159), 3.140625);
}

TEST(CalibrateAttentionReference, OneTokenAttendsToItself) {
  const AttentionShape shape{{1}, 2, 1, 4};
  const std::vector<double> q = {1, 2, 3, 4, -1, 0, 1, 0}, k = {0.5, 0.5, 0.5, 0.5}, v = {7, 8, 9, 10};
  const auto f = reference::attention_forward(shape, q, k, v, 0.5);
  EXPECT_EQ(f.out, (std::vector<double>{7, 8, 9, 10, 7, 8, 9, 10}));
  EXPECT_DOUBLE_EQ(f.lse[0], 0.5 * (0.5 + 1 + 1.5 + 2));  // a single score: lse = the score
  EXPECT_DOUBLE_EQ(f.lse[1], 0.5 * (-0.5 + 0.5));
}

TEST(CalibrateAttentionReference, TwoTokensByHand) {
  // One head, head_dim 1: scores of token 1 are q1 k0 = 0 and q1 k1 = 2.
  const AttentionShape shape{{2}, 1, 1, 1};
  const std::vector<double> q = {1, 2}, k = {0, 1}, v = {3, 5};
  const auto f = reference::attention_forward(shape, q, k, v, 1.0);
  const double e2 = std::exp(2.0);
  EXPECT_DOUBLE_EQ(f.out[0], 3);
  EXPECT_NEAR(f.out[1], (3 + 5 * e2) / (1 + e2), 1e-15);
  EXPECT_NEAR(f.lse[1], std::log(1 + e2), 1e-15);
}

TEST(CalibrateAttentionReference, CausalAndSequencesIndependent) {
  Rng rng(5);
  const AttentionShape shape{{4, 3}, 2, 2, 8};
  auto q = random_values(7 * 16, rng), k = random_values(7 * 16, rng), v = random_values(7 * 16, rng);
  const auto before = reference::attention_forward(shape, q, k, v, 0.3);
  // Change token 2 (sequence 0) keys/values: tokens 0, 1 and all of sequence 1 must not move.
  for (int d = 0; d < 16; ++d) {
    k[2 * 16 + d] += 1;
    v[2 * 16 + d] -= 2;
  }
  const auto after = reference::attention_forward(shape, q, k, v, 0.3);
  for (int token : {0, 1, 4, 5, 6}) {
    for (int d = 0; d < 16; ++d) EXPECT_EQ(after.out[token * 16 + d], before.out[token * 16 + d]) << token;
  }
  EXPECT_NE(after.out[2 * 16], before.out[2 * 16]);
  EXPECT_NE(after.out[3 * 16], before.out[3 * 16]);
}

TEST(CalibrateAttentionReference, GroupedQueryAttentionSharesKeyValueHeads) {
  Rng rng(6);
  const int tokens = 5, d = 4;
  const AttentionShape gqa{{tokens}, 4, 2, d}, mha{{tokens}, 4, 4, d};
  const auto q = random_values(tokens * 4 * d, rng), k = random_values(tokens * 2 * d, rng);
  const auto v = random_values(tokens * 2 * d, rng);
  // MHA with each KV head repeated for the two query heads that share it.
  std::vector<double> k4, v4;
  for (int t = 0; t < tokens; ++t) {
    for (int h = 0; h < 4; ++h) {
      for (int i = 0; i < d; ++i) {
        k4.push_back(k[(t * 2 + h / 2) * d + i]);
        v4.push_back(v[(t * 2 + h / 2) * d + i]);
      }
    }
  }
  const auto a = reference::attention_forward(gqa, q, k, v, 0.5);
  const auto b = reference::attention_forward(mha, q, k4, v4, 0.5);
  for (std::size_t i = 0; i < a.out.size(); ++i) EXPECT_NEAR(a.out[i], b.out[i], 1e-14);
}

TEST(CalibrateAttentionReference, BackwardMatchesFiniteDifferences) {
  Rng rng(7);
  const AttentionShape shape{{3, 5}, 4, 2, 8};
  const std::size_t qn = 8 * 4 * 8, kvn = 8 * 2 * 8;
  const auto q = random_values(qn, rng), k = random_values(kvn, rng), v = random_values(kvn, rng);
  const auto dout = random_values(qn, rng);
  const double scale = 0.35;
  const auto g = reference::attention_backward(shape, q, k, v, dout, scale);
  // L = sum(dout * out): its gradient is what the backward returns.
  const auto loss_q = [&](const std::vector<double>& x) {
    return dot(dout, reference::attention_forward(shape, x, k, v, scale).out);
  };
  const auto loss_k = [&](const std::vector<double>& x) {
    return dot(dout, reference::attention_forward(shape, q, x, v, scale).out);
  };
  const auto loss_v = [&](const std::vector<double>& x) {
    return dot(dout, reference::attention_forward(shape, q, k, x, scale).out);
  };
  EXPECT_LT(reference::relative_l2_error(g.dq, numeric_gradient(loss_q, q)), 1e-7);
  EXPECT_LT(reference::relative_l2_error(g.dk, numeric_gradient(loss_k, k)), 1e-7);
  EXPECT_LT(reference::relative_l2_error(g.dv, numeric_gradient(loss_v, v)), 1e-7);
}

TEST(CalibrateLayerReference, RmsNormForwardAndBackward) {
  Rng rng(8);
  const int width = 6;
  const auto x = random_values(3 * width, rng, 2), w = random_values(width, rng), dy = random_values(3 * width, rng);
  const auto y = reference::rms_norm(x, w, width, 1e-6);
  double squares = 0;
  for (int i = 0; i < width; ++i) squares += x[i] * x[i];
  EXPECT_NEAR(y[1], x[1] / std::sqrt(squares / width + 1e-6) * w[1], 1e-14);
  const auto g = reference::rms_norm_backward(x, w, dy, width, 1e-6);
  const auto loss_x = [&](const std::vector<double>& v) { return dot(dy, reference::rms_norm(v, w, width, 1e-6)); };
  const auto loss_w = [&](const std::vector<double>& v) { return dot(dy, reference::rms_norm(x, v, width, 1e-6)); };
  EXPECT_LT(reference::relative_l2_error(g.dx, numeric_gradient(loss_x, x)), 1e-7);
  EXPECT_LT(reference::relative_l2_error(g.dweight, numeric_gradient(loss_w, w)), 1e-7);
}

TEST(CalibrateLayerReference, RotaryTurnsPairsByPositionTimesFrequency) {
  // head_dim 4: pairs (0, 2) at frequency 1 and (1, 3) at base^(-1/2) = 0.01 for base 1e4.
  const std::vector<double> x = {1, 1, 0, 0};
  const std::vector<int> pos = {3};
  const auto y = reference::rotary(x, pos, 1, 4, 1e4, false);
  EXPECT_NEAR(y[0], std::cos(3.0), 1e-15);
  EXPECT_NEAR(y[2], std::sin(3.0), 1e-15);
  EXPECT_NEAR(y[1], std::cos(0.03), 1e-15);
  EXPECT_NEAR(y[3], std::sin(0.03), 1e-15);
  Rng rng(9);
  const std::vector<int> positions = {0, 5, 1000};
  const auto v = random_values(3 * 2 * 8, rng);
  const auto turned = reference::rotary(v, positions, 2, 8, 1e4, false);
  EXPECT_NEAR(dot(turned, turned), dot(v, v), 1e-12);  // a rotation keeps the norm
  EXPECT_LT(reference::relative_l2_error(reference::rotary(turned, positions, 2, 8, 1e4, true), v), 1e-14);
  for (int i = 0; i < 16; ++i) EXPECT_DOUBLE_EQ(turned[i], v[i]);  // position 0 does not move
}

TEST(CalibrateLayerReference, SwigluForwardAndBackward) {
  Rng rng(10);
  const int ffn = 5;
  const auto gu = random_values(2 * 2 * ffn, rng, 3), dout = random_values(2 * ffn, rng);
  const auto out = reference::swiglu(gu, ffn);
  EXPECT_NEAR(out[1], gu[1] / (1 + std::exp(-gu[1])) * gu[ffn + 1], 1e-15);
  const auto loss = [&](const std::vector<double>& v) { return dot(dout, reference::swiglu(v, ffn)); };
  EXPECT_LT(reference::relative_l2_error(reference::swiglu_backward(gu, dout, ffn), numeric_gradient(loss, gu)), 1e-7);
}

TEST(CalibrateLayerReference, MatmulTransposes) {
  const std::vector<double> a = {1, 2, 3, 4, 5, 6};  // [2][3], or [3][2] when transposed
  const std::vector<double> b = {1, 0, 0, 1, 1, 1};  // [3][2], or [2][3]
  EXPECT_EQ(reference::matmul(a, b, 2, 2, 3, false, false), (std::vector<double>{4, 5, 10, 11}));
  // A^T: a stored [3][2] = {{1,2},{3,4},{5,6}}, A = {{1,3,5},{2,4,6}}; B^T: b stored [2][3], B = {{1,1},{0,1},{0,1}}
  EXPECT_EQ(reference::matmul(a, b, 2, 2, 3, true, true), (std::vector<double>{1, 9, 2, 12}));
  EXPECT_THROW(reference::matmul(a, b, 2, 2, 2, false, false), std::invalid_argument);
}

TEST(CalibrateLayerReference, RelativeErrorFlagsNaN) {
  EXPECT_DOUBLE_EQ(reference::relative_l2_error(std::vector<double>{3, 4}, std::vector<double>{3, 0}), 4.0 / 3.0);
  EXPECT_TRUE(
      std::isnan(reference::relative_l2_error(std::vector<double>{std::nan(""), 1}, std::vector<double>{1, 1})));
  EXPECT_EQ(reference::relative_l2_error(std::vector<double>{0, 0}, std::vector<double>{0, 0}), 0);
}

TEST(CalibrateMemoryTracker, LiveBytesAndHighWaterMark) {
  kernels::MemoryTracker t;
  EXPECT_EQ(kernels::MemoryTracker::rounded(1), 512u);
  EXPECT_EQ(kernels::MemoryTracker::rounded(1024), 1024u);
  t.on_allocate(1000);
  t.on_allocate(3000);
  t.on_free(1000);
  EXPECT_EQ(t.live_bytes(), 3000u);
  EXPECT_EQ(t.peak_bytes(), 4000u);
  t.reset_peak();
  EXPECT_EQ(t.peak_bytes(), 3000u);
  t.on_allocate(500);
  EXPECT_EQ(t.peak_bytes(), 3500u);
  EXPECT_THROW(t.on_free(10000), std::logic_error);
}

TEST(CalibrateGpuKind, MatchesTheSxmPartsOnly) {
  EXPECT_EQ(match_gpu_kind("NVIDIA H100 80GB HBM3"), "H100-SXM");
  EXPECT_EQ(match_gpu_kind("NVIDIA H200"), "H200");
  EXPECT_EQ(match_gpu_kind("NVIDIA A800-SXM4-80GB"), "A800");
  EXPECT_EQ(match_gpu_kind("NVIDIA H100 PCIe"), "");
  EXPECT_EQ(match_gpu_kind("NVIDIA H100 NVL"), "");
  EXPECT_EQ(match_gpu_kind("NVIDIA A100-SXM4-80GB"), "");
}

}  // namespace calibrate_reference_test
}  // namespace lcsim
