#include "calibrate/kineto/kineto_fit.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <iomanip>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "base/errors.hpp"
#include "base/json_reader.hpp"
#include "calibrate/fit/fit.hpp"
#include "calibrate/fit/profile_fit.hpp"
#include "calibrate/kineto/kineto_kernels.hpp"
#include "model/cost_model.hpp"
#include "model/gpu_kind.hpp"

namespace lcsim {
namespace {

std::string fixed(double v, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << v;
  return out.str();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

int count_held(std::size_t n) {
  const auto mask = held_out_mask(n, kMeasuredHoldOutEvery);
  return static_cast<int>(std::count(mask.begin(), mask.end(), true));
}

double product(const std::vector<std::int64_t>& dims, std::size_t from, std::size_t to) {
  double p = 1;
  for (std::size_t i = from; i < to; ++i) p *= static_cast<double>(dims[i]);
  return p;
}

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

/// When the trace starts, in ns since the epoch: Kineto writes timestamps in us relative to
/// baseTimeNanoseconds (its traces' first events sit weeks after it), so the start is the base plus the earliest
/// step, op or kernel.
std::uint64_t trace_start_ns(const KinetoTrace& t) {
  double first = std::numeric_limits<double>::infinity();
  for (const auto& s : t.steps) first = std::min(first, s.ts_us);
  for (const auto& o : t.ops) first = std::min(first, o.ts_us);
  for (const auto& k : t.kernels) first = std::min(first, k.ts_us);
  if (!std::isfinite(first) || first <= 0 || first > 1e15) return *t.base_time_ns;  // none, or not relative
  return *t.base_time_ns + static_cast<std::uint64_t>(first * 1e3);
}

struct Fitter {
  const std::vector<KinetoTrace>& traces;
  const TraceFitOptions& options;
  Profile p;
  TraceFit out;
  std::vector<std::string> fitted_notes, kept_notes;

  double peak() const { return p.compute.peak_tflops * 1e12; }

  void line(TraceFieldLine l) {
    if (l.fitted) {
      ++out.fitted_fields;
      fitted_notes.push_back(l.field);
    } else {
      kept_notes.push_back(l.field + " (" + l.detail + ")");
    }
    out.report.push_back(std::move(l));
  }

  void check_efficiency(double e, std::size_t trace, const std::string& what) const {
    if (e > 1) {
      throw InputError(traces[trace].file + ": " + what + " ran at " + fixed(e * 100, 1) + " % of the prior's peak " +
                       fixed(p.compute.peak_tflops, 0) + " TFLOP/s: the prior is for another GPU (pass --prior)");
    }
  }

  /// Three or more points: the calibration's curve through them. Fewer leave nothing to hold out and would make
  /// the curve flat beyond them, so the prior's curve keeps its shape, scaled by the median measured / prior ratio.
  std::string set_curve(Curve& target, const std::vector<double>& x, const std::vector<double>& e,
                        const std::string& what) const {
    if (x.size() >= 3) {
      target = efficiency_curve(x, e, kMeasuredHoldOutEvery, what);
      return "";
    }
    std::vector<double> ratios;
    for (std::size_t i = 0; i < x.size(); ++i) ratios.push_back(e[i] / target.at(x[i]));
    const double r = median(ratios);
    for (auto& y : target.y) y = std::min(1.0, y * r);
    target.fit_mape = std::nullopt;
    return "; " + std::to_string(x.size()) + " point(s): the prior's curve scaled by " + fixed(r, 3) +
           " (3 or more are fitted as a curve with a held-out error)";
  }

  void gemm() {
    const auto times = kernel_time_by_op(traces, "gemm");
    std::map<double, std::vector<double>> by_tokens;
    int other_dtype = 0, no_shape = 0, backward = 0;
    for (const auto& [key, seconds] : times) {
      const KinetoTrace& t = traces[key.first];
      const KinetoCpuOp& op = t.ops[static_cast<std::size_t>(key.second)];
      // Backward matmuls run on autograd's device threads; their first dimension is not the token count.
      if (!t.steps.empty() && op.tid != t.step_thread) {
        ++backward;
        continue;
      }
      const auto shape = gemm_shape(op);
      if (!shape) {
        ++no_shape;
        continue;
      }
      if (!half_precision(op)) {
        ++other_dtype;
        continue;
      }
      if (!(seconds > 0)) continue;
      const double eff = 2 * shape->tokens * shape->n * shape->k / (seconds * peak());
      check_efficiency(eff, key.first, op.name + " at " + fixed(shape->tokens, 0) + " tokens");
      by_tokens[shape->tokens].push_back(eff);
    }
    std::string skipped = std::to_string(backward) + " backward, " + std::to_string(no_shape) +
                          " without matmul Input Dims, " + std::to_string(other_dtype) +
                          " not BF16/FP16 (the efficiencies refer to the BF16 peak)";
    if (by_tokens.empty()) {
      line({"compute.gemm_efficiency", false, 0, 0, std::nullopt,
            "no forward BF16/FP16 matmul with recorded shapes (record_shapes=True) among " +
                std::to_string(times.size()) + " GEMM ops: " + skipped});
      return;
    }
    std::vector<double> x, e;
    for (const auto& [tokens, effs] : by_tokens) {
      x.push_back(tokens);
      e.push_back(median(effs));
    }
    const std::string scaled = set_curve(p.compute.gemm_efficiency, x, e, traces.front().file + ": GEMM");
    const auto& c = p.compute.gemm_efficiency;
    line({"compute.gemm_efficiency", true, static_cast<int>(x.size()), count_held(x.size()), c.fit_mape,
          fixed(c.y.front(), 3) + " at " + fixed(c.x.front(), 0) + " .. " + fixed(c.y.back(), 3) + " at " +
              fixed(c.x.back(), 0) + " tokens (median over ops per token count; not used: " + skipped + ")" + scaled});
  }

  void attention() {
    // Kernel time per attention op: the kernels of the family, summed over the op they resolve to.
    std::map<std::pair<std::size_t, int>, double> times;
    for (std::size_t t = 0; t < traces.size(); ++t) {
      for (const auto& k : traces[t].kernels) {
        if (k.family != "attention" || k.op < 0) continue;
        if (!traces[t].steps.empty() && k.step < 0) continue;
        const int a = attention_op_of(traces[t], k.op);
        times[{t, a >= 0 ? a : k.op}] += k.dur_us * 1e-6;
      }
    }
    // Per shape (trace, batch, heads, length, head_dim, causal): forward and backward kernel seconds.
    using Shape = std::tuple<std::size_t, double, double, double, double, bool>;
    std::map<Shape, std::pair<std::vector<double>, std::vector<double>>> by_shape;
    std::map<double, std::vector<double>> by_len;
    int varlen = 0, no_shape = 0, no_causal = 0, backward = 0;
    for (const auto& [key, seconds] : times) {
      const KinetoTrace& t = traces[key.first];
      const KinetoCpuOp& op = t.ops[static_cast<std::size_t>(key.second)];
      const AttentionOp* kind = attention_kind(op);
      if (!kind) {
        ++(op.name.find("varlen") != std::string::npos || op.name == "aten::_flash_attention_forward" ? varlen
                                                                                                      : no_shape);
        continue;
      }
      if (kind->backward) ++backward;
      if (op.input_dims.size() <= kind->q_index) {
        ++no_shape;
        continue;
      }
      const auto& q = op.input_dims[kind->q_index];
      if (q.size() != 4) {
        ++(q.size() == 3 ? varlen : no_shape);
        continue;
      }
      if (op.concrete_inputs.size() <= kind->causal_index ||
          (op.concrete_inputs[kind->causal_index] != "True" && op.concrete_inputs[kind->causal_index] != "False")) {
        ++no_causal;
        continue;
      }
      const bool causal = op.concrete_inputs[kind->causal_index] == "True";
      const double b = static_cast<double>(q[0]);
      const double s = static_cast<double>(kind->heads_first ? q[2] : q[1]);
      const double h = static_cast<double>(kind->heads_first ? q[1] : q[2]);
      const double d = static_cast<double>(q[3]);
      if (!(seconds > 0)) continue;
      auto& samples = by_shape[{key.first, b, h, s, d, causal}];
      (kind->backward ? samples.second : samples.first).push_back(seconds);
      if (kind->backward) continue;
      // The profile's convention: causal forward FLOPs 2 s^2 q_hidden; a full mask does twice the work.
      const double flops = b * (causal ? 2.0 : 4.0) * s * s * h * d;
      const double eff = flops / (seconds * peak());
      check_efficiency(eff, key.first, op.name + " at sequence length " + fixed(s, 0));
      by_len[s].push_back(eff);
    }
    const std::string skipped = std::to_string(varlen) + " varlen (lengths are tensor values, not recorded), " +
                                std::to_string(no_shape) + " without dense q shapes, " + std::to_string(no_causal) +
                                " without is_causal";
    if (by_len.empty()) {
      line({"compute.attention_efficiency", false, 0, 0, std::nullopt,
            "no forward SDPA/FlashAttention op with dense shapes among " + std::to_string(times.size()) +
                " attention ops: " + std::to_string(backward) + " backward, " + skipped});
    } else {
      std::vector<double> x, e;
      std::size_t used = 0;
      for (const auto& [len, effs] : by_len) {
        x.push_back(len);
        e.push_back(median(effs));
        used += effs.size();
      }
      const std::string scaled = set_curve(p.compute.attention_efficiency, x, e, traces.front().file + ": attention");
      const auto& c = p.compute.attention_efficiency;
      line({"compute.attention_efficiency", true, static_cast<int>(x.size()), count_held(x.size()), c.fit_mape,
            fixed(c.y.front(), 3) + " at " + fixed(c.x.front(), 0) + " .. " + fixed(c.y.back(), 3) + " at " +
                fixed(c.x.back(), 0) + " (median per length over " + std::to_string(used) +
                " forward ops; not used: " + skipped + ")" + scaled});
    }
    // Backward / forward: a backward op's shapes and mask pair it with the forward ops of the same shape (the
    // trace records no link from an autograd node's kernels to the forward op they differentiate).
    std::vector<double> fwd, bwd;
    int unpaired = 0;
    for (const auto& [shape, samples] : by_shape) {
      if (samples.first.empty() || samples.second.empty()) {
        unpaired += static_cast<int>(samples.second.size());
        continue;
      }
      fwd.push_back(median(samples.first));
      bwd.push_back(median(samples.second));
    }
    if (fwd.empty()) {
      line({"compute.attention_backward_ratio", false, 0, 0, std::nullopt,
            backward == 0 ? "no backward SDPA/FlashAttention op in the traces' steps"
                          : "no backward SDPA/FlashAttention op with dense shapes and is_causal beside a forward op of "
                            "the same shape (" +
                                std::to_string(backward) + " backward ops)"});
      return;
    }
    const auto ratio = proportional_held_out(fwd, bwd, kMeasuredHoldOutEvery);
    p.compute.attention_backward_ratio = ratio.slope;
    const auto [lo, hi] = std::minmax_element(fwd.begin(), fwd.end());
    const std::string range = fixed(bwd[static_cast<std::size_t>(lo - fwd.begin())] / *lo, 2) + " at the shortest .. " +
                              fixed(bwd[static_cast<std::size_t>(hi - fwd.begin())] / *hi, 2) + " at the longest";
    line({"compute.attention_backward_ratio", true, static_cast<int>(fwd.size()), count_held(fwd.size()),
          ratio.held_out_mape,
          fixed(ratio.slope, 3) + " (backward / forward kernel time through the origin, median per shape; " + range +
              (unpaired ? "; " + std::to_string(unpaired) + " backward ops without a forward op of their shape" : "") +
              ")"});
  }

  std::optional<LinkClass> link_of(const KinetoCollective& c, const KinetoTrace& t, std::string& why) const {
    const int g = options.gpus_per_node;
    if (!c.ranks.empty()) {
      const int node = c.ranks.front() / g;
      const bool one = std::all_of(c.ranks.begin(), c.ranks.end(), [&](int r) { return r / g == node; });
      return one ? LinkClass::NvLink : LinkClass::InfiniBand;
    }
    if (t.world_size && *t.world_size <= g) return LinkClass::NvLink;
    why = "group ranks not recorded and the job spans more than one node";
    return std::nullopt;
  }

  void collectives() {
    using Key = std::tuple<CollectiveOp, LinkClass, int>;
    std::map<Key, std::map<double, std::vector<double>>> samples;
    std::map<std::string, int> skipped;
    int kernels = 0;
    for (const auto& t : traces) {
      for (const auto& k : t.kernels) {
        if (k.family != "collective") continue;
        if (!t.steps.empty() && k.step < 0) continue;
        ++kernels;
        const KinetoCollective* c = k.collective ? &*k.collective : nullptr;
        if (!c && k.op >= 0) {
          const auto& op = t.ops[static_cast<std::size_t>(k.op)];
          if (op.collective) c = &*op.collective;
        }
        if (!c) {
          ++skipped["no c10d metadata (recent PyTorch records it)"];
          continue;
        }
        std::string why;
        const auto size = collective_size(*c, why);
        if (!size) {
          ++skipped[why];
          continue;
        }
        if (c->group_size < 2) {
          ++skipped["group of " + std::to_string(c->group_size) + " GPU"];
          continue;
        }
        const auto link = link_of(*c, t, why);
        if (!link) {
          ++skipped[why];
          continue;
        }
        const int group = size->op == CollectiveOp::SendRecv ? 2 : c->group_size;
        samples[{size->op, *link, group}][size->bytes].push_back(k.dur_us * 1e-6);
      }
    }
    std::string skipped_text;
    for (const auto& [why, n] : skipped)
      skipped_text += (skipped_text.empty() ? "" : ", ") + std::to_string(n) + " " + why;
    if (samples.empty()) {
      line({"collectives", false, 0, 0, std::nullopt,
            kernels == 0 ? "no NCCL kernels in the traces' steps"
                         : std::to_string(kernels) + " NCCL kernels, none usable: " + skipped_text});
      return;
    }
    std::set<std::pair<CollectiveOp, LinkClass>> replaced;
    for (const auto& [key, by_size] : samples) {
      const auto& [op, link, group] = key;
      const std::string field = "collectives " + std::string(to_string(op)) + " " + std::string(to_string(link)) +
                                " n=" + std::to_string(group);
      std::vector<CollectiveSample> points;
      int calls = 0;
      for (const auto& [bytes, seconds] : by_size) {
        points.push_back({bytes, median(seconds)});
        calls += static_cast<int>(seconds.size());
      }
      if (points.size() < 2) {
        line({field, false, 1, 0, std::nullopt,
              std::to_string(calls) + " call(s) of one size " + fixed(points.front().bytes, 0) +
                  " B: latency and bandwidth need two sizes or more"});
        continue;
      }
      try {
        const auto fit = fit_collective_segments(points, op, group, kMeasuredHoldOutEvery);
        const CollectiveFit entry = fit.to_profile_entry(link, true);
        if (!replaced.count({op, link})) {
          // As a calibration does: a measured group size stands for its neighbours better than a derived prior.
          // (Named copies: clang 14 cannot capture structured bindings.)
          const CollectiveOp fitted_op = op;
          const LinkClass fitted_link = link;
          std::erase_if(p.collectives,
                        [&](const CollectiveFit& e) { return e.op == fitted_op && e.link == fitted_link; });
          const std::string parameter = collective_parameter(fitted_op, fitted_link);
          std::erase_if(p.provenance.fitted_on, [&](const FittedOn& f) { return f.parameter == parameter; });
          replaced.insert({op, link});
        }
        p.collectives.push_back(entry);
        std::string result;
        for (const auto& s : entry.segments) {
          if (!result.empty()) result += "; ";
          result += fixed(s.latency_us, 1) + " us + " + fixed(s.bus_GBps, 1) + " GB/s";
          if (std::isfinite(s.max_bytes)) result += " up to " + fixed(s.max_bytes / 1024, 0) + " KiB";
        }
        line({field, true, static_cast<int>(points.size()), count_held(points.size()), entry.fit_mape,
              result + " (" + std::to_string(calls) +
                  " calls, median per size; kernel time includes waiting for "
                  "the slowest rank)"});
      } catch (const InputError& e) {
        line(
            {field, false, static_cast<int>(points.size()), 0, std::nullopt, std::string("not fittable: ") + e.what()});
      }
    }
    std::stable_sort(p.collectives.begin(), p.collectives.end(), [](const CollectiveFit& a, const CollectiveFit& b) {
      return std::tie(a.link, a.op, a.group_size) < std::tie(b.link, b.op, b.group_size);
    });
    if (!skipped_text.empty()) kept_notes.push_back("NCCL kernels not used: " + skipped_text);
  }

  std::vector<double> step_busy_s;  ///< the first trace's steps with kernels: the union of their kernels' time

  void steps() {
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
        if (&t == &traces.front()) step_busy_s.push_back(busy * 1e-6);
        ++steps;
        step_sum += t.steps[s].dur_us * 1e-6;
        busy_sum += busy * 1e-6;
        idle_sum += (last - first - busy) * 1e-6;
      }
    }
    out.steps.steps = steps;
    if (steps == 0) {
      line({"framework per-step overhead", false, 0, 0, std::nullopt,
            "no ProfilerStep#N window with kernels (profile with a schedule and call prof.step())"});
      return;
    }
    out.steps.mean_step_s = step_sum / steps;
    out.steps.mean_gpu_idle_s = idle_sum / steps;
    out.steps.mean_gpu_busy_s = busy_sum / steps;
    // Traced times: the profiler's own CPU cost is in them, so the floor is fitted from untraced ones (issue_floor).
    out.report.push_back({"framework per-step overhead", false, steps, 0, std::nullopt,
                          "measured while traced: GPU idle " + fixed(out.steps.mean_gpu_idle_s * 1e3, 3) +
                              " ms between kernels per step (busy " + fixed(out.steps.mean_gpu_busy_s * 1e3, 3) +
                              " ms; step " + fixed(out.steps.mean_step_s * 1e3, 3) + " ms), recorded in the notes",
                          true});
  }

  /// The framework's CPU floor from the job's untraced step times: a step whose kernels keep the GPU busy less
  /// than 80% of it waited for the CPU (docs/calibration.md). One model's trace cannot split the floor into
  /// per-layer and per-step parts, so it is charged per layer: the median over those steps of their time less the
  /// LM head's and optimizer's kernels, over the layers, so that the cost model's CPU-bound step is the floor.
  void issue_floor() {
    const auto& untraced = options.untraced_steps;
    const std::string field = "compute.layer_issue_us";
    if (untraced.empty()) {
      line({field, false, 0, 0, std::nullopt, "needs the job's untraced step times (--untraced STEPS.json)"});
      return;
    }
    if (!options.model) throw InputError("--untraced: the floor is per layer, so the traced model is needed (--model)");
    if (traces.size() != 1) throw InputError("--untraced: one trace (the untraced times are one job's steps)");
    if (untraced.size() != step_busy_s.size())
      throw InputError(traces.front().file + ": " + std::to_string(step_busy_s.size()) +
                       " ProfilerStep windows with kernels, but " + std::to_string(untraced.size()) +
                       " untraced step times");
    // The layers the job ran (a trace of a model cut to fewer layers, as torch_trace_step.py --layers makes): the
    // median over its steps of what their forward matmuls add up to.
    ModelConfig model = *options.model;
    std::vector<double> counted;
    {
      const CostModel cost(model, one_gpu_cluster(p, 0), p);
      for (const StepWork& w : step_work())
        if (const double n = step_layers(w, cost); n >= 1) counted.push_back(n);
    }
    if (counted.empty())
      throw InputError(traces.front().file + ": --untraced: no step whose forward matmuls add up to layers of " +
                       model.name + " (record_shapes=True)");
    std::sort(counted.begin(), counted.end());
    model.layers = static_cast<int>(counted[counted.size() / 2]);
    // The step on one GPU as the cost model prices it: the layers, the LM head (nothing recomputed, as a plain
    // training loop runs) and the optimizer over every parameter. On a CPU-bound step the floor covers the head's
    // and the optimizer's kernels too, so the layers' share of it is what the step took less those.
    CostModelOptions plain;
    plain.zero_stage = 0;
    ParallelScheme scheme;
    scheme.recompute = Recompute::None;
    const auto step_s = [&](const CostModel& cost, double tokens, int layers) {
      const SequenceShare one{static_cast<Tokens>(std::llround(tokens)), 1};
      return cost.compute_seconds(std::span(&one, 1), scheme, LayerSpan{0, layers}, true) +
             cost.optimizer_seconds(scheme, 1, 0);
    };
    const CostModel no_floor(model, one_gpu_cluster(p, 0), p, plain);
    std::vector<double> per_layer;
    for (std::size_t i = 0; i < untraced.size(); ++i)
      if (step_busy_s[i] < 0.8 * untraced[i].seconds)
        per_layer.push_back((untraced[i].seconds - step_s(no_floor, untraced[i].tokens, 0)) / model.layers);
    if (per_layer.empty()) {
      line({field, false, static_cast<int>(untraced.size()), 0, std::nullopt,
            "every step kept the GPU busy: no CPU floor shows (prior kept)"});
      return;
    }
    std::sort(per_layer.begin(), per_layer.end());
    const double layer_s = per_layer[per_layer.size() / 2];
    if (!(layer_s > 0)) {
      line({field, false, static_cast<int>(untraced.size()), 0, std::nullopt,
            "the LM head's and optimizer's kernels alone exceed the CPU-bound steps (prior kept)"});
      return;
    }
    p.compute.layer_issue_us = layer_s * 1e6;
    p.compute.step_issue_us = 0;
    double sum = 0;  // every step against the cost model with the floor: the GPU-bound ones were not fitted on
    const CostModel floored(model, one_gpu_cluster(p, 0), p, plain);
    for (const UntracedStep& u : untraced) sum += std::abs(step_s(floored, u.tokens, model.layers) / u.seconds - 1);
    line({field, true, static_cast<int>(untraced.size()), static_cast<int>(untraced.size() - per_layer.size()),
          sum / static_cast<double>(untraced.size()),
          fixed(p.compute.layer_issue_us, 1) + " us a layer (median of " + std::to_string(per_layer.size()) +
              " CPU-bound steps, less their LM head and optimizer kernels, over " + std::to_string(model.layers) +
              " layers); error: every untraced step against the cost model's step with the floor"});
  }

  /// One step's GEMM and element-wise kernel time and what its forward matmuls say of it: their rows (the
  /// step's tokens) and FLOPs.
  struct StepWork {
    double gemm_s = 0, elementwise_s = 0, tokens = 0, forward_flops = 0;
  };
  std::vector<StepWork> step_work() const {
    std::vector<StepWork> work;
    for (const auto& t : traces) {
      std::vector<StepWork> steps(t.steps.size());
      std::vector<std::set<int>> gemm_ops(t.steps.size());
      for (const auto& k : t.kernels) {
        if (k.step < 0) continue;
        StepWork& s = steps[static_cast<std::size_t>(k.step)];
        if (k.family == "gemm") {
          s.gemm_s += k.dur_us * 1e-6;
          if (k.op >= 0) gemm_ops[static_cast<std::size_t>(k.step)].insert(k.op);
        } else if (k.family == kOtherKernelFamily) {
          s.elementwise_s += k.dur_us * 1e-6;
        }
      }
      for (std::size_t i = 0; i < steps.size(); ++i) {
        for (int op : gemm_ops[i]) {
          const KinetoCpuOp& o = t.ops[static_cast<std::size_t>(op)];
          if (o.tid != t.step_thread) continue;  // backward matmuls: not the token count
          if (const auto shape = gemm_shape(o)) {
            steps[i].tokens = std::max(steps[i].tokens, shape->tokens);
            steps[i].forward_flops += 2 * shape->tokens * shape->n * shape->k;
          }
        }
        if (steps[i].gemm_s > 0 && steps[i].tokens > 0) work.push_back(steps[i]);
      }
    }
    return work;
  }

  /// The layers a step ran, from its forward matmuls' FLOPs per token less the LM head's, over one layer's.
  static double step_layers(const StepWork& s, const CostModel& cost) {
    return std::round((s.forward_flops / s.tokens - cost.head_flops_per_token()) / cost.gemm_flops_per_token());
  }

  /// k (`gemm_work_overhead`) and the layer's fixed cost (`layer_overhead_us`) from the element-wise kernels' time
  /// (the "other" family: norms, activations, copies, the loss) less the cost model's floor for them (docs/model.md:
  /// the layers' and the loss's least HBM traffic): per layer, other - floor = k x GEMM + fixed, the calibration's
  /// own joint fit (fit_layer_overhead) over the steps. A step's layers come from its forward matmul FLOPs, the
  /// layers' GEMM time from its GEMM kernels less the LM head's share of the FLOPs. Steps of one token count cannot
  /// tell the two apart: then k is the median share and the fixed cost stays the prior's.
  void elementwise_share() {
    const std::string field = "compute.gemm_work_overhead", fixed_field = "compute.layer_overhead_us";
    const auto missing = [&](const std::string& why) {
      line({field, false, 0, 0, std::nullopt, why});
      line({fixed_field, false, 0, 0, std::nullopt, why});
    };
    if (!options.model) {
      missing("needs the traced model (--model): the element-wise floor it is measured above depends on its widths");
      return;
    }
    const ModelConfig& model = *options.model;
    const ClusterSpec cluster = one_gpu_cluster(p, 0);
    if (!(cluster.gpu.hbm_TBps > 0)) {
      missing("the prior's GPU '" + p.gpu + "' has no datasheet HBM bandwidth");
      return;
    }
    const CostModel cost(model, cluster, p);
    const auto layer_bytes = cost.layer_elementwise_bytes_per_token();
    const auto loss_bytes = cost.head_elementwise_bytes_per_token();
    const double layer_flops = cost.gemm_flops_per_token(), head_flops = cost.head_flops_per_token();
    const double rate = cluster.gpu.hbm_TBps * 1e12;
    struct Point {  // per layer
      double tokens, floor_s, gemm_s, elementwise_s;
    };
    std::vector<Point> points;
    int no_layers = 0;
    for (const StepWork& s : step_work()) {
      const double layers = step_layers(s, cost);
      if (layers < 1) {
        ++no_layers;
        continue;
      }
      const double floor_s =
          s.tokens *
          (layers * (layer_bytes.forward + layer_bytes.backward) + loss_bytes.forward + loss_bytes.backward) / rate;
      const double layer_gemm_s = s.gemm_s * layers * layer_flops / (layers * layer_flops + head_flops);
      points.push_back({s.tokens, floor_s / layers, layer_gemm_s / layers, s.elementwise_s / layers});
    }
    if (points.empty()) {
      missing("no step with forward matmuls of recorded shapes and GEMM kernels" +
              (no_layers
                   ? " (" + std::to_string(no_layers) + " whose matmuls do not add up to a layer of " + model.name + ")"
                   : std::string()));
      return;
    }
    // Every 3rd step by token count held out (as the calibration's curves).
    std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) { return a.tokens < b.tokens; });
    std::vector<double> base, gemm, measured, shares;
    std::vector<const Point*> held;
    std::set<double> token_counts;
    const auto mask = held_out_mask(points.size(), kMeasuredHoldOutEvery);
    for (std::size_t i = 0; i < points.size(); ++i) {
      const Point& pt = points[i];
      if (mask[i]) {
        held.push_back(&pt);
        continue;
      }
      base.push_back(pt.floor_s), gemm.push_back(pt.gemm_s), measured.push_back(pt.elementwise_s);
      shares.push_back((pt.elementwise_s - pt.floor_s) / pt.gemm_s);
      token_counts.insert(pt.tokens);
    }
    const bool joint = token_counts.size() >= 2;
    double share = median(shares), fixed_s = p.compute.layer_overhead_us * 1e-6;
    std::string clamped;
    if (joint) {
      const LayerOverheadFit fit = fit_layer_overhead(base, gemm, measured);
      share = fit.gemm_share, fixed_s = fit.fixed_seconds;
      for (const auto& c : fit.clamped) clamped += "; fitted " + c + ", stored as 0";
    }
    std::optional<double> mape;
    if (!held.empty()) {
      double sum = 0;
      for (const Point* h : held)
        sum += std::abs(h->floor_s + share * h->gemm_s + (joint ? fixed_s : 0) - h->elementwise_s) / h->elementwise_s;
      mape = sum / static_cast<double>(held.size());
    }
    const int n = static_cast<int>(points.size()), n_held = static_cast<int>(held.size());
    p.compute.gemm_work_overhead = std::max(0.0, share);
    const std::string beyond = "; the element-wise kernels beyond their HBM floor";
    if (!joint) {
      line({field, true, n, n_held, mape,
            fixed(p.compute.gemm_work_overhead, 3) + " of the layers' GEMM time (median over steps of one token count" +
                beyond + (share < 0 ? "; fitted " + fixed(share, 3) + ", stored as 0" : std::string()) + ")"});
      line({fixed_field, false, 0, 0, std::nullopt,
            "needs steps of at least two token counts to tell a fixed cost from a share of the GEMMs"});
      return;
    }
    p.compute.layer_overhead_us = fixed_s * 1e6;
    p.compute.layer_overhead_fit_mape = mape;  // of the element-wise time alone: wider than a whole layer's
    const std::string how = " (joint fit per layer over steps, other - floor = k GEMM + fixed" + beyond + clamped + ")";
    line({field, true, n, n_held, mape, fixed(p.compute.gemm_work_overhead, 3) + " of the layers' GEMM time" + how});
    line({fixed_field, true, n, n_held, mape, fixed(p.compute.layer_overhead_us, 1) + " us a layer" + how});
  }

  void kept_fields() {
    line({"compute.optimizer_us_per_mparam", false, 0, 0, std::nullopt,
          "the trace does not say how many parameters the optimizer step updated"});
    line({"memory.*", false, 0, 0, std::nullopt, "activation memory needs allocator probes, not kernel times"});
  }

  void provenance(const Profile& prior) {
    auto& pv = p.provenance;
    for (const auto& entry : options.fitted_on)
      for (const auto& field : fitted_notes) pv.fitted_on.push_back({entry, field});
    std::string device, files;
    std::optional<std::uint64_t> base;
    for (const auto& t : traces) {
      files += (files.empty() ? "" : ", ") + t.file;
      if (!t.device_name.empty() && device.empty()) device = t.device_name;
      if (t.base_time_ns && !base) base = trace_start_ns(t);
    }
    pv.calibrated = true;
    pv.source = "PyTorch profiler trace";
    pv.device = device.empty() ? "unknown (the traces have no deviceProperties)" : device;
    if (base) {
      const std::time_t secs = static_cast<std::time_t>(*base / 1000000000u);
      std::tm tm{};
      gmtime_r(&secs, &tm);
      char text[32];
      std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
      pv.date = text;
    } else {
      pv.date = "unknown (the traces have no baseTimeNanoseconds)";
    }
    pv.tool_version = LCSIM_VERSION;
    pv.driver = pv.cuda = pv.nccl = "";
    pv.model = "";
    std::string notes = "Fitted by lcsim-fit-trace from " + std::to_string(traces.size()) +
                        " PyTorch profiler trace(s): " + files + ". Fitted: ";
    for (std::size_t i = 0; i < fitted_notes.size(); ++i) notes += (i ? "; " : "") + fitted_notes[i];
    notes += ". Kept from the prior (" + prior.label() + "): peak_tflops " + fixed(p.compute.peak_tflops, 0) +
             " (efficiencies refer to it), network, logits bytes, static bytes per parameter, reserve";
    for (const auto& k : kept_notes) notes += "; " + k;
    notes += ". Held-out MAPE:";
    for (const auto& l : out.report) {
      if (l.held_out_mape) notes += " " + l.field + " " + fixed(*l.held_out_mape * 100, 1) + " %;";
    }
    if (out.steps.steps > 0) {
      notes += " Measured step: " + fixed(out.steps.mean_step_s * 1e3, 3) + " ms mean over " +
               std::to_string(out.steps.steps) + " ProfilerStep windows; GPU idle between kernels inside a step " +
               "while traced (the profiler's CPU cost included; the CPU floor is layer_issue_us, fitted from " +
               "untraced steps): " + fixed(out.steps.mean_gpu_idle_s * 1e3, 3) + " ms per step.";
    }
    pv.notes = notes;
    const std::string kind = match_gpu_kind(device);
    if (!kind.empty()) p.gpu = kind;
  }
};

}  // namespace

std::optional<GemmShape> gemm_shape(const KinetoCpuOp& op) {
  const auto& d = op.input_dims;
  auto dims = [&](std::size_t i, std::size_t rank) { return i < d.size() && d[i].size() == rank; };
  if (op.name == "aten::mm" && dims(0, 2) && dims(1, 2)) {
    return GemmShape{double(d[0][0]), double(d[1][1]), double(d[0][1])};
  }
  if (op.name == "aten::addmm" && dims(1, 2) && dims(2, 2)) {
    return GemmShape{double(d[1][0]), double(d[2][1]), double(d[1][1])};
  }
  if (op.name == "aten::bmm" && dims(0, 3) && dims(1, 3)) {
    return GemmShape{double(d[0][0]) * double(d[0][1]), double(d[1][2]), double(d[0][2])};
  }
  if (op.name == "aten::baddbmm" && dims(1, 3) && dims(2, 3)) {
    return GemmShape{double(d[1][0]) * double(d[1][1]), double(d[2][2]), double(d[1][2])};
  }
  if ((op.name == "aten::linear" || op.name == "aten::matmul") && d.size() >= 2 && d[0].size() >= 2 &&
      d[1].size() == 2) {
    const auto& x = d[0];
    // linear's weight is [out, in]; matmul's second operand is [in, out].
    const bool linear = op.name == "aten::linear";
    return GemmShape{product(x, 0, x.size() - 1), double(linear ? d[1][0] : d[1][1]), double(x.back())};
  }
  return std::nullopt;
}

std::optional<CollectiveSize> collective_size(const KinetoCollective& c, std::string& why) {
  static const std::map<std::string, CollectiveOp> kOps{
      {"allreduce", CollectiveOp::AllReduce},
      {"all_reduce", CollectiveOp::AllReduce},
      {"allreduce_coalesced", CollectiveOp::AllReduce},
      {"allgather", CollectiveOp::AllGather},
      {"all_gather", CollectiveOp::AllGather},
      {"_allgather_base", CollectiveOp::AllGather},
      {"allgather_into_tensor_coalesced", CollectiveOp::AllGather},
      {"all_gather_into_tensor_coalesced", CollectiveOp::AllGather},
      {"reduce_scatter", CollectiveOp::ReduceScatter},
      {"_reduce_scatter_base", CollectiveOp::ReduceScatter},
      {"reduce_scatter_tensor_coalesced", CollectiveOp::ReduceScatter},
      {"all_to_all", CollectiveOp::AllToAll},
      {"alltoall", CollectiveOp::AllToAll},
      {"alltoall_base", CollectiveOp::AllToAll},
      {"all_to_allv", CollectiveOp::AllToAll},
      {"send", CollectiveOp::SendRecv},
      {"recv", CollectiveOp::SendRecv},
  };
  static const std::map<std::string, double> kBytes{
      {"Float", 4},         {"Double", 8},      {"Half", 2},         {"BFloat16", 2}, {"Int", 4},
      {"Long", 8},          {"Short", 2},       {"Char", 1},         {"Byte", 1},     {"Bool", 1},
      {"Float8_e4m3fn", 1}, {"Float8_e5m2", 1}, {"ComplexFloat", 8}, {"UInt32", 4},   {"UInt64", 8}};
  const auto op = kOps.find(c.name);
  if (op == kOps.end()) {
    why = "\"" + c.name + "\" (no profile entry for it)";
    return std::nullopt;
  }
  const auto bytes = kBytes.find(c.dtype);
  if (bytes == kBytes.end()) {
    why = "dtype \"" + c.dtype + "\" unknown";
    return std::nullopt;
  }
  // nccl-tests' size: all_gather the gathered output; reduce_scatter, all_reduce, all_to_all the input buffer.
  const auto& n = op->second == CollectiveOp::AllGather ? c.out_nelems : c.in_nelems;
  const auto& other = op->second == CollectiveOp::AllGather ? c.in_nelems : c.out_nelems;
  std::optional<std::uint64_t> elements = n;
  if (op->second == CollectiveOp::SendRecv && (!n || *n == 0)) elements = other;  // a recv records its output
  if (!elements || *elements == 0) {
    why = "no message size (In/Out msg nelems)";
    return std::nullopt;
  }
  return CollectiveSize{op->second, static_cast<double>(*elements) * bytes->second};
}

TraceFit fit_profile_from_traces(const std::vector<KinetoTrace>& traces, const Profile& prior,
                                 const TraceFitOptions& options) {
  if (traces.empty()) throw InputError("no trace given");
  if (options.gpus_per_node < 1) throw InputError("--gpus-per-node: must be at least 1");
  for (const auto& t : traces) {
    if (!t.device_name.empty() && !traces.front().device_name.empty() && t.device_name != traces.front().device_name) {
      throw InputError(t.file + ": traced on " + t.device_name + ", " + traces.front().file + " on " +
                       traces.front().device_name + ": one profile describes one GPU kind");
    }
  }
  Fitter f{traces, options, prior, {}, {}, {}, {}};
  f.gemm();
  f.attention();
  f.collectives();
  f.elementwise_share();
  f.kept_fields();
  f.steps();
  f.issue_floor();
  f.provenance(prior);
  f.out.profile = std::move(f.p);
  return std::move(f.out);
}

std::vector<UntracedStep> read_untraced_steps(const std::string& file) {
  const nlohmann::json doc = parse_json_file(file);
  if (!doc.is_object() || !doc.contains("steps") || !doc["steps"].is_array() || doc["steps"].empty())
    throw InputError(file + ": steps: expected a non-empty array (calibrate/torch_trace_step.py --repeats)");
  std::vector<UntracedStep> out;
  for (std::size_t i = 0; i < doc["steps"].size(); ++i) {
    const auto& step = doc["steps"][i];
    const auto positive = [&](const char* key) {
      const std::string where = file + ": steps[" + std::to_string(i) + "]." + key;
      if (!step.is_object() || !step.contains(key))
        throw InputError(where + ": missing (record the steps with calibrate/torch_trace_step.py --repeats N)");
      const auto& v = step[key];
      if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
        throw InputError(where + ": expected a positive number");
      return v.get<double>();
    };
    out.push_back({positive("tokens"), positive("untraced_seconds")});
  }
  return out;
}

nlohmann::ordered_json trace_steps_results(const std::vector<KinetoTrace>& traces, const std::string& scenario_name,
                                           const std::string& scenario_file, const std::string& policy,
                                           std::span<const UntracedStep> untraced) {
  // A step ends when its slowest rank does: per step number, the longest ProfilerStep over the traces.
  std::map<std::int64_t, double> step_s;
  std::string device, files;
  for (const auto& t : traces) {
    for (const auto& s : t.steps) step_s[s.number] = std::max(step_s[s.number], s.dur_us * 1e-6);
    if (device.empty()) device = t.device_name;
    files += (files.empty() ? "" : ", ") + t.file;
  }
  if (step_s.empty()) throw InputError(traces.front().file + ": no ProfilerStep#N: no step time to measure");
  if (!untraced.empty() && untraced.size() != step_s.size())
    throw InputError(traces.front().file + ": " + std::to_string(step_s.size()) + " ProfilerStep numbers, but " +
                     std::to_string(untraced.size()) + " untraced step times");
  nlohmann::ordered_json iterations = nlohmann::ordered_json::array();
  double sum = 0;
  std::size_t k = 0;
  for (const auto& [number, traced_s] : step_s) {
    // Untraced: the job's own step time; a CPU-bound step takes about twice as long while the profiler records it.
    const double seconds = untraced.empty() ? traced_s : untraced[k++].seconds;
    iterations.push_back({{"step", number}, {"seconds", seconds}});
    sum += seconds;
  }
  nlohmann::ordered_json out;
  out["schema"] = "lcsim-results/1";
  out["mode"] = "live";
  out["scenario"] = scenario_name;
  out["scenario_file"] = scenario_file;
  out["baseline"] = policy;
  out["policies"] = nlohmann::ordered_json::array({{{"name", policy},
                                                    {"mean_iteration_s", sum / static_cast<double>(step_s.size())},
                                                    {"speedup_vs_baseline", 1.0},
                                                    {"oom_iterations", 0},
                                                    {"iterations", iterations}}});
  out["live"] = {
      {"execution", "the user's own training job, PyTorch profiler (Kineto) trace"},
      {"device", std::to_string(traces.size()) + " trace(s), " + (device.empty() ? "device unknown" : device)},
      {"notes",
       {"written by lcsim-fit-trace from " + files +
        (untraced.empty() ? "; seconds = the slowest rank's ProfilerStep#N duration, per step number (the profiler's "
                            "own overhead included)"
                          : "; seconds = the job's step times without the profiler (--untraced), in step order")}}};
  return out;
}

std::string format_trace_fit_report(const TraceFit& fit) {
  std::ostringstream out;
  out << std::left << std::setw(48) << "field" << std::setw(8) << "status" << std::setw(8) << "points" << std::setw(10)
      << "held-out"
      << "result / why\n";
  for (const auto& l : fit.report) {
    out << std::setw(48) << l.field << std::setw(8)
        << (l.fitted  ? "fitted"
            : l.noted ? "noted"
                      : "prior")
        << std::setw(8) << l.points << std::setw(10)
        << (l.held_out_mape ? fixed(*l.held_out_mape * 100, 1) + " %" : "n/a") << l.detail << "\n";
  }
  return out.str();
}

}  // namespace lcsim
