// The compute fields' fits from a trace's kernels: GEMM and attention efficiency, the attention backward ratio, the
// element-wise share and a layer's fixed cost, the step times and the framework's CPU floor. Data only: the report
// text is kineto_fit_report.cpp's.
#include <algorithm>
#include <cmath>
#include <set>
#include <span>
#include <tuple>

#include "base/errors.hpp"
#include "calibrate/kineto/kineto_field_fits.hpp"
#include "calibrate/kineto/kineto_kernels.hpp"
#include "model/cost_model.hpp"

namespace lcsim::trace_fit {
namespace {

/// Efficiencies refer to the dense BF16 peak: only BF16 and FP16 matmuls are measured against it.
bool half_precision(const KinetoCpuOp& op) {
  for (const auto& t : op.input_types) {
    if (t.find("BFloat16") != std::string::npos || t.find("Half") != std::string::npos) return true;
  }
  return false;
}

/// Sum of each CPU op's kernels of one family, over the traces' steps (or the whole trace without steps).
std::map<std::pair<std::size_t, int>, double> kernel_time_by_op(const std::vector<KinetoTrace>& traces,
                                                                const std::string& family) {
  std::map<std::pair<std::size_t, int>, double> out;
  for (std::size_t t = 0; t < traces.size(); ++t) {
    for (const auto& k : traces[t].kernels) {
      if (k.family != family || k.op < 0) continue;
      if (!traces[t].steps.empty() && k.step < 0) continue;
      out[{t, k.op}] += k.dur_us * 1e-6;
    }
  }
  return out;
}

/// An efficiency above 1 means the prior's peak is not this GPU's.
void check_efficiency(double e, const std::string& file, double peak_tflops, const std::string& what) {
  if (e > 1) {
    throw InputError(file + ": " + what + " ran at " + fixed(e * 100, 1) + " % of the prior's peak " +
                     fixed(peak_tflops, 0) + " TFLOP/s: the prior is for another GPU (pass --prior)");
  }
}

/// Three or more points: the calibration's curve through them. Fewer leave nothing to hold out and would make
/// the curve flat beyond them, so the prior's curve keeps its shape, scaled by the median measured / prior ratio.
CurveFit fit_curve(const Curve& prior, const std::vector<double>& x, const std::vector<double>& e,
                   const std::string& what) {
  CurveFit fit{prior, x.size(), std::nullopt};
  if (x.size() >= 3) {
    fit.curve = efficiency_curve(x, e, kMeasuredHoldOutEvery, what);
    return fit;
  }
  std::vector<double> ratios;
  for (std::size_t i = 0; i < x.size(); ++i) ratios.push_back(e[i] / prior.at(x[i]));
  const double r = median(ratios);
  for (auto& y : fit.curve.y) y = std::min(1.0, y * r);
  fit.curve.fit_mape = std::nullopt;
  fit.prior_scale = r;
  return fit;
}

/// The SDPA / FlashAttention ops that carry dense q shapes and is_causal (PyTorch's native_functions.yaml and
/// flash_attn's custom ops). A kernel's External id names the innermost op that launched it -- for PyTorch's SDPA
/// the backend's inner op (aten::_cudnn_attention_forward, aten::_flash_attention_forward,
/// aten::_efficient_attention_forward and their backward ops) -- so the fit walks up from it to the nearest op of
/// this table.
struct AttentionOp {
  const char* name;
  bool backward;
  bool heads_first;          ///< q is [B, H, S, D]; else [B, S, H, D]
  std::size_t q_index;       ///< the backward ops' input 0 is grad_out
  std::size_t causal_index;  ///< is_causal in Concrete Inputs
};
constexpr AttentionOp kAttentionOps[] = {
    {"aten::_scaled_dot_product_flash_attention", false, true, 0, 4},
    {"aten::_scaled_dot_product_efficient_attention", false, true, 0, 6},
    {"aten::_scaled_dot_product_cudnn_attention", false, true, 0, 6},
    {"flash_attn::_flash_attn_forward", false, false, 0, 5},
    {"aten::_scaled_dot_product_flash_attention_backward", true, true, 1, 11},
    {"aten::_scaled_dot_product_efficient_attention_backward", true, true, 1, 11},
    {"aten::_scaled_dot_product_cudnn_attention_backward", true, true, 1, 14},
    {"flash_attn::_flash_attn_backward", true, false, 1, 11},
};

const AttentionOp* attention_kind(const KinetoCpuOp& op) {
  for (const auto& a : kAttentionOps) {
    if (op.name == a.name) return &a;
  }
  return nullptr;
}

/// The op of kAttentionOps that encloses (or is) `op`, on its thread; -1 when none does.
int attention_op_of(const KinetoTrace& t, int op) {
  for (int i = op; i >= 0; i = t.ops[static_cast<std::size_t>(i)].parent) {
    if (attention_kind(t.ops[static_cast<std::size_t>(i)])) return i;
  }
  return -1;
}

/// Kernel time per attention op: the kernels of the family, summed over the op they resolve to.
std::map<std::pair<std::size_t, int>, double> attention_time_by_op(const std::vector<KinetoTrace>& traces) {
  std::map<std::pair<std::size_t, int>, double> times;
  for (std::size_t t = 0; t < traces.size(); ++t) {
    for (const auto& k : traces[t].kernels) {
      if (k.family != "attention" || k.op < 0) continue;
      if (!traces[t].steps.empty() && k.step < 0) continue;
      const int a = attention_op_of(traces[t], k.op);
      times[{t, a >= 0 ? a : k.op}] += k.dur_us * 1e-6;
    }
  }
  return times;
}

struct AttentionShape {
  double batch, heads, length, head_dim;
  bool causal;
};

/// The dense shape and mask an attention op recorded; empty, counted in `fit` by why, when it has none.
std::optional<AttentionShape> attention_shape(const KinetoCpuOp& op, const AttentionOp* kind, AttentionFit& fit) {
  if (!kind) {
    ++(op.name.find("varlen") != std::string::npos || op.name == "aten::_flash_attention_forward" ? fit.varlen
                                                                                                  : fit.no_shape);
    return std::nullopt;
  }
  if (kind->backward) ++fit.backward;
  if (op.input_dims.size() <= kind->q_index) {
    ++fit.no_shape;
    return std::nullopt;
  }
  const auto& q = op.input_dims[kind->q_index];
  if (q.size() != 4) {
    ++(q.size() == 3 ? fit.varlen : fit.no_shape);
    return std::nullopt;
  }
  if (op.concrete_inputs.size() <= kind->causal_index ||
      (op.concrete_inputs[kind->causal_index] != "True" && op.concrete_inputs[kind->causal_index] != "False")) {
    ++fit.no_causal;
    return std::nullopt;
  }
  return AttentionShape{static_cast<double>(q[0]), static_cast<double>(kind->heads_first ? q[1] : q[2]),
                        static_cast<double>(kind->heads_first ? q[2] : q[1]), static_cast<double>(q[3]),
                        op.concrete_inputs[kind->causal_index] == "True"};
}

/// Per shape (trace, batch, heads, length, head_dim, causal): forward and backward kernel seconds.
using AttentionKey = std::tuple<std::size_t, double, double, double, double, bool>;
using SecondsByShape = std::map<AttentionKey, std::pair<std::vector<double>, std::vector<double>>>;

/// Backward / forward: a backward op's shapes and mask pair it with the forward ops of the same shape (the
/// trace records no link from an autograd node's kernels to the forward op they differentiate).
void fit_backward_ratio(const SecondsByShape& by_shape, AttentionFit& fit) {
  for (const auto& [shape, samples] : by_shape) {
    if (samples.first.empty() || samples.second.empty()) {
      fit.unpaired += static_cast<int>(samples.second.size());
      continue;
    }
    fit.forward_s.push_back(median(samples.first));
    fit.backward_s.push_back(median(samples.second));
  }
  if (!fit.forward_s.empty())
    fit.backward_ratio = proportional_held_out(fit.forward_s, fit.backward_s, kMeasuredHoldOutEvery);
}

}  // namespace

GemmFit fit_gemm_efficiency(const std::vector<KinetoTrace>& traces, const Profile& p) {
  const auto times = kernel_time_by_op(traces, "gemm");
  const double peak = p.compute.peak_tflops * 1e12;
  GemmFit fit;
  fit.ops = times.size();
  std::map<double, std::vector<double>> by_tokens;
  for (const auto& [key, seconds] : times) {
    const KinetoTrace& t = traces[key.first];
    const KinetoCpuOp& op = t.ops[static_cast<std::size_t>(key.second)];
    // Backward matmuls run on autograd's device threads; their first dimension is not the token count.
    if (!t.steps.empty() && op.tid != t.step_thread) {
      ++fit.backward;
      continue;
    }
    const auto shape = gemm_shape(op);
    if (!shape) {
      ++fit.no_shape;
      continue;
    }
    if (!half_precision(op)) {
      ++fit.other_dtype;
      continue;
    }
    if (!(seconds > 0)) continue;
    const double eff = 2 * shape->tokens * shape->n * shape->k / (seconds * peak);
    check_efficiency(eff, t.file, p.compute.peak_tflops, op.name + " at " + fixed(shape->tokens, 0) + " tokens");
    by_tokens[shape->tokens].push_back(eff);
  }
  if (by_tokens.empty()) return fit;
  std::vector<double> x, e;
  for (const auto& [tokens, effs] : by_tokens) {
    x.push_back(tokens);
    e.push_back(median(effs));
  }
  fit.efficiency = fit_curve(p.compute.gemm_efficiency, x, e, traces.front().file + ": GEMM");
  return fit;
}

AttentionFit fit_attention(const std::vector<KinetoTrace>& traces, const Profile& p) {
  const auto times = attention_time_by_op(traces);
  const double peak = p.compute.peak_tflops * 1e12;
  AttentionFit fit;
  fit.ops = times.size();
  SecondsByShape by_shape;
  std::map<double, std::vector<double>> by_len;
  for (const auto& [key, seconds] : times) {
    const KinetoTrace& t = traces[key.first];
    const KinetoCpuOp& op = t.ops[static_cast<std::size_t>(key.second)];
    const AttentionOp* kind = attention_kind(op);
    const auto shape = attention_shape(op, kind, fit);
    if (!shape) continue;
    const double b = shape->batch, s = shape->length, h = shape->heads, d = shape->head_dim;
    if (!(seconds > 0)) continue;
    auto& samples = by_shape[{key.first, b, h, s, d, shape->causal}];
    (kind->backward ? samples.second : samples.first).push_back(seconds);
    if (kind->backward) continue;
    // The profile's convention: causal forward FLOPs 2 s^2 q_hidden; a full mask does twice the work.
    const double flops = b * (shape->causal ? 2.0 : 4.0) * s * s * h * d;
    const double eff = flops / (seconds * peak);
    check_efficiency(eff, t.file, p.compute.peak_tflops, op.name + " at sequence length " + fixed(s, 0));
    by_len[s].push_back(eff);
  }
  if (!by_len.empty()) {
    std::vector<double> x, e;
    for (const auto& [len, effs] : by_len) {
      x.push_back(len);
      e.push_back(median(effs));
      fit.forward_ops += effs.size();
    }
    fit.efficiency = fit_curve(p.compute.attention_efficiency, x, e, traces.front().file + ": attention");
  }
  fit_backward_ratio(by_shape, fit);
  return fit;
}

StepTimes measure_steps(const std::vector<KinetoTrace>& traces) {
  StepTimes out;
  double step_sum = 0, idle_sum = 0, busy_sum = 0;
  int steps = 0;
  for (const auto& t : traces) {
    std::vector<std::vector<std::pair<double, double>>> intervals(t.steps.size());
    for (const auto& k : t.kernels) {
      if (k.step >= 0) intervals[static_cast<std::size_t>(k.step)].push_back({k.ts_us, k.ts_us + k.dur_us});
    }
    for (std::size_t s = 0; s < t.steps.size(); ++s) {
      auto& iv = intervals[s];
      if (iv.empty()) continue;
      std::sort(iv.begin(), iv.end());
      // Union of the kernels' intervals over every stream: the time some kernel ran.
      double busy = 0, start = iv.front().first, end = iv.front().second;
      const double first = start;
      double last = end;
      for (const auto& [a, b] : iv) {
        if (a > end) {
          busy += end - start;
          start = a;
        }
        end = std::max(end, b);
        last = std::max(last, b);
      }
      busy += end - start;
      if (&t == &traces.front()) out.first_trace_busy_s.push_back(busy * 1e-6);
      ++steps;
      step_sum += t.steps[s].dur_us * 1e-6;
      busy_sum += busy * 1e-6;
      idle_sum += (last - first - busy) * 1e-6;
    }
  }
  out.summary.steps = steps;
  if (steps == 0) return out;
  out.summary.mean_step_s = step_sum / steps;
  out.summary.mean_gpu_idle_s = idle_sum / steps;
  out.summary.mean_gpu_busy_s = busy_sum / steps;
  return out;
}

}  // namespace lcsim::trace_fit
