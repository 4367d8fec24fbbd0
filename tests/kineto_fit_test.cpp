// A profile from Kineto traces: synthetic traces made from known efficiencies, collective latencies and
// bandwidths must give them back through the calibration's fits; what a trace lacks keeps the prior and says why;
// the command line writes a loadable profile and exits 2 on bad traces.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "base/errors.hpp"
#include "calibrate/fit/default_profile.hpp"
#include "calibrate/fit/profile_fit.hpp"
#include "calibrate/kineto/kineto_fit.hpp"
#include "calibrate/kineto/kineto_kernels.hpp"
#include "model/cost_model.hpp"
#include "model/model.hpp"
#include "studies/validation_catalogue.hpp"
#include "tests/command_run_support.hpp"

namespace lcsim {
namespace kineto_fit_test {

using testing::contains;
using testing::run_command;

constexpr std::uint64_t kMainThread = 1, kAutogradThread = 2;

Profile h100_prior() {
  return derive_default_profile(named_gpu("H100-SXM"));
}

/// One step [0, 1e9) on the main thread; ops and kernels added with add().
struct Builder {
  KinetoTrace t;
  double clock = 10;
  Builder() {
    t.file = "synthetic.json";
    t.step_thread = kMainThread;
    t.steps.push_back({1, 0, 1e9});
  }
  void add(KinetoCpuOp op, const std::string& family, double dur_us, std::optional<KinetoCollective> meta = {},
           std::uint64_t tid = kMainThread) {
    op.tid = tid;
    op.ts_us = clock;
    t.ops.push_back(std::move(op));
    KinetoKernel k;
    k.name = family + "_kernel";
    k.family = family;
    k.ts_us = clock;
    k.dur_us = dur_us;
    k.op = static_cast<int>(t.ops.size()) - 1;
    k.step = 0;
    k.collective = std::move(meta);
    t.kernels.push_back(k);
    clock += dur_us + 5;  // 5 us idle after every kernel
  }
};

KinetoCpuOp mm(double m, double n, double k, const std::string& type = "c10::BFloat16") {
  KinetoCpuOp op;
  op.name = "aten::mm";
  op.input_dims = {{static_cast<std::int64_t>(m), static_cast<std::int64_t>(k)},
                   {static_cast<std::int64_t>(k), static_cast<std::int64_t>(n)}};
  op.input_types = {type, type};
  return op;
}

double gemm_truth(double tokens) {
  return 0.2 + 0.1 * std::log2(tokens / 128);
}  // 0.2 at 128 .. 0.9 at 16384

const TraceFieldLine& line(const TraceFit& f, const std::string& field) {
  for (const auto& l : f.report) {
    if (l.field == field) return l;
  }
  throw std::runtime_error("no report line " + field);
}

TEST(KinetoFit, GemmEfficiencyRecovered) {
  Builder b;
  const double peak = h100_prior().compute.peak_tflops * 1e12;
  std::vector<double> tokens;
  for (double t = 128; t <= 16384; t *= 2) tokens.push_back(t);
  for (double t : tokens) {
    const double flops = 2 * t * 4096 * 4096;
    b.add(mm(t, 4096, 4096), "gemm", flops / (gemm_truth(t) * peak) * 1e6);
    b.add(mm(t, 4096, 4096), "gemm", flops / (gemm_truth(t) * peak) * 1e6);  // a second call: median
  }
  // Decoys that a wrong implementation would count: a backward matmul, an FP32 one, a non-matmul GEMM kernel.
  b.add(mm(1024, 4096, 4096), "gemm", 1e6, {}, kAutogradThread);
  b.add(mm(1024, 4096, 4096, "float"), "gemm", 1e6);
  KinetoCpuOp conv;
  conv.name = "aten::cudnn_convolution";
  b.add(conv, "gemm", 1e6);
  const auto fit = fit_profile_from_traces({b.t}, h100_prior());
  const auto& c = fit.profile.compute.gemm_efficiency;
  ASSERT_EQ(c.x, tokens);
  for (std::size_t i = 0; i < tokens.size(); ++i) EXPECT_NEAR(c.y[i], gemm_truth(tokens[i]), 1e-9) << tokens[i];
  const auto& l = line(fit, "compute.gemm_efficiency");
  EXPECT_TRUE(l.fitted);
  EXPECT_EQ(l.points, 8);
  EXPECT_EQ(l.held_out, 2);  // every 3rd point (i % 3 == 1, never the last) of 8
  ASSERT_TRUE(l.held_out_mape);
  // Linear in log(tokens): interpolation in log(x) is exact.
  EXPECT_LT(*l.held_out_mape, 1e-9);
  EXPECT_TRUE(contains(l.detail, "1 backward, 1 without matmul Input Dims, 1 not BF16/FP16"));
}

// One or two token counts cannot be held out, and a curve through them would be flat beyond them: the prior's
// curve keeps its shape, scaled through them.
TEST(KinetoFit, FewTokenCountsScaleThePriorCurve) {
  Builder b;
  const Profile prior = h100_prior();
  const double peak = prior.compute.peak_tflops * 1e12;
  const double at = prior.compute.gemm_efficiency.at(4096);
  // Measured at 4096 tokens: 80 % of what the prior says there.
  b.add(mm(4096, 4096, 4096), "gemm", 2.0 * 4096 * 4096 * 4096 / (0.8 * at * peak) * 1e6);
  const auto fit = fit_profile_from_traces({b.t}, prior);
  const auto& c = fit.profile.compute.gemm_efficiency;
  ASSERT_EQ(c.x, prior.compute.gemm_efficiency.x);
  for (std::size_t i = 0; i < c.y.size(); ++i) {
    EXPECT_NEAR(c.y[i], std::min(1.0, 0.8 * prior.compute.gemm_efficiency.y[i]), 1e-9);
  }
  EXPECT_FALSE(c.fit_mape);
  const auto& l = line(fit, "compute.gemm_efficiency");
  EXPECT_TRUE(l.fitted);
  EXPECT_TRUE(contains(l.detail, "1 point(s): the prior's curve scaled by 0.800"));
}

TEST(KinetoFit, AttentionEfficiencyRecovered) {
  Builder b;
  const double peak = h100_prior().compute.peak_tflops * 1e12;
  std::vector<double> lens{512, 1024, 2048, 4096, 8192};
  for (double s : lens) {
    const double eff = 0.3 + 0.05 * std::log2(s / 512);
    KinetoCpuOp op;
    op.name = "aten::_scaled_dot_product_flash_attention";
    op.input_dims = {{2, 32, static_cast<std::int64_t>(s), 128}};
    op.concrete_inputs = {"", "", "", "0.0", "True", "False", ""};
    b.add(op, "attention", 2 * 2 * s * s * 32 * 128 / (eff * peak) * 1e6);
  }
  // A full (non-causal) mask does twice the FLOPs: same efficiency at twice the time.
  KinetoCpuOp full;
  full.name = "aten::_scaled_dot_product_flash_attention";
  full.input_dims = {{1, 32, 16384, 128}};
  full.concrete_inputs = {"", "", "", "0.0", "False", "False", ""};
  b.add(full, "attention", 4.0 * 16384 * 16384 * 32 * 128 / (0.6 * peak) * 1e6);
  const auto fit = fit_profile_from_traces({b.t}, h100_prior());
  const auto& c = fit.profile.compute.attention_efficiency;
  ASSERT_EQ(c.x.size(), 6u);
  EXPECT_NEAR(c.y.front(), 0.3, 1e-9);
  EXPECT_NEAR(c.y[4], 0.5, 1e-9);
  EXPECT_NEAR(c.y.back(), 0.6, 1e-9);
  EXPECT_TRUE(line(fit, "compute.attention_efficiency").fitted);
  EXPECT_FALSE(line(fit, "compute.attention_backward_ratio").fitted);
  EXPECT_EQ(fit.profile.compute.attention_backward_ratio, h100_prior().compute.attention_backward_ratio);
}

/// PyTorch 2.11's SDPA as its profiler records it (H200 trace of calibrate/torch_trace_step.py): the kernels'
/// External id names the backend's inner op (aten::_cudnn_attention_forward / _flash_attention_forward), which
/// runs inside aten::_scaled_dot_product_{cudnn,flash}_attention inside aten::scaled_dot_product_attention; the
/// backward ops run on autograd's thread, with grad_out as input 0 and is_causal in Concrete Inputs.
struct SdpaTrace {
  nlohmann::json events = nlohmann::json::array();
  double clock = 100;
  std::uint64_t id = 1000;

  static nlohmann::json op(const std::string& name, double ts, double dur, std::uint64_t ext, nlohmann::json dims,
                           nlohmann::json concrete, int tid) {
    nlohmann::json types = nlohmann::json::array();
    for (const auto& d : dims) types.push_back(d.empty() ? "" : "c10::BFloat16");
    return {
        {"ph", "X"},
        {"cat", "cpu_op"},
        {"name", name},
        {"pid", 1},
        {"tid", tid},
        {"ts", ts},
        {"dur", dur},
        {"args", {{"External id", ext}, {"Input Dims", dims}, {"Input type", types}, {"Concrete Inputs", concrete}}}};
  }
  /// A launch (on the CPU op's thread) and its kernel (stream 7) for CPU op `ext`.
  void kernel(const std::string& name, double launch_ts, double dur, std::uint64_t ext, int tid) {
    const std::uint64_t corr = ++id;
    events.push_back({{"ph", "X"},
                      {"cat", "cuda_runtime"},
                      {"name", "cudaLaunchKernel"},
                      {"pid", 1},
                      {"tid", tid},
                      {"ts", launch_ts},
                      {"dur", 1},
                      {"args", {{"External id", ext}, {"correlation", corr}}}});
    events.push_back({{"ph", "X"},
                      {"cat", "kernel"},
                      {"name", name},
                      {"pid", 0},
                      {"tid", 7},
                      {"ts", launch_ts + 5},
                      {"dur", dur},
                      {"args", {{"External id", ext}, {"correlation", corr}, {"stream", 7}, {"device", 0}}}});
  }
  /// One forward (main thread) and one backward (autograd thread) of causal SDPA on q [b, h, s, d].
  void cudnn(std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d, double fwd_us, double bwd_us) {
    const nlohmann::json q = {b, h, s, d}, none = nlohmann::json::array();
    const std::string len = std::to_string(s);
    const double t = clock;
    const std::uint64_t outer = ++id, sdpa = ++id, inner = ++id;
    events.push_back(op("aten::scaled_dot_product_attention", t, 50, outer, {q, q, q, none, none, none, none, none},
                        {"", "", "", "", "0.", "True", "", "False"}, static_cast<int>(kMainThread)));
    events.push_back(op("aten::_scaled_dot_product_cudnn_attention", t + 2, 45, sdpa,
                        {q, q, q, none, none, none, none, none, none},
                        {"", "", "", "", "True", "0.", "True", "False", ""}, static_cast<int>(kMainThread)));
    events.push_back(op("aten::_cudnn_attention_forward", t + 4, 40, inner,
                        {q, q, q, none, none, none, none, none, none, none, none, none, none},
                        {"", "", "", "", "", "", len, len, "True", "0.", "True", "False", ""},
                        static_cast<int>(kMainThread)));
    kernel("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0",
           t + 30, fwd_us, inner, static_cast<int>(kMainThread));
    // The backward: three kernels (cuDNN's dot(dO, O) pre-pass, the bprop kernel, dQ to 16 bits), all named by
    // the inner backward op.
    const nlohmann::json lse = {b, h, s, 1};
    const nlohmann::json bdims = {q, q, q, q, q, lse, none, none, none, none, none, none, none, none, none, none};
    const nlohmann::json bconcrete = {"", "", "", "", "", "", "", "", "", "", "", len, len, "0.", "True", ""};
    const std::uint64_t bsdpa = ++id, binner = ++id;
    const int autograd = static_cast<int>(kAutogradThread);
    events.push_back(
        op("aten::_scaled_dot_product_cudnn_attention_backward", t + 60, 30, bsdpa, bdims, bconcrete, autograd));
    events.push_back(op("aten::_cudnn_attention_backward", t + 62, 25, binner, bdims, bconcrete, autograd));
    kernel("void cudnn::fusion::compute_dot_do_o_specialized<true, 64>(void const*, void const*, void*)", t + 70,
           0.1 * bwd_us, binner, autograd);
    kernel("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x64_1x4x1_cga1x1x1_kernel0_0",
           t + 75, 0.8 * bwd_us, binner, autograd);
    kernel("void cudnn::fusion::convert_dq_to_16bits<true>(void const*, void*, unsigned int)", t + 80, 0.1 * bwd_us,
           binner, autograd);
    clock += 100;
  }
  KinetoTrace trace() const {
    nlohmann::json all = events;
    all.push_back({{"ph", "X"},
                   {"cat", "user_annotation"},
                   {"name", "ProfilerStep#0"},
                   {"pid", 1},
                   {"tid", kMainThread},
                   {"ts", 0},
                   {"dur", clock + 10}});
    auto t = kineto_trace_from_json({{"traceEvents", all}}, "sdpa.json");
    classify_kernels(t, KernelClassifier::builtin());
    return t;
  }
};

double attention_truth(double s) {
  return 0.3 + 0.05 * std::log2(s / 512);
}

// The real trace's layout: before, the kernels' op (the inner _cudnn_attention_forward) was not an SDPA op of the
// table, so every forward counted as "without dense q shapes" and nothing was fitted.
TEST(KinetoFit, CudnnSdpaAsPyTorchRecordsIt) {
  SdpaTrace b;
  const double peak = h100_prior().compute.peak_tflops * 1e12;
  const std::vector<double> lens{512, 1024, 2048, 4096, 8192};
  for (double s : lens) {
    const double fwd_us = 2 * s * s * 14 * 64 / (attention_truth(s) * peak) * 1e6;
    // Backward / forward grows from 2.5 to 2.9: the fit is the slope through the origin.
    b.cudnn(1, 14, static_cast<std::int64_t>(s), 64, fwd_us, (2.5 + 0.1 * std::log2(s / 512)) * fwd_us);
  }
  const auto fit = fit_profile_from_traces({b.trace()}, h100_prior());
  const auto& c = fit.profile.compute.attention_efficiency;
  ASSERT_EQ(c.x, lens);
  for (std::size_t i = 0; i < lens.size(); ++i) EXPECT_NEAR(c.y[i], attention_truth(lens[i]), 1e-9) << lens[i];
  const auto& l = line(fit, "compute.attention_efficiency");
  EXPECT_TRUE(l.fitted);
  EXPECT_TRUE(contains(l.detail, "median per length over 5 forward ops")) << l.detail;
  const auto& r = line(fit, "compute.attention_backward_ratio");
  ASSERT_TRUE(r.fitted) << r.detail;
  EXPECT_EQ(r.points, 5);
  EXPECT_EQ(r.held_out, 1);
  // The calibration's proportional fit (relative least squares) on 512, 2048, 4096 and 8192 (1024 held out):
  // ratios r = 2.5, 2.7, 2.8, 2.9 give sum(1/r) / sum(1/r^2).
  double inv = 0, inv2 = 0;
  for (double ratio : {2.5, 2.7, 2.8, 2.9}) {
    inv += 1 / ratio;
    inv2 += 1 / (ratio * ratio);
  }
  EXPECT_NEAR(fit.profile.compute.attention_backward_ratio, inv / inv2, 1e-9);
  EXPECT_TRUE(contains(r.detail, "2.50 at the shortest .. 2.90 at the longest")) << r.detail;
}

// FlashAttention through SDPA: the kernels name aten::_flash_attention_forward, whose q is [B, S, H, D]; by itself
// (no SDPA op around it) it is the varlen entry point, whose lengths are tensor values.
TEST(KinetoFit, FlashSdpaInnerOpIsNotVarlen) {
  const double peak = h100_prior().compute.peak_tflops * 1e12;
  auto build = [&](bool wrapped) {
    SdpaTrace b;
    for (double s : {1024.0, 2048.0, 4096.0}) {
      const std::int64_t len = static_cast<std::int64_t>(s);
      const nlohmann::json q = {1, 32, len, 128}, q_bshd = {1, len, 32, 128}, none = nlohmann::json::array();
      const std::uint64_t sdpa = ++b.id, inner = ++b.id;
      if (wrapped) {
        b.events.push_back(SdpaTrace::op("aten::_scaled_dot_product_flash_attention", b.clock, 45, sdpa,
                                         {q, q, q, none, none, none, none}, {"", "", "", "0.", "True", "False", ""},
                                         static_cast<int>(kMainThread)));
      }
      b.events.push_back(
          SdpaTrace::op("aten::_flash_attention_forward", b.clock + 4, 40, inner,
                        {q_bshd, q_bshd, q_bshd, none, none, none, none, none, none, none, none},
                        {"", "", "", "", "", std::to_string(len), std::to_string(len), "0.", "True", "False", ""},
                        static_cast<int>(kMainThread)));
      b.kernel("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>, true>(Flash_fwd_params)",
               b.clock + 30, 2 * s * s * 32 * 128 / (attention_truth(s) * peak) * 1e6, inner,
               static_cast<int>(kMainThread));
      b.clock += 100;
    }
    return fit_profile_from_traces({b.trace()}, h100_prior());
  };
  const auto fit = build(true);
  EXPECT_TRUE(line(fit, "compute.attention_efficiency").fitted) << line(fit, "compute.attention_efficiency").detail;
  EXPECT_NEAR(fit.profile.compute.attention_efficiency.at(2048), attention_truth(2048), 1e-9);
  // No backward op in this trace: the prior's ratio, and the report says so.
  EXPECT_FALSE(line(fit, "compute.attention_backward_ratio").fitted);
  EXPECT_TRUE(contains(line(fit, "compute.attention_backward_ratio").detail, "no backward SDPA"));
  const auto bare = build(false);
  EXPECT_FALSE(line(bare, "compute.attention_efficiency").fitted);
  EXPECT_TRUE(contains(line(bare, "compute.attention_efficiency").detail, "3 varlen"));
}

// A backward op without a forward op of its shape (e.g. only the backward of a step is inside the trace) gives no
// ratio: nothing to divide by.
TEST(KinetoFit, BackwardRatioNeedsAForwardOfTheSameShape) {
  SdpaTrace b;
  b.cudnn(1, 14, 1024, 64, 100, 250);
  auto t = b.trace();
  // Drop the forward kernel: its op stays, with no kernel time.
  std::erase_if(t.kernels, [](const KinetoKernel& k) { return contains(k.name, "fprop"); });
  const auto fit = fit_profile_from_traces({t}, h100_prior());
  EXPECT_FALSE(line(fit, "compute.attention_efficiency").fitted);
  const auto& r = line(fit, "compute.attention_backward_ratio");
  EXPECT_FALSE(r.fitted);
  EXPECT_TRUE(contains(r.detail, "beside a forward op of the same shape (1 backward ops)")) << r.detail;
  EXPECT_EQ(fit.profile.compute.attention_backward_ratio, h100_prior().compute.attention_backward_ratio);
}

KinetoCollective allreduce(std::uint64_t elements, std::vector<int> ranks) {
  KinetoCollective c;
  c.name = "allreduce";
  c.in_nelems = c.out_nelems = elements;
  c.group_size = static_cast<int>(ranks.size());
  c.dtype = "BFloat16";
  c.ranks = std::move(ranks);
  return c;
}

TEST(KinetoFit, CollectiveLatencyAndBandwidthPerLink) {
  Builder b;
  const std::vector<int> node0{0, 1, 2, 3, 4, 5, 6, 7}, across{0, 8};
  for (double bytes = 1 << 20; bytes <= double(1 << 30); bytes *= 2) {
    const double nvlink_s = 20e-6 + bytes * bus_factor(CollectiveOp::AllReduce, 8) / 300e9;
    const double ib_s = 40e-6 + bytes * bus_factor(CollectiveOp::AllReduce, 2) / 40e9;
    b.add(KinetoCpuOp{}, "collective", nvlink_s * 1e6, allreduce(static_cast<std::uint64_t>(bytes / 2), node0));
    b.add(KinetoCpuOp{}, "collective", ib_s * 1e6, allreduce(static_cast<std::uint64_t>(bytes / 2), across));
  }
  KinetoCollective bcast = allreduce(1000, node0);
  bcast.name = "broadcast";
  b.add(KinetoCpuOp{}, "collective", 10, bcast);
  const auto fit = fit_profile_from_traces({b.t}, h100_prior());
  auto find = [&](LinkClass link, int n) -> const CollectiveFit& {
    for (const auto& c : fit.profile.collectives) {
      if (c.op == CollectiveOp::AllReduce && c.link == link && c.group_size == n) return c;
    }
    throw std::runtime_error("missing entry");
  };
  const auto& nv = find(LinkClass::NvLink, 8);
  ASSERT_EQ(nv.segments.size(), 1u);
  EXPECT_NEAR(nv.segments[0].latency_us, 20, 0.01);
  EXPECT_NEAR(nv.segments[0].bus_GBps, 300, 0.01);
  EXPECT_TRUE(nv.measured);
  const auto& ib = find(LinkClass::InfiniBand, 2);
  EXPECT_NEAR(ib.segments[0].latency_us, 40, 0.01);
  EXPECT_NEAR(ib.segments[0].bus_GBps, 40, 0.01);
  // The prior's all_reduce entries on those links went (a measured group stands for its neighbours).
  for (const auto& c : fit.profile.collectives) {
    if (c.op == CollectiveOp::AllReduce) {
      EXPECT_TRUE(c.measured);
    }
  }
  EXPECT_TRUE(line(fit, "collectives all_reduce nvlink n=8").fitted);
  EXPECT_TRUE(contains(fit.profile.provenance.notes, "\"broadcast\" (no profile entry for it)"));
}

TEST(KinetoFit, OneSizeIsNotAFit) {
  Builder b;
  for (int i = 0; i < 3; ++i) b.add(KinetoCpuOp{}, "collective", 100, allreduce(1 << 20, {0, 1}));
  const auto fit = fit_profile_from_traces({b.t}, h100_prior());
  const auto& l = line(fit, "collectives all_reduce nvlink n=2");
  EXPECT_FALSE(l.fitted);
  EXPECT_TRUE(contains(l.detail, "need two sizes"));
  EXPECT_EQ(fit.fitted_fields, 0);
}

TEST(KinetoFit, StepOverheadIsIdleBetweenKernels) {
  Builder b;
  // Two streams: 0-100 and 50-150 overlap (busy 150), then a 30 us gap, then 180-200.
  auto kernel = [&](double ts, double dur) {
    KinetoKernel k;
    k.family = "other";
    k.ts_us = ts;
    k.dur_us = dur;
    k.step = 0;
    b.t.kernels.push_back(k);
  };
  kernel(0, 100);
  kernel(50, 100);
  kernel(180, 20);
  b.t.steps[0].dur_us = 250;
  const auto fit = fit_profile_from_traces({b.t}, h100_prior());
  EXPECT_EQ(fit.steps.steps, 1);
  EXPECT_NEAR(fit.steps.mean_gpu_busy_s, 170e-6, 1e-12);
  EXPECT_NEAR(fit.steps.mean_gpu_idle_s, 30e-6, 1e-12);
  EXPECT_NEAR(fit.steps.mean_step_s, 250e-6, 1e-12);
  EXPECT_TRUE(line(fit, "framework per-step overhead").noted);
  EXPECT_TRUE(contains(format_trace_fit_report(fit), "framework per-step overhead                     noted"));
  EXPECT_TRUE(contains(fit.profile.provenance.notes, "0.030 ms per step"));
}

// Steps of Qwen2.5-7B, 3 layers and the LM head: GEMM kernels G (10 ms per 1K tokens), element-wise kernels the
// floor (3 layers' and the loss's least traffic at the H100's 3.35 TB/s) plus `share` of the layers' part of G plus
// `fixed_us` a layer.
KinetoTrace elementwise_trace(const std::vector<double>& tokens, double share, double fixed_us) {
  const ModelConfig model = named_model("Qwen2.5-7B");
  ClusterSpec cluster;
  cluster.gpu = named_gpu("H100-SXM");
  const CostModel cost(model, cluster, h100_prior());
  const double layer_flops = cost.gemm_flops_per_token(), head_flops = cost.head_flops_per_token();
  const auto layer = cost.layer_elementwise_bytes_per_token(), loss = cost.head_elementwise_bytes_per_token();
  KinetoTrace t;
  t.file = "synthetic.json";
  t.step_thread = kMainThread;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const double start = 1e6 * static_cast<double>(i);
    t.steps.push_back({static_cast<int>(i) + 1, start, 1e6});
    // One forward "matmul" carrying the step's forward FLOPs: 3 layers and the head.
    KinetoCpuOp op = mm(tokens[i], 1, std::round((3 * layer_flops + head_flops) / 2));
    op.tid = kMainThread;
    op.ts_us = start + 1;
    t.ops.push_back(op);
    const double gemm_us = 10 * tokens[i] / 1024.0 * 1e3;
    const double layer_share = 3 * layer_flops / (3 * layer_flops + head_flops);
    const double floor_us =
        tokens[i] * (3 * (layer.forward + layer.backward) + loss.forward + loss.backward) / 3.35e12 * 1e6;
    KinetoKernel g;
    g.family = "gemm";
    g.ts_us = start + 2;
    g.dur_us = gemm_us;
    g.op = static_cast<int>(t.ops.size()) - 1;
    g.step = static_cast<int>(i);
    t.kernels.push_back(g);
    KinetoKernel e;
    e.family = "other";
    e.ts_us = start + 3 + gemm_us;
    e.dur_us = floor_us + share * layer_share * gemm_us + 3 * fixed_us;
    e.step = static_cast<int>(i);
    t.kernels.push_back(e);
  }
  return t;
}

TEST(KinetoFit, ElementwiseShareAndFixedCostAreFittedJointly) {
  // 1K .. 8K tokens: the share and the fixed cost a layer come back, and the held-out step is predicted exactly.
  // A median share alone (the old fit) would read 0.4 plus the fixed cost over G: 0.66 at 1K, 0.43 at 8K.
  const KinetoTrace t = elementwise_trace({1024, 2048, 4096, 8192}, 0.4, 80);
  TraceFitOptions options;
  options.model = named_model("Qwen2.5-7B");
  const auto fit = fit_profile_from_traces({t}, h100_prior(), options);
  EXPECT_NEAR(fit.profile.compute.gemm_work_overhead, 0.4, 1e-6);
  EXPECT_NEAR(fit.profile.compute.layer_overhead_us, 80, 1e-3);
  ASSERT_TRUE(fit.profile.compute.layer_overhead_fit_mape.has_value());  // the intervals' residual
  EXPECT_LT(*fit.profile.compute.layer_overhead_fit_mape, 1e-6);
  for (const char* field : {"compute.gemm_work_overhead", "compute.layer_overhead_us"}) {
    const TraceFieldLine& l = line(fit, field);
    EXPECT_TRUE(l.fitted) << field;
    EXPECT_EQ(l.points, 4) << field;
    EXPECT_EQ(l.held_out, 1) << field;
    ASSERT_TRUE(l.held_out_mape.has_value()) << field;
    EXPECT_LT(*l.held_out_mape, 1e-6) << field;
  }
  // Without the model the prior's fields stay, and the report says what is missing.
  const auto without = fit_profile_from_traces({t}, h100_prior());
  EXPECT_EQ(without.profile.compute.gemm_work_overhead, h100_prior().compute.gemm_work_overhead);
  EXPECT_EQ(without.profile.compute.layer_overhead_us, h100_prior().compute.layer_overhead_us);
  EXPECT_TRUE(contains(line(without, "compute.gemm_work_overhead").detail, "--model"));
  EXPECT_TRUE(contains(line(without, "compute.layer_overhead_us").detail, "--model"));
}

TEST(KinetoFit, StepsOfOneTokenCountGiveTheShareAndKeepThePriorsFixedCost) {
  // Three steps of 4K tokens (the third held out): the median share, and the fixed cost cannot be told from it.
  TraceFitOptions options;
  options.model = named_model("Qwen2.5-7B");
  const auto fit = fit_profile_from_traces({elementwise_trace({4096, 4096, 4096}, 0.4, 0)}, h100_prior(), options);
  EXPECT_NEAR(fit.profile.compute.gemm_work_overhead, 0.4, 1e-6);
  EXPECT_EQ(fit.profile.compute.layer_overhead_us, h100_prior().compute.layer_overhead_us);
  EXPECT_TRUE(line(fit, "compute.gemm_work_overhead").fitted);
  EXPECT_FALSE(line(fit, "compute.layer_overhead_us").fitted);
  EXPECT_TRUE(contains(line(fit, "compute.layer_overhead_us").detail, "two token counts"));
}

TEST(KinetoFit, MissingFieldsKeepThePriorAndSayWhy) {
  Builder b;
  b.add(mm(1024, 4096, 4096), "gemm", 1000);
  b.add(mm(2048, 4096, 4096), "gemm", 2000);
  const auto fit = fit_profile_from_traces({b.t}, h100_prior());
  const auto prior = h100_prior();
  EXPECT_EQ(fit.profile.compute.attention_efficiency.y, prior.compute.attention_efficiency.y);
  EXPECT_EQ(fit.profile.compute.layer_overhead_us, prior.compute.layer_overhead_us);
  EXPECT_FALSE(line(fit, "compute.attention_efficiency").fitted);
  EXPECT_TRUE(contains(line(fit, "collectives").detail, "no NCCL kernels"));
  EXPECT_TRUE(contains(fit.profile.provenance.notes, "Kept from the prior"));
  EXPECT_TRUE(contains(fit.profile.provenance.notes, "compute.attention_efficiency (no forward SDPA"));
  EXPECT_EQ(fit.profile.provenance.source, "PyTorch profiler trace");
}

// Kineto's timestamps are relative to baseTimeNanoseconds: the H200 traces' base is 2026-10-01T12:17:06Z and
// their first event 4834607.7 s later, on the day they were recorded.
TEST(KinetoFit, DateIsTheBasePlusTheFirstEvent) {
  Builder b;
  b.add(mm(1024, 4096, 4096), "gemm", 1000);
  b.t.base_time_ns = 1790857026000000000;
  const double shift = 4834607734880.074;
  b.t.steps[0].ts_us += shift;
  for (auto& op : b.t.ops) op.ts_us += shift;
  for (auto& k : b.t.kernels) k.ts_us += shift;
  EXPECT_EQ(fit_profile_from_traces({b.t}, h100_prior()).profile.provenance.date, "2026-11-26T11:13:53Z");
}

TEST(KinetoFit, AbovePeakIsAnInputError) {
  Builder b;
  b.add(mm(8192, 8192, 8192), "gemm", 1);  // 1.1 PFLOP in 1 us
  try {
    fit_profile_from_traces({b.t}, h100_prior());
    FAIL() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_TRUE(contains(e.what(), "synthetic.json: aten::mm at 8192 tokens ran at"));
  }
}

TEST(KinetoFit, GemmShapesAndCollectiveSizes) {
  KinetoCpuOp op;
  op.name = "aten::addmm";
  op.input_dims = {{256}, {100, 64}, {64, 256}};
  auto s = gemm_shape(op);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->tokens, 100);
  EXPECT_EQ(s->n, 256);
  EXPECT_EQ(s->k, 64);
  op.name = "aten::linear";
  op.input_dims = {{4, 512, 1024}, {3072, 1024}, {3072}};
  s = gemm_shape(op);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->tokens, 2048);
  EXPECT_EQ(s->n, 3072);
  EXPECT_EQ(s->k, 1024);
  op.name = "aten::bmm";
  op.input_dims = {{8, 100, 64}, {8, 64, 32}};
  s = gemm_shape(op);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->tokens, 800);
  EXPECT_EQ(s->n, 32);
  op.name = "aten::add";
  EXPECT_FALSE(gemm_shape(op));

  std::string why;
  KinetoCollective c = allreduce(1000, {0, 1});
  c.name = "_allgather_base";
  c.in_nelems = 1000;
  c.out_nelems = 8000;
  auto size = collective_size(c, why);
  ASSERT_TRUE(size);
  EXPECT_EQ(size->op, CollectiveOp::AllGather);
  EXPECT_EQ(size->bytes, 16000);  // the gathered output, BF16
  c.name = "reduce_scatter_tensor_coalesced";
  c.in_nelems = 8000;
  c.out_nelems = 1000;
  c.dtype = "Float";
  size = collective_size(c, why);
  ASSERT_TRUE(size);
  EXPECT_EQ(size->op, CollectiveOp::ReduceScatter);
  EXPECT_EQ(size->bytes, 32000);  // the input
  c.dtype = "Quantum";
  EXPECT_FALSE(collective_size(c, why));
  EXPECT_TRUE(contains(why, "dtype \"Quantum\" unknown"));
}

// --- the command line ---

const std::filesystem::path kFitTrace = std::filesystem::path(LCSIM_BINARY).parent_path() / "lcsim-fit-trace";

std::filesystem::path temp_dir() {
  const auto dir = std::filesystem::temp_directory_path() / ("lcsim-fit-trace-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

/// A trace file with BF16 matmuls at three token counts and an NCCL all-reduce at four sizes.
std::string synthetic_trace_file() {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"ph", "X"},
                    {"cat", "user_annotation"},
                    {"name", "ProfilerStep#0"},
                    {"pid", 1},
                    {"tid", 1},
                    {"ts", 0},
                    {"dur", 100000}});
  int id = 1;
  double ts = 10;
  auto op = [&](const std::string& name, nlohmann::json args, const std::string& kernel, double dur) {
    args["External id"] = id;
    events.push_back({{"ph", "X"},
                      {"cat", "cpu_op"},
                      {"name", name},
                      {"pid", 1},
                      {"tid", 1},
                      {"ts", ts},
                      {"dur", 5},
                      {"args", args}});
    events.push_back({{"ph", "X"},
                      {"cat", "kernel"},
                      {"name", kernel},
                      {"pid", 0},
                      {"tid", 7},
                      {"ts", ts + 1},
                      {"dur", dur},
                      {"args", {{"External id", id}, {"correlation", id}, {"stream", 7}}}});
    ++id;
    ts += dur + 10;
  };
  for (int t : {1024, 2048, 4096}) {
    op("aten::mm", {{"Input Dims", {{t, 4096}, {4096, 4096}}}, {"Input type", {"c10::BFloat16", "c10::BFloat16"}}},
       "sm90_xmma_gemm_bf16", 2.0 * t * 4096 * 4096 / 500e12 * 1e6);
  }
  for (int mib : {1, 4, 16, 64}) {
    op("record_param_comms",
       {{"Collective name", "allreduce"},
        {"In msg nelems", mib << 19},
        {"Out msg nelems", mib << 19},
        {"Group size", 8},
        {"dtype", "BFloat16"},
        {"Process Group Ranks", "[0, 1, 2, 3, 4, 5, 6, 7]"}},
       "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 15 + mib * 1048576.0 * 1.75 / 200e9 * 1e6);
  }
  const auto file = temp_dir() / "rank0.json";
  std::ofstream(file) << nlohmann::json{
      {"schemaVersion", 1},
      {"deviceProperties", {{{"name", "NVIDIA H100 80GB HBM3"}}}},
      {"baseTimeNanoseconds", std::uint64_t{1764115200000000000}},
      {"traceEvents",
       events}}.dump();
  return file.string();
}

TEST(KinetoFitCli, WritesAProfileAndAPerFieldReport) {
  const std::string trace = synthetic_trace_file();
  const std::string out = (temp_dir() / "fitted.json").string();
  std::filesystem::remove(out);
  const auto run = run_command("'" + kFitTrace.string() + "' '" + trace + "' --out '" + out + "'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "compute.gemm_efficiency"));
  EXPECT_TRUE(contains(run.output, "collectives all_reduce nvlink n=8"));
  EXPECT_TRUE(contains(run.output,
                       "compute.layer_overhead_us                       prior   0       n/a       needs the "
                       "traced model (--model)"));
  const Profile p = load_profile(out);
  EXPECT_EQ(p.gpu, "H100-SXM");
  EXPECT_EQ(p.provenance.date, "2025-11-26T00:00:00Z");
  ASSERT_EQ(p.compute.gemm_efficiency.x.size(), 3u);
  EXPECT_NEAR(p.compute.gemm_efficiency.y[1], 500.0 / p.compute.peak_tflops, 1e-3);
  EXPECT_TRUE(contains(p.provenance.notes, "Measured step"));
}

TEST(KinetoFitCli, BadInputsExitTwoNamingTheFile) {
  const std::string trace = synthetic_trace_file();
  auto run = run_command("'" + kFitTrace.string() + "' '" + trace + "' --out '" + trace + "'");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  const auto dir = temp_dir();
  std::ofstream(dir / "truncated.json") << testing::read_file(trace).substr(0, 300);
  run = run_command("'" + kFitTrace.string() + "' '" + (dir / "truncated.json").string() + "' --out '" +
                    (dir / "x.json").string() + "'");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, (dir / "truncated.json").string() + ": not valid JSON"));
  std::ofstream(dir / "other.json") << R"({"traceEvents": [{"ph": "X", "name": "a", "ts": 0, "dur": 1}]})";
  run = run_command("'" + kFitTrace.string() + "' '" + (dir / "other.json").string() + "' --out '" +
                    (dir / "x.json").string() + "'");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, "other.json: not a PyTorch profiler trace"));
  std::ofstream(dir / "empty.json") << "";
  run = run_command("'" + kFitTrace.string() + "' '" + (dir / "empty.json").string() + "' --out '" +
                    (dir / "x.json").string() + "'");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, "empty.json: empty trace"));
}

// The step times as a measured run that a validation catalogue's `measured` entry reads.
TEST(KinetoFitCli, MeasuredStepsForValidation) {
  const std::string trace = synthetic_trace_file();
  const auto dir = temp_dir();
  const std::string scenario = std::string(LCSIM_SOURCE_DIR) + "/scenarios/default.json";
  const std::string measured = (dir / "job.live.json").string();
  const std::string out = (dir / "job-profile.json").string();
  auto run = run_command("'" + kFitTrace.string() + "' '" + trace + "' --out '" + out + "' --measured-json '" +
                         measured + "' --scenario '" + scenario + "' --policy deepspeed");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json catalogue = {{"schema", "lcsim-validation-catalogue/1"},
                                    {"description", "test"},
                                    {"entries",
                                     {{{"id", "traced-step"},
                                       {"source", {{"paper", "trace"}, {"where", "rank 0"}, {"section", "-"}}},
                                       {"claim", "the traced job's step"},
                                       {"quantity", "iteration_seconds"},
                                       {"mode", "plan"},
                                       {"measured", measured},
                                       {"scenario", scenario},
                                       {"policy", "deepspeed"},
                                       {"tolerance", 0.1}}}}};
  const auto c = catalogue_from_json(catalogue, (dir / "catalogue.json").string());
  ASSERT_EQ(c.entries.size(), 1u);
  // The synthetic trace's one step lasts 100000 us.
  ASSERT_TRUE(c.entries[0].published.value);
  EXPECT_NEAR(*c.entries[0].published.value, 0.1, 1e-12);
  run = run_command("'" + kFitTrace.string() + "' '" + trace + "' --out '" + out + "' --measured-json '" + measured +
                    "'");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, "go together"));
}

// The trimmed real trace (HTA, FP32 convolutions, all-reduces between 2 GPUs): nothing in it can be fitted, and
// the report says why, field by field; nothing is written.
TEST(KinetoFitCli, RealTraceReportsWhatItLacks) {
  const std::string out = (temp_dir() / "real.json").string();
  std::filesystem::remove(out);
  const auto run = run_command("'" + kFitTrace.string() + "' '" + std::string(LCSIM_SOURCE_DIR) +
                               "/tests/data/kineto/hta-nccl-data-2steps.json.gz' --out '" + out + "'");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(contains(run.output, "without matmul Input Dims"));
  EXPECT_TRUE(contains(run.output, "collectives all_reduce nvlink n=2"));
  EXPECT_TRUE(contains(run.output, "no profile field could be fitted"));
  EXPECT_FALSE(std::filesystem::exists(out));
}

// The committed real trace (H200, PyTorch 2.11, Qwen2.5-0.5B, one sequence of 512 .. 16384 tokens per step;
// docs/measurements/h200-2026-11-26-kineto.md): the GEMM and attention curves and the backward ratio are fitted,
// with efficiencies in (0, 1) that grow with the length. A reader that loses the shapes or the op links breaks it.
TEST(KinetoFit, RealH200TorchTrace) {
  const std::string file =
      std::string(LCSIM_SOURCE_DIR) + "/measurements/torch/h200-2026-11-26/torch-qwen2.5-0.5b.trace.json.gz";
  auto t = load_kineto_trace(file);
  classify_kernels(t, KernelClassifier::builtin());
  EXPECT_EQ(t.steps.size(), 6u);
  const auto fit = fit_profile_from_traces({t}, derive_default_profile(named_gpu("H200")));
  EXPECT_EQ(fit.profile.gpu, "H200");
  // baseTimeNanoseconds is 2026-10-01T12:17:06Z; the steps ran 56 days later (steps.json: 2026-11-26T11:13:59Z).
  EXPECT_EQ(fit.profile.provenance.date, "2026-11-26T11:13:53Z");
  const std::vector<double> lens{512, 1024, 2048, 4096, 8192, 16384};
  for (const char* field : {"compute.gemm_efficiency", "compute.attention_efficiency"}) {
    const auto& l = line(fit, field);
    EXPECT_TRUE(l.fitted) << field << ": " << l.detail;
    EXPECT_EQ(l.points, 6) << field;
    ASSERT_TRUE(l.held_out_mape) << field;
    EXPECT_LT(*l.held_out_mape, 0.25) << field;
    const auto& c = std::string(field) == "compute.gemm_efficiency" ? fit.profile.compute.gemm_efficiency
                                                                    : fit.profile.compute.attention_efficiency;
    ASSERT_EQ(c.x, lens) << field;
    for (std::size_t i = 0; i < c.y.size(); ++i) {
      EXPECT_GT(c.y[i], 0.05) << field << " at " << c.x[i];
      EXPECT_LT(c.y[i], 1.0) << field << " at " << c.x[i];
      // Monotone-ish: longer steps are not much less efficient than shorter ones.
      if (i > 0) {
        EXPECT_GT(c.y[i], 0.9 * c.y[i - 1]) << field << " at " << c.x[i];
      }
    }
    EXPECT_GT(c.y.back(), 1.5 * c.y.front()) << field;
  }
  const auto& r = line(fit, "compute.attention_backward_ratio");
  EXPECT_TRUE(r.fitted) << r.detail;
  EXPECT_EQ(r.points, 6);
  EXPECT_GT(fit.profile.compute.attention_backward_ratio, 1.5);
  EXPECT_LT(fit.profile.compute.attention_backward_ratio, 4.0);
}

}  // namespace kineto_fit_test
}  // namespace lcsim

namespace lcsim {
namespace kineto_fit_test {

// Plain-PyTorch training steps on one H200 (2026-11-27, docs/measurements/h200-2026-11-27.md, call 3), warm and
// untraced, against the cost model with the profile fitted from their trace and untraced times
// (measurements/torch/h200-2026-11-27/*.profile.json, lcsim-fit-trace --untraced): one sequence a step, every
// layer, the LM head, nothing recomputed, the optimizer step. Without the CPU floor the short steps come out up to
// 5x too fast (the 0.5B) or 20% (the 7B shape); with it every step is within 12%.
struct TorchSteps {
  const char* stem;
  const char* model;
  int layers;
  const char* fitted_on;  ///< the catalogue entry that measures this job, "" for none
};

const std::string kTorchDir = std::string(LCSIM_SOURCE_DIR) + "/measurements/torch/h200-2026-11-27/";

class TorchStepFloor : public ::testing::TestWithParam<TorchSteps> {};

TEST_P(TorchStepFloor, PredictsWarmUntracedStepsWithTheFloor) {
  const TorchSteps& run = GetParam();
  const Profile profile = load_profile(kTorchDir + run.stem + ".profile.json");
  ASSERT_GT(profile.compute.layer_issue_us, 0);
  Profile no_floor = profile;
  no_floor.compute.layer_issue_us = 0;
  ModelConfig model = named_model(run.model);
  model.layers = run.layers;
  const auto steps = read_untraced_steps(kTorchDir + run.stem + ".steps.json");
  CostModelOptions options;
  options.zero_stage = 0;
  ParallelScheme scheme;
  scheme.recompute = Recompute::None;
  double worst = 0, mape = 0, mape_without = 0, shortest_without = 0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const SequenceShare one{static_cast<Tokens>(steps[i].tokens), 1};
    const auto predict = [&](const Profile& p) {
      const CostModel cost(model, one_gpu_cluster(p, 0), p, options);
      return cost.compute_seconds(std::span(&one, 1), scheme, LayerSpan{0, model.layers}, true) +
             cost.optimizer_seconds(scheme, 1, 0);
    };
    const double with = predict(profile) / steps[i].seconds - 1;
    const double without = predict(no_floor) / steps[i].seconds - 1;
    worst = std::max(worst, std::abs(with));
    mape += std::abs(with) / static_cast<double>(steps.size());
    mape_without += std::abs(without) / static_cast<double>(steps.size());
    if (i == 0) shortest_without = without;
  }
  EXPECT_LT(worst, 0.12) << run.stem;
  EXPECT_LT(shortest_without, -0.15) << run.stem;  // the GPU alone: the shortest step too fast
  EXPECT_LT(mape, 0.6 * mape_without) << run.stem;
}

// The committed profiles are today's fit of their trace and untraced steps (refit with the commands in
// docs/measurements/h200-2026-11-27.md after a change to the fit).
TEST_P(TorchStepFloor, ProfileIsTheFitOfItsTraceAndSteps) {
  const TorchSteps& run = GetParam();
  std::vector<KinetoTrace> traces{load_kineto_trace(kTorchDir + run.stem + ".trace.json.gz")};
  classify_kernels(traces.front(), KernelClassifier::builtin());
  TraceFitOptions options;
  options.model = named_model(run.model);
  options.untraced_steps = read_untraced_steps(kTorchDir + run.stem + ".steps.json");
  if (*run.fitted_on != '\0') options.fitted_on = {run.fitted_on};
  const TraceFit fit = fit_profile_from_traces(traces, derive_default_profile(named_gpu("H200")), options);
  nlohmann::json fitted = profile_to_json(fit.profile);
  nlohmann::json committed = profile_to_json(load_profile(kTorchDir + run.stem + ".profile.json"));
  for (auto* doc : {&fitted, &committed}) (*doc)["provenance"].erase("notes");  // they name the trace's path
  EXPECT_EQ(fitted, committed) << "refit " << run.stem << ".profile.json";
  // The job's measured run is its untraced steps, not the traced ones (twice as long where the CPU bounds them).
  const auto measured = trace_steps_results(traces, "job", "job.json", "deepspeed", options.untraced_steps);
  const auto& iterations = measured["policies"][0]["iterations"];
  ASSERT_EQ(iterations.size(), options.untraced_steps.size());
  for (std::size_t i = 0; i < iterations.size(); ++i)
    EXPECT_EQ(iterations[i]["seconds"].get<double>(), options.untraced_steps[i].seconds);
  EXPECT_THROW(trace_steps_results(traces, "job", "job.json", "deepspeed", std::span(options.untraced_steps).first(1)),
               InputError);
}

// Fitted apart, the two models' floors agree per layer (3.10 and 2.89 ms): the CPU issues a decoder layer's kernels
// at one cost whatever its widths, as the mechanism says, and one model's floor carries to another of that shape.
TEST(TorchStepFloorAcrossModels, OneLayerCostsAboutTheSameCpuOnBothModels) {
  const double small = load_profile(kTorchDir + "torch-qwen2.5-0.5b-warm.profile.json").compute.layer_issue_us;
  const double large = load_profile(kTorchDir + "torch-qwen2.5-7b-8layers-warm.profile.json").compute.layer_issue_us;
  EXPECT_NEAR(small / large, 1.0, 0.15);
}

INSTANTIATE_TEST_SUITE_P(H200, TorchStepFloor,
                         ::testing::Values(TorchSteps{"torch-qwen2.5-0.5b-warm", "Qwen2.5-0.5B", 24,
                                                      "h200-2026-11-27-torch-qwen2.5-0.5b-h200-deepspeed-seconds"},
                                           TorchSteps{"torch-qwen2.5-7b-8layers-warm", "Qwen2.5-7B", 8, ""}),
                         [](const ::testing::TestParamInfo<TorchSteps>& param) {
                           return std::string(param.param.layers == 24 ? "qwen0_5b" : "qwen7b_8layers");
                         });

}  // namespace kineto_fit_test
}  // namespace lcsim
