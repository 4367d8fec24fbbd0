#include "calibrate/measure/selftest.hpp"

#include <cmath>
#include <cstring>
#include <iomanip>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/device_arena.hpp"
#include "kernels/gemm.hpp"
#include "kernels/layer_ops.hpp"
#include "kernels/layer_proxy.hpp"
#include "kernels/reference.hpp"
#include "model/model.hpp"

namespace lcsim::gpu {
namespace {

using kernels::bf16;
using kernels::check_cuda;
using kernels::DeviceBuffer;

constexpr double kForwardTolerance = 1e-2;
constexpr double kGradientTolerance = 2e-2;
constexpr double kReferenceTolerance = 1e-4;  // FP32 naive kernel vs double CPU
constexpr double kLseTolerance = 2e-3;        // absolute, natural-log units
constexpr double kRecomputeTolerance = 5e-3;  // same kernels, only the dQ atomics' order differs
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

class Checker {
 public:
  Checker(std::ostream& out, cudaStream_t stream) : out_(out), stream_(stream) {
    out_ << std::left << std::setw(58) << "# check" << std::right << std::setw(12) << "error" << std::setw(10)
         << "limit"
         << "  result\n";
  }
  void expect_below(const std::string& what, double error, double limit) {
    const bool ok = error <= limit;  // NaN fails
    passed_ = passed_ && ok;
    out_ << std::left << std::setw(58) << what << std::right << std::setw(12) << std::scientific << std::setprecision(2)
         << error << std::setw(10) << limit << std::defaultfloat << "  " << (ok ? "ok" : "FAIL") << "\n";
  }
  bool passed() const { return passed_; }

  std::vector<double> bf16_to_host(const bf16* device, std::size_t count) const {
    std::vector<std::uint16_t> bits(count);
    check_cuda(cudaMemcpyAsync(bits.data(), device, count * 2, cudaMemcpyDeviceToHost, stream_), "selftest copy");
    check_cuda(cudaStreamSynchronize(stream_), "selftest copy");
    std::vector<double> out(count);
    for (std::size_t i = 0; i < count; ++i) out[i] = reference::bf16_bits_to_float(bits[i]);
    return out;
  }
  std::vector<double> f32_to_host(const float* device, std::size_t count) const {
    std::vector<float> values(count);
    check_cuda(cudaMemcpyAsync(values.data(), device, count * 4, cudaMemcpyDeviceToHost, stream_), "selftest copy");
    check_cuda(cudaStreamSynchronize(stream_), "selftest copy");
    return {values.begin(), values.end()};
  }
  std::vector<std::uint16_t> raw_bits(const bf16* device, std::size_t count) const {
    std::vector<std::uint16_t> bits(count);
    check_cuda(cudaMemcpyAsync(bits.data(), device, count * 2, cudaMemcpyDeviceToHost, stream_), "selftest copy");
    check_cuda(cudaStreamSynchronize(stream_), "selftest copy");
    return bits;
  }

 private:
  std::ostream& out_;
  cudaStream_t stream_;
  bool passed_ = true;
};

/// Rows of `width` elements starting at column `offset` of a [rows][stride] host matrix.
std::vector<double> columns(const std::vector<double>& packed, std::size_t rows, std::size_t stride, std::size_t offset,
                            std::size_t width) {
  std::vector<double> out;
  out.reserve(rows * width);
  for (std::size_t r = 0; r < rows; ++r) {
    out.insert(out.end(), packed.begin() + static_cast<std::ptrdiff_t>(r * stride + offset),
               packed.begin() + static_cast<std::ptrdiff_t>(r * stride + offset + width));
  }
  return out;
}

double max_abs_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(a[i] - b[i]);
    if (std::isnan(d)) return d;
    worst = std::max(worst, d);
  }
  return worst;
}

struct AttentionCase {
  std::string name;
  std::vector<int> seqlens;
  int heads, kv_heads, head_dim;
  bool cpu;     // also against the CPU reference (small sizes only)
  bool packed;  // q, k, v in one [tokens][q + 2 kv] buffer, as the layer proxy keeps them
};

void check_attention(Checker& check, const AttentionCase& c, kernels::DeviceArena& arena, std::uint64_t& seed,
                     cudaStream_t stream) {
  reference::AttentionShape shape{c.seqlens, c.heads, c.kv_heads, c.head_dim};
  const int tokens = shape.total_tokens();
  const auto t = static_cast<std::size_t>(tokens);
  const int qw = c.heads * c.head_dim, kvw = c.kv_heads * c.head_dim;
  const std::size_t qn = t * qw, kvn = t * kvw;
  int max_seqlen = 0;
  for (int s : c.seqlens) max_seqlen = std::max(max_seqlen, s);
  const auto cu = shape.cu_seqlens();
  DeviceBuffer cu_dev = arena.allocate(cu.size() * sizeof(int));
  check_cuda(cudaMemcpyAsync(cu_dev.as<void>(), cu.data(), cu.size() * sizeof(int), cudaMemcpyHostToDevice, stream),
             "cu_seqlens");
  check_cuda(cudaStreamSynchronize(stream), "cu_seqlens");

  // Inputs: separate tensors, or one packed QKV buffer with row stride q + 2 kv.
  const int stride_in = c.packed ? qw + 2 * kvw : 0;
  DeviceBuffer qkv = arena.allocate(t * static_cast<std::size_t>(qw + 2 * kvw) * 2);
  kernels::fill_uniform(qkv.as<bf16>(), static_cast<std::int64_t>(t) * (qw + 2 * kvw), seed++, 1.f, stream);
  bf16* base = qkv.as<bf16>();
  const bf16* q = base;
  const bf16* k = c.packed ? base + qw : base + qn;
  const bf16* v = c.packed ? base + qw + kvw : base + qn + kvn;
  const std::int64_t q_stride = c.packed ? stride_in : qw;
  const std::int64_t kv_stride = c.packed ? stride_in : kvw;
  DeviceBuffer dout = arena.allocate(qn * 2);
  kernels::fill_uniform(dout.as<bf16>(), static_cast<std::int64_t>(qn), seed++, 1.f, stream);

  DeviceBuffer out = arena.allocate(qn * 2), lse = arena.allocate(t * c.heads * 4);
  DeviceBuffer dq = arena.allocate(qn * 2), dk = arena.allocate(kvn * 2), dv = arena.allocate(kvn * 2);
  for (auto* b : {&out, &dq, &dk, &dv}) {
    kernels::fill_value(b->as<bf16>(), static_cast<std::int64_t>(b->bytes() / 2), kNaN, stream);
  }
  const kernels::VarlenLayout layout{cu_dev.as<int>(), static_cast<int>(c.seqlens.size()), tokens, max_seqlen};
  const kernels::AttentionDims dims{c.heads, c.kv_heads, c.head_dim};
  const float scale = 1.f / std::sqrt(static_cast<float>(c.head_dim));
  kernels::AttentionForwardArgs f;
  f.layout = layout;
  f.dims = dims;
  f.q = {q, q_stride};
  f.k = {k, kv_stride};
  f.v = {v, kv_stride};
  f.out = {out.as<bf16>(), qw};
  f.lse = lse.as<float>();
  f.softmax_scale = scale;
  kernels::attention_forward(f, stream);
  kernels::AttentionBackwardArgs b;
  b.layout = layout;
  b.dims = dims;
  b.q = f.q;
  b.k = f.k;
  b.v = f.v;
  b.out = {out.as<bf16>(), qw};
  b.dout = {dout.as<bf16>(), qw};
  b.lse = lse.as<float>();
  b.dq = {dq.as<bf16>(), qw};
  b.dk = {dk.as<bf16>(), kvw};
  b.dv = {dv.as<bf16>(), kvw};
  b.softmax_scale = scale;
  DeviceBuffer workspace = arena.allocate(kernels::attention_backward_workspace_bytes(layout, dims));
  kernels::attention_backward(b, workspace.as<void>(), stream);
  check_cuda(cudaStreamSynchronize(stream), "selftest attention");

  DeviceBuffer ref_out = arena.allocate(qn * 4), ref_lse = arena.allocate(t * c.heads * 4);
  DeviceBuffer ref_dq = arena.allocate(qn * 4), ref_dk = arena.allocate(kvn * 4), ref_dv = arena.allocate(kvn * 4);
  kernels::naive_attention_forward(f, ref_out.as<float>(), ref_lse.as<float>(), stream);
  kernels::naive_attention_backward(b, ref_dq.as<float>(), ref_dk.as<float>(), ref_dv.as<float>(), stream);

  const auto h_out = check.bf16_to_host(out.as<bf16>(), qn);
  const auto h_lse = check.f32_to_host(lse.as<float>(), t * c.heads);
  const auto h_dq = check.bf16_to_host(dq.as<bf16>(), qn);
  const auto h_dk = check.bf16_to_host(dk.as<bf16>(), kvn);
  const auto h_dv = check.bf16_to_host(dv.as<bf16>(), kvn);
  const auto n_out = check.f32_to_host(ref_out.as<float>(), qn);
  const auto n_lse = check.f32_to_host(ref_lse.as<float>(), t * c.heads);
  const auto n_dq = check.f32_to_host(ref_dq.as<float>(), qn);
  const auto n_dk = check.f32_to_host(ref_dk.as<float>(), kvn);
  const auto n_dv = check.f32_to_host(ref_dv.as<float>(), kvn);
  const std::string name = "attention " + c.name + ": ";
  check.expect_below(name + "out vs naive", reference::relative_l2_error(h_out, n_out), kForwardTolerance);
  check.expect_below(name + "lse vs naive (max abs)", max_abs_difference(h_lse, n_lse), kLseTolerance);
  check.expect_below(name + "dq vs naive", reference::relative_l2_error(h_dq, n_dq), kGradientTolerance);
  check.expect_below(name + "dk vs naive", reference::relative_l2_error(h_dk, n_dk), kGradientTolerance);
  check.expect_below(name + "dv vs naive", reference::relative_l2_error(h_dv, n_dv), kGradientTolerance);

  // The forward again: bitwise the same output.
  const auto first = check.raw_bits(out.as<bf16>(), qn);
  kernels::fill_value(out.as<bf16>(), static_cast<std::int64_t>(qn), kNaN, stream);
  kernels::attention_forward(f, stream);
  check_cuda(cudaStreamSynchronize(stream), "selftest attention");
  const auto second = check.raw_bits(out.as<bf16>(), qn);
  check.expect_below(name + "forward deterministic (differing elements)",
                     static_cast<double>(std::memcmp(first.data(), second.data(), first.size() * 2) != 0), 0);

  if (c.cpu) {
    const std::size_t width = static_cast<std::size_t>(qw + 2 * kvw);
    const auto all = check.bf16_to_host(base, t * width);
    std::vector<double> hq, hk, hv;
    if (c.packed) {
      hq = columns(all, t, width, 0, qw);
      hk = columns(all, t, width, qw, kvw);
      hv = columns(all, t, width, qw + kvw, kvw);
    } else {
      hq.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(qn));
      hk.assign(all.begin() + static_cast<std::ptrdiff_t>(qn), all.begin() + static_cast<std::ptrdiff_t>(qn + kvn));
      hv.assign(all.begin() + static_cast<std::ptrdiff_t>(qn + kvn),
                all.begin() + static_cast<std::ptrdiff_t>(qn + 2 * kvn));
    }
    const auto hdo = check.bf16_to_host(dout.as<bf16>(), qn);
    const auto cpu = reference::attention_forward(shape, hq, hk, hv, scale);
    const auto grads = reference::attention_backward(shape, hq, hk, hv, hdo, scale);
    check.expect_below(name + "naive out vs CPU", reference::relative_l2_error(n_out, cpu.out), kReferenceTolerance);
    check.expect_below(name + "naive dq vs CPU", reference::relative_l2_error(n_dq, grads.dq), kReferenceTolerance);
    check.expect_below(name + "naive dk vs CPU", reference::relative_l2_error(n_dk, grads.dk), kReferenceTolerance);
    check.expect_below(name + "naive dv vs CPU", reference::relative_l2_error(n_dv, grads.dv), kReferenceTolerance);
    check.expect_below(name + "out vs CPU", reference::relative_l2_error(h_out, cpu.out), kForwardTolerance);
    check.expect_below(name + "lse vs CPU (max abs)", max_abs_difference(h_lse, cpu.lse), kLseTolerance);
    check.expect_below(name + "dq vs CPU", reference::relative_l2_error(h_dq, grads.dq), kGradientTolerance);
  }
  check_cuda(cudaStreamSynchronize(stream), "selftest attention");
}

void check_layer_ops(Checker& check, kernels::DeviceArena& arena, kernels::GemmRunner& gemm, std::uint64_t& seed,
                     cudaStream_t stream) {
  const int rows = 37, width = 320, heads = 5, head_dim = 64, ffn = 96;
  const auto r = static_cast<std::size_t>(rows);
  DeviceBuffer x = arena.allocate(r * width * 2), w = arena.allocate(width * 2), dy = arena.allocate(r * width * 2);
  DeviceBuffer res = arena.allocate(r * width * 2);
  kernels::fill_uniform(x.as<bf16>(), rows * width, seed++, 2.f, stream);
  kernels::fill_uniform(w.as<bf16>(), width, seed++, 1.f, stream);
  kernels::fill_uniform(dy.as<bf16>(), rows * width, seed++, 1.f, stream);
  kernels::fill_uniform(res.as<bf16>(), rows * width, seed++, 1.f, stream);
  DeviceBuffer y = arena.allocate(r * width * 2), y2 = arena.allocate(r * width * 2), rstd = arena.allocate(r * 4);
  DeviceBuffer dx = arena.allocate(r * width * 2), dw = arena.allocate(width * 4);
  check_cuda(cudaMemsetAsync(dw.as<void>(), 0, width * 4, stream), "zero");
  kernels::rms_norm_forward(x.as<bf16>(), w.as<bf16>(), y.as<bf16>(), rstd.as<float>(), rows, width, 1e-6f, stream);
  kernels::rms_norm_apply(x.as<bf16>(), w.as<bf16>(), rstd.as<float>(), y2.as<bf16>(), rows, width, stream);
  kernels::rms_norm_backward(x.as<bf16>(), w.as<bf16>(), rstd.as<float>(), dy.as<bf16>(), res.as<bf16>(), dx.as<bf16>(),
                             dw.as<float>(), rows, width, stream);
  const auto hx = check.bf16_to_host(x.as<bf16>(), r * width);
  const auto hw = check.bf16_to_host(w.as<bf16>(), width);
  const auto hdy = check.bf16_to_host(dy.as<bf16>(), r * width);
  const auto hres = check.bf16_to_host(res.as<bf16>(), r * width);
  const auto ref_y = reference::rms_norm(hx, hw, width, 1e-6);
  auto ref_g = reference::rms_norm_backward(hx, hw, hdy, width, 1e-6);
  for (std::size_t i = 0; i < ref_g.dx.size(); ++i) ref_g.dx[i] += hres[i];
  check.expect_below("rms_norm forward",
                     reference::relative_l2_error(check.bf16_to_host(y.as<bf16>(), r * width), ref_y),
                     kForwardTolerance);
  check.expect_below("rms_norm apply (saved rstd)",
                     reference::relative_l2_error(check.bf16_to_host(y2.as<bf16>(), r * width), ref_y),
                     kForwardTolerance);
  check.expect_below("rms_norm backward dx (+ residual)",
                     reference::relative_l2_error(check.bf16_to_host(dx.as<bf16>(), r * width), ref_g.dx),
                     kForwardTolerance);
  check.expect_below("rms_norm backward dweight",
                     reference::relative_l2_error(check.f32_to_host(dw.as<float>(), width), ref_g.dweight),
                     kForwardTolerance);

  // Rotary on a [rows][heads * head_dim] tensor (width 320), positions 0..rows-1 shifted.
  std::vector<int> positions(r);
  for (std::size_t i = 0; i < r; ++i) positions[i] = static_cast<int>(3 * i + 5);
  DeviceBuffer pos = arena.allocate(r * sizeof(int));
  check_cuda(cudaMemcpyAsync(pos.as<void>(), positions.data(), r * sizeof(int), cudaMemcpyHostToDevice, stream),
             "positions");
  check_cuda(cudaStreamSynchronize(stream), "positions");
  kernels::rotary(x.as<bf16>(), width, heads, head_dim, pos.as<int>(), rows, 10000.f, false, stream);
  const auto rotated = check.bf16_to_host(x.as<bf16>(), r * width);
  check.expect_below(
      "rotary forward",
      reference::relative_l2_error(rotated, reference::rotary(hx, positions, heads, head_dim, 1e4, false)),
      kForwardTolerance);
  kernels::rotary(x.as<bf16>(), width, heads, head_dim, pos.as<int>(), rows, 10000.f, true, stream);
  check.expect_below("rotary inverse undoes forward",
                     reference::relative_l2_error(check.bf16_to_host(x.as<bf16>(), r * width), hx), kForwardTolerance);

  DeviceBuffer gu = arena.allocate(r * 2 * ffn * 2), act = arena.allocate(r * ffn * 2);
  DeviceBuffer dact = arena.allocate(r * ffn * 2), dgu = arena.allocate(r * 2 * ffn * 2);
  kernels::fill_uniform(gu.as<bf16>(), rows * 2 * ffn, seed++, 3.f, stream);
  kernels::fill_uniform(dact.as<bf16>(), rows * ffn, seed++, 1.f, stream);
  kernels::swiglu_forward(gu.as<bf16>(), act.as<bf16>(), rows, ffn, stream);
  kernels::swiglu_backward(gu.as<bf16>(), dact.as<bf16>(), dgu.as<bf16>(), rows, ffn, stream);
  const auto hgu = check.bf16_to_host(gu.as<bf16>(), r * 2 * ffn);
  check.expect_below(
      "swiglu forward",
      reference::relative_l2_error(check.bf16_to_host(act.as<bf16>(), r * ffn), reference::swiglu(hgu, ffn)),
      kForwardTolerance);
  check.expect_below(
      "swiglu backward",
      reference::relative_l2_error(check.bf16_to_host(dgu.as<bf16>(), r * 2 * ffn),
                                   reference::swiglu_backward(hgu, check.bf16_to_host(dact.as<bf16>(), r * ffn), ffn)),
      kForwardTolerance);

  const int m = 40, n = 72, k = 48;
  DeviceBuffer a = arena.allocate(m * k * 2), bm = arena.allocate(k * n * 2), c = arena.allocate(m * n * 2);
  kernels::fill_uniform(a.as<bf16>(), m * k, seed++, 1.f, stream);
  kernels::fill_uniform(bm.as<bf16>(), k * n, seed++, 1.f, stream);
  const auto ha = check.bf16_to_host(a.as<bf16>(), m * k);
  const auto hb = check.bf16_to_host(bm.as<bf16>(), k * n);
  for (int combo = 0; combo < 4; ++combo) {
    const bool ta = combo & 1, tb = combo & 2;
    gemm.gemm(m, n, k, a.as<bf16>(), ta, bm.as<bf16>(), tb, c.as<bf16>());
    const auto got = check.bf16_to_host(c.as<bf16>(), m * n);
    check.expect_below(std::string("gemm ") + (ta ? "A^T" : "A") + " x " + (tb ? "B^T" : "B"),
                       reference::relative_l2_error(got, reference::matmul(ha, hb, m, n, k, ta, tb)),
                       kForwardTolerance);
  }
  gemm.gemm(m, n, k, a.as<bf16>(), false, bm.as<bf16>(), false, c.as<bf16>(), 1.f);  // c = A B + (A^T B^T)
  auto expected = reference::matmul(ha, hb, m, n, k, false, false);
  const auto previous = reference::matmul(ha, hb, m, n, k, true, true);
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] += reference::round_to_bf16(previous[i]);
  check.expect_below("gemm accumulate (beta = 1)",
                     reference::relative_l2_error(check.bf16_to_host(c.as<bf16>(), m * n), expected),
                     kForwardTolerance);
}

void check_layer_proxy(Checker& check, kernels::DeviceArena& arena, kernels::GemmRunner& gemm, std::uint64_t& seed,
                       cudaStream_t stream) {
  const ModelConfig& model = named_model("Qwen2.5-0.5B");
  kernels::LayerProxy proxy(model, arena, gemm, seed++);
  const std::vector<int> batch = {300, 50, 7, 129};
  proxy.set_batch(batch);
  const auto snapshot = [&] {
    std::vector<std::vector<double>> grads;
    grads.push_back(check.bf16_to_host(proxy.input_grad(), static_cast<std::size_t>(proxy.tokens()) * model.hidden));
    for (const auto& g : proxy.weight_grads()) {
      grads.push_back(check.bf16_to_host(g.data, static_cast<std::size_t>(g.elements)));
    }
    return grads;
  };
  proxy.zero_weight_grads();
  proxy.run(1, Recompute::None);
  const auto none = snapshot();
  double norm = 0;
  for (double v : none[0]) norm += v * v;
  check.expect_below("layer proxy: input gradient finite and non-zero (1 if not)",
                     std::isfinite(norm) && norm > 0 ? 0.0 : 1.0, 0);
  const char* names[] = {"dx", "dWqkv", "dWo", "dWgate_up", "dWdown"};
  for (auto mode : {Recompute::Selective, Recompute::Full}) {
    proxy.zero_weight_grads();
    proxy.run(1, mode);
    const auto other = snapshot();
    for (std::size_t i = 0; i < none.size(); ++i) {
      check.expect_below(
          "layer proxy: " + std::string(names[i]) + ", recompute " + std::string(to_string(mode)) + " vs none",
          reference::relative_l2_error(other[i], none[i]), kRecomputeTolerance);
    }
  }
  check_cuda(cudaStreamSynchronize(stream), "selftest layer proxy");
}

}  // namespace

bool run_selftest(std::uint64_t seed, cudaStream_t stream, std::ostream& out) {
  out << "lcsim-gpu selftest, seed " << seed << "\n";
  Checker check(out, stream);
  kernels::DeviceArena arena;
  kernels::GemmRunner gemm(stream);
  const std::vector<AttentionCase> cases = {
      {"GQA 4/2 d64 small", {1, 17, 64, 65, 130}, 4, 2, 64, true, false},
      {"MQA 4/1 d128 small", {100, 300, 7}, 4, 1, 128, true, false},
      {"GQA 8/2 d128 packed QKV", {257, 31, 128}, 8, 2, 128, true, true},
      {"Qwen2.5-0.5B 14/2 d64", {2048, 1000, 513, 64, 1, 470}, 14, 2, 64, false, false},
      {"Qwen2.5-7B 28/4 d128", {2048, 1000, 513, 64, 1, 470}, 28, 4, 128, false, true},
      {"MHA 32/32 d128", {1500, 600}, 32, 32, 128, false, false},
  };
  for (const auto& c : cases) check_attention(check, c, arena, seed, stream);
  check_layer_ops(check, arena, gemm, seed, stream);
  check_layer_proxy(check, arena, gemm, seed, stream);
  out << (check.passed() ? "selftest passed\n" : "selftest FAILED\n");
  return check.passed();
}

}  // namespace lcsim::gpu
