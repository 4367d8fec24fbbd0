#include "kernels/reference.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace lcsim::reference {

std::uint16_t float_to_bf16_bits(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  if (std::isnan(value)) return static_cast<std::uint16_t>((bits >> 16) | 0x40);  // keep it a (quiet) NaN
  // Round to nearest, ties to even, on the 16 bits dropped.
  const std::uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

float bf16_bits_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

double round_to_bf16(double value) {
  return bf16_bits_to_float(float_to_bf16_bits(static_cast<float>(value)));
}

int AttentionShape::total_tokens() const {
  int total = 0;
  for (int s : seqlens) total += s;
  return total;
}

std::vector<int> AttentionShape::cu_seqlens() const {
  std::vector<int> cu = {0};
  for (int s : seqlens) cu.push_back(cu.back() + s);
  return cu;
}

namespace {

void check_size(std::size_t got, std::size_t want, const char* what) {
  if (got != want) {
    throw std::invalid_argument(std::string("reference: ") + what + " has " + std::to_string(got) +
                                " elements, expected " + std::to_string(want));
  }
}

struct Indexer {
  const AttentionShape& shape;
  std::size_t q(int token, int head, int d) const {
    return (static_cast<std::size_t>(token) * shape.heads + head) * shape.head_dim + d;
  }
  std::size_t kv(int token, int head, int d) const {
    return (static_cast<std::size_t>(token) * shape.kv_heads + head) * shape.head_dim + d;
  }
};

void check_shape(const AttentionShape& shape, std::size_t q, std::size_t k, std::size_t v) {
  if (shape.heads < 1 || shape.kv_heads < 1 || shape.head_dim < 1 || shape.heads % shape.kv_heads != 0) {
    throw std::invalid_argument("reference: heads must be a positive multiple of kv_heads");
  }
  for (int s : shape.seqlens) {
    if (s < 0) throw std::invalid_argument("reference: negative sequence length");
  }
  const auto tokens = static_cast<std::size_t>(shape.total_tokens());
  check_size(q, tokens * shape.heads * shape.head_dim, "q");
  check_size(k, tokens * shape.kv_heads * shape.head_dim, "k");
  check_size(v, tokens * shape.kv_heads * shape.head_dim, "v");
}

/// Softmax row of query `token` over keys [start, token], with its log-sum-exp.
std::vector<double> softmax_row(const AttentionShape& shape, std::span<const double> q, std::span<const double> k,
                                double scale, int start, int token, int head, double& lse) {
  const Indexer at{shape};
  const int kv_head = head / (shape.heads / shape.kv_heads);
  std::vector<double> p;
  double max_score = -std::numeric_limits<double>::infinity();
  for (int key = start; key <= token; ++key) {
    double dot = 0;
    for (int d = 0; d < shape.head_dim; ++d) dot += q[at.q(token, head, d)] * k[at.kv(key, kv_head, d)];
    p.push_back(dot * scale);
    max_score = std::max(max_score, p.back());
  }
  double sum = 0;
  for (double& x : p) {
    x = std::exp(x - max_score);
    sum += x;
  }
  for (double& x : p) x /= sum;
  lse = max_score + std::log(sum);
  return p;
}

}  // namespace

AttentionForward attention_forward(const AttentionShape& shape, std::span<const double> q, std::span<const double> k,
                                   std::span<const double> v, double scale) {
  check_shape(shape, q.size(), k.size(), v.size());
  const Indexer at{shape};
  const int tokens = shape.total_tokens();
  AttentionForward result;
  result.out.assign(q.size(), 0.0);
  result.lse.assign(static_cast<std::size_t>(tokens) * shape.heads, 0.0);
  const auto cu = shape.cu_seqlens();
  for (std::size_t s = 0; s < shape.seqlens.size(); ++s) {
    for (int token = cu[s]; token < cu[s + 1]; ++token) {
      for (int h = 0; h < shape.heads; ++h) {
        const int kv_head = h / (shape.heads / shape.kv_heads);
        double lse = 0;
        const auto p = softmax_row(shape, q, k, scale, cu[s], token, h, lse);
        result.lse[static_cast<std::size_t>(h) * tokens + token] = lse;
        for (int key = cu[s]; key <= token; ++key) {
          for (int d = 0; d < shape.head_dim; ++d) {
            result.out[at.q(token, h, d)] += p[key - cu[s]] * v[at.kv(key, kv_head, d)];
          }
        }
      }
    }
  }
  return result;
}

AttentionGradients attention_backward(const AttentionShape& shape, std::span<const double> q, std::span<const double> k,
                                      std::span<const double> v, std::span<const double> dout, double scale) {
  check_shape(shape, q.size(), k.size(), v.size());
  check_size(dout.size(), q.size(), "dout");
  const Indexer at{shape};
  AttentionGradients g{std::vector<double>(q.size()), std::vector<double>(k.size()), std::vector<double>(v.size())};
  const auto cu = shape.cu_seqlens();
  for (std::size_t s = 0; s < shape.seqlens.size(); ++s) {
    for (int token = cu[s]; token < cu[s + 1]; ++token) {
      for (int h = 0; h < shape.heads; ++h) {
        const int kv_head = h / (shape.heads / shape.kv_heads);
        double lse = 0;
        const auto p = softmax_row(shape, q, k, scale, cu[s], token, h, lse);
        // dP_j = dO . v_j; dS_j = P_j (dP_j - sum_i P_i dP_i).
        std::vector<double> dp(p.size());
        double weighted = 0;
        for (int key = cu[s]; key <= token; ++key) {
          double dot = 0;
          for (int d = 0; d < shape.head_dim; ++d) dot += dout[at.q(token, h, d)] * v[at.kv(key, kv_head, d)];
          dp[key - cu[s]] = dot;
          weighted += p[key - cu[s]] * dot;
        }
        for (int key = cu[s]; key <= token; ++key) {
          const double pj = p[key - cu[s]];
          const double ds = pj * (dp[key - cu[s]] - weighted);
          for (int d = 0; d < shape.head_dim; ++d) {
            g.dq[at.q(token, h, d)] += scale * ds * k[at.kv(key, kv_head, d)];
            g.dk[at.kv(key, kv_head, d)] += scale * ds * q[at.q(token, h, d)];
            g.dv[at.kv(key, kv_head, d)] += pj * dout[at.q(token, h, d)];
          }
        }
      }
    }
  }
  return g;
}

std::vector<double> rms_norm(std::span<const double> x, std::span<const double> weight, int width, double eps) {
  check_size(weight.size(), static_cast<std::size_t>(width), "rms_norm weight");
  if (width < 1 || x.size() % static_cast<std::size_t>(width) != 0) throw std::invalid_argument("rms_norm: width");
  std::vector<double> y(x.size());
  for (std::size_t row = 0; row < x.size() / width; ++row) {
    double squares = 0;
    for (int i = 0; i < width; ++i) squares += x[row * width + i] * x[row * width + i];
    const double r = 1 / std::sqrt(squares / width + eps);
    for (int i = 0; i < width; ++i) y[row * width + i] = x[row * width + i] * r * weight[i];
  }
  return y;
}

RmsNormGradients rms_norm_backward(std::span<const double> x, std::span<const double> weight,
                                   std::span<const double> dy, int width, double eps) {
  check_size(dy.size(), x.size(), "rms_norm dy");
  check_size(weight.size(), static_cast<std::size_t>(width), "rms_norm weight");
  RmsNormGradients g{std::vector<double>(x.size()), std::vector<double>(static_cast<std::size_t>(width))};
  for (std::size_t row = 0; row < x.size() / width; ++row) {
    const double* xr = x.data() + row * width;
    const double* dyr = dy.data() + row * width;
    double squares = 0;
    double projection = 0;  // sum_i dy_i w_i x_i
    for (int i = 0; i < width; ++i) {
      squares += xr[i] * xr[i];
      projection += dyr[i] * weight[i] * xr[i];
    }
    const double r = 1 / std::sqrt(squares / width + eps);
    for (int i = 0; i < width; ++i) {
      g.dx[row * width + i] = r * dyr[i] * weight[i] - xr[i] * r * r * r * projection / width;
      g.dweight[i] += dyr[i] * xr[i] * r;
    }
  }
  return g;
}

std::vector<double> rotary(std::span<const double> x, std::span<const int> positions, int heads, int head_dim,
                           double base, bool inverse) {
  const std::size_t width = static_cast<std::size_t>(heads) * head_dim;
  check_size(x.size(), positions.size() * width, "rotary x");
  if (head_dim % 2 != 0) throw std::invalid_argument("rotary: odd head_dim");
  std::vector<double> y(x.size());
  const int half = head_dim / 2;
  for (std::size_t token = 0; token < positions.size(); ++token) {
    for (int h = 0; h < heads; ++h) {
      const double* xr = x.data() + token * width + static_cast<std::size_t>(h) * head_dim;
      double* yr = y.data() + token * width + static_cast<std::size_t>(h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const double angle = positions[token] * std::pow(base, -2.0 * i / head_dim) * (inverse ? -1 : 1);
        const double c = std::cos(angle);
        const double s = std::sin(angle);
        yr[i] = xr[i] * c - xr[i + half] * s;
        yr[i + half] = xr[i + half] * c + xr[i] * s;
      }
    }
  }
  return y;
}

namespace {
double sigmoid(double x) {
  return 1 / (1 + std::exp(-x));
}
}  // namespace

std::vector<double> swiglu(std::span<const double> gate_up, int ffn) {
  const std::size_t width = 2 * static_cast<std::size_t>(ffn);
  if (ffn < 1 || gate_up.size() % width != 0) throw std::invalid_argument("swiglu: size");
  std::vector<double> out(gate_up.size() / 2);
  for (std::size_t row = 0; row < gate_up.size() / width; ++row) {
    for (int i = 0; i < ffn; ++i) {
      const double gate = gate_up[row * width + i];
      out[row * ffn + i] = gate * sigmoid(gate) * gate_up[row * width + ffn + i];
    }
  }
  return out;
}

std::vector<double> swiglu_backward(std::span<const double> gate_up, std::span<const double> dout, int ffn) {
  const std::size_t width = 2 * static_cast<std::size_t>(ffn);
  check_size(dout.size(), gate_up.size() / 2, "swiglu dout");
  std::vector<double> grad(gate_up.size());
  for (std::size_t row = 0; row < gate_up.size() / width; ++row) {
    for (int i = 0; i < ffn; ++i) {
      const double gate = gate_up[row * width + i];
      const double up = gate_up[row * width + ffn + i];
      const double sg = sigmoid(gate);
      const double d = dout[row * ffn + i];
      grad[row * width + i] = d * up * sg * (1 + gate * (1 - sg));
      grad[row * width + ffn + i] = d * gate * sg;
    }
  }
  return grad;
}

std::vector<double> matmul(std::span<const double> a, std::span<const double> b, int m, int n, int k, bool trans_a,
                           bool trans_b) {
  check_size(a.size(), static_cast<std::size_t>(m) * k, "matmul a");
  check_size(b.size(), static_cast<std::size_t>(k) * n, "matmul b");
  std::vector<double> c(static_cast<std::size_t>(m) * n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int l = 0; l < k; ++l) {
        const double av = trans_a ? a[static_cast<std::size_t>(l) * m + i] : a[static_cast<std::size_t>(i) * k + l];
        const double bv = trans_b ? b[static_cast<std::size_t>(j) * k + l] : b[static_cast<std::size_t>(l) * n + j];
        sum += av * bv;
      }
      c[static_cast<std::size_t>(i) * n + j] = sum;
    }
  }
  return c;
}

double relative_l2_error(std::span<const double> x, std::span<const double> ref) {
  check_size(x.size(), ref.size(), "relative_l2_error");
  double diff = 0;
  double norm = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    diff += (x[i] - ref[i]) * (x[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  if (std::isnan(diff)) return diff;
  if (norm == 0) return diff == 0 ? 0 : std::numeric_limits<double>::infinity();
  return std::sqrt(diff / norm);
}

}  // namespace lcsim::reference
