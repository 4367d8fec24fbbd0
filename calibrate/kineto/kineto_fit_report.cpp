// The report's text: one line per profile field from what its fit returned, the provenance notes, and the table
// lcsim-fit-trace prints.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "calibrate/kineto/kineto_field_fits.hpp"

namespace lcsim {
namespace trace_fit {
namespace {

/// "<y> at <x> .. <y> at <x>": the curve's two ends.
std::string curve_ends(const Curve& c) {
  return fixed(c.y.front(), 3) + " at " + fixed(c.x.front(), 0) + " .. " + fixed(c.y.back(), 3) + " at " +
         fixed(c.x.back(), 0);
}

/// What a curve of too few points says of itself; "" for a fitted curve.
std::string scaled_text(const CurveFit& fit) {
  if (!fit.prior_scale) return "";
  return "; " + std::to_string(fit.points) + " point(s): the prior's curve scaled by " + fixed(*fit.prior_scale, 3) +
         " (3 or more are fitted as a curve with a held-out error)";
}

TraceFieldLine curve_line(const std::string& field, const CurveFit& fit, const std::string& detail) {
  return {field, true, static_cast<int>(fit.points), count_held(fit.points), fit.curve.fit_mape, detail};
}

TraceFieldLine kept_line(const std::string& field, const std::string& why, int points = 0) {
  return {field, false, points, 0, std::nullopt, why};
}

void report_backward_ratio(const AttentionFit& fit, FieldReport& report) {
  const std::string field = "compute.attention_backward_ratio";
  if (!fit.backward_ratio) {
    report.add(kept_line(field, fit.backward == 0
                                    ? "no backward SDPA/FlashAttention op in the traces' steps"
                                    : "no backward SDPA/FlashAttention op with dense shapes and is_causal beside a "
                                      "forward op of the same shape (" +
                                          std::to_string(fit.backward) + " backward ops)"));
    return;
  }
  const auto& fwd = fit.forward_s;
  const auto& bwd = fit.backward_s;
  const auto [lo, hi] = std::minmax_element(fwd.begin(), fwd.end());
  const std::string range = fixed(bwd[static_cast<std::size_t>(lo - fwd.begin())] / *lo, 2) + " at the shortest .. " +
                            fixed(bwd[static_cast<std::size_t>(hi - fwd.begin())] / *hi, 2) + " at the longest";
  const std::string unpaired =
      fit.unpaired ? "; " + std::to_string(fit.unpaired) + " backward ops without a forward op of their shape" : "";
  report.add({field, true, static_cast<int>(fwd.size()), count_held(fwd.size()), fit.backward_ratio->held_out_mape,
              fixed(fit.backward_ratio->slope, 3) +
                  " (backward / forward kernel time through the origin, median per shape; " + range + unpaired + ")"});
}

std::string collective_field(const CollectiveGroupFit& group) {
  return "collectives " + std::string(to_string(group.op)) + " " + std::string(to_string(group.link)) +
         " n=" + std::to_string(group.group);
}

TraceFieldLine collective_line(const CollectiveGroupFit& group) {
  const std::string field = collective_field(group);
  const int points = static_cast<int>(group.points.size());
  if (group.points.size() < 2) {
    return kept_line(field,
                     std::to_string(group.calls) + " call(s) of one size " + fixed(group.points.front().bytes, 0) +
                         " B: latency and bandwidth need two sizes or more",
                     1);
  }
  if (!group.entry) return kept_line(field, "not fittable: " + group.error, points);
  std::string result;
  for (const auto& s : group.entry->segments) {
    if (!result.empty()) result += "; ";
    result += fixed(s.latency_us, 1) + " us + " + fixed(s.bus_GBps, 1) + " GB/s";
    if (std::isfinite(s.max_bytes)) result += " up to " + fixed(s.max_bytes / 1024, 0) + " KiB";
  }
  return {field,
          true,
          points,
          count_held(group.points.size()),
          group.entry->fit_mape,
          result + " (" + std::to_string(group.calls) +
              " calls, median per size; kernel time includes waiting for the slowest rank)"};
}

}  // namespace

void FieldReport::add(TraceFieldLine line) {
  if (line.fitted) {
    ++fitted_fields;
    fitted.push_back(line.field);
  } else {
    kept.push_back(line.field + " (" + line.detail + ")");
  }
  lines.push_back(std::move(line));
}

void report_gemm_efficiency(const GemmFit& fit, FieldReport& report) {
  const std::string field = "compute.gemm_efficiency";
  const std::string skipped = std::to_string(fit.backward) + " backward, " + std::to_string(fit.no_shape) +
                              " without matmul Input Dims, " + std::to_string(fit.other_dtype) +
                              " not BF16/FP16 (the efficiencies refer to the BF16 peak)";
  if (!fit.efficiency) {
    report.add(kept_line(field, "no forward BF16/FP16 matmul with recorded shapes (record_shapes=True) among " +
                                    std::to_string(fit.ops) + " GEMM ops: " + skipped));
    return;
  }
  const CurveFit& c = *fit.efficiency;
  report.add(curve_line(
      field, c,
      curve_ends(c.curve) + " tokens (median over ops per token count; not used: " + skipped + ")" + scaled_text(c)));
}

void report_attention(const AttentionFit& fit, FieldReport& report) {
  const std::string field = "compute.attention_efficiency";
  const std::string skipped = std::to_string(fit.varlen) + " varlen (lengths are tensor values, not recorded), " +
                              std::to_string(fit.no_shape) + " without dense q shapes, " +
                              std::to_string(fit.no_causal) + " without is_causal";
  if (!fit.efficiency) {
    report.add(kept_line(field, "no forward SDPA/FlashAttention op with dense shapes among " + std::to_string(fit.ops) +
                                    " attention ops: " + std::to_string(fit.backward) + " backward, " + skipped));
  } else {
    const CurveFit& c = *fit.efficiency;
    report.add(curve_line(field, c,
                          curve_ends(c.curve) + " (median per length over " + std::to_string(fit.forward_ops) +
                              " forward ops; not used: " + skipped + ")" + scaled_text(c)));
  }
  report_backward_ratio(fit, report);
}

void report_collectives(const CollectivesFit& fit, FieldReport& report) {
  std::string skipped_text;
  for (const auto& [why, n] : fit.skipped)
    skipped_text += (skipped_text.empty() ? "" : ", ") + std::to_string(n) + " " + why;
  if (fit.groups.empty()) {
    report.add(kept_line(
        "collectives", fit.kernels == 0 ? "no NCCL kernels in the traces' steps"
                                        : std::to_string(fit.kernels) + " NCCL kernels, none usable: " + skipped_text));
    return;
  }
  for (const CollectiveGroupFit& group : fit.groups) report.add(collective_line(group));
  if (!skipped_text.empty()) report.kept.push_back("NCCL kernels not used: " + skipped_text);
}

void report_elementwise_share(const ElementwiseShareFit& fit, const std::string& model_name, const std::string& gpu,
                              FieldReport& report) {
  using Missing = ElementwiseShareFit::Missing;
  const std::string field = "compute.gemm_work_overhead", fixed_field = "compute.layer_overhead_us";
  if (fit.missing != Missing::None) {
    const std::string why =
        fit.missing == Missing::Model
            ? "needs the traced model (--model): the element-wise floor it is measured above depends on its widths"
        : fit.missing == Missing::HbmBandwidth
            ? "the prior's GPU '" + gpu + "' has no datasheet HBM bandwidth"
            : "no step with forward matmuls of recorded shapes and GEMM kernels" +
                  (fit.no_layers ? " (" + std::to_string(fit.no_layers) +
                                       " whose matmuls do not add up to a layer of " + model_name + ")"
                                 : std::string());
    report.add(kept_line(field, why));
    report.add(kept_line(fixed_field, why));
    return;
  }
  const std::string beyond = "; the element-wise kernels beyond their HBM floor";
  if (!fit.joint) {
    report.add({field, true, fit.points, fit.held_out, fit.mape,
                fixed(fit.gemm_work_overhead, 3) + " of the layers' GEMM time (median over steps of one token count" +
                    beyond + (fit.share < 0 ? "; fitted " + fixed(fit.share, 3) + ", stored as 0" : std::string()) +
                    ")"});
    report.add(kept_line(fixed_field,
                         "needs steps of at least two token counts to tell a fixed cost from a share of the GEMMs"));
    return;
  }
  std::string clamped;
  for (const auto& c : fit.clamped) clamped += "; fitted " + c + ", stored as 0";
  const std::string how = " (joint fit per layer over steps, other - floor = k GEMM + fixed" + beyond + clamped + ")";
  report.add({field, true, fit.points, fit.held_out, fit.mape,
              fixed(fit.gemm_work_overhead, 3) + " of the layers' GEMM time" + how});
  report.add(
      {fixed_field, true, fit.points, fit.held_out, fit.mape, fixed(fit.layer_overhead_us, 1) + " us a layer" + how});
}

void report_steps(const StepTimes& steps, FieldReport& report) {
  const std::string field = "framework per-step overhead";
  const TraceStepSummary& s = steps.summary;
  if (s.steps == 0) {
    report.add(
        kept_line(field, "no ProfilerStep#N window with kernels (profile with a schedule and call prof.step())"));
    return;
  }
  // Traced times: the profiler's own CPU cost is in them, so the floor is fitted from untraced ones (issue floor).
  // Noted, not kept: it is neither counted as fitted nor listed among the prior's fields.
  report.lines.push_back({field, false, s.steps, 0, std::nullopt,
                          "measured while traced: GPU idle " + fixed(s.mean_gpu_idle_s * 1e3, 3) +
                              " ms between kernels per step (busy " + fixed(s.mean_gpu_busy_s * 1e3, 3) + " ms; step " +
                              fixed(s.mean_step_s * 1e3, 3) + " ms), recorded in the notes",
                          true});
}

void report_issue_floor(const IssueFloorFit& fit, FieldReport& report) {
  using Kept = IssueFloorFit::Kept;
  const std::string field = "compute.layer_issue_us";
  switch (fit.kept) {
    case Kept::NoUntraced:
      report.add(kept_line(field, "needs the job's untraced step times (--untraced STEPS.json)"));
      return;
    case Kept::GpuBusy:
      report.add(kept_line(field, "every step kept the GPU busy: no CPU floor shows (prior kept)", fit.points));
      return;
    case Kept::HeadExceeds:
      report.add(kept_line(field, "the LM head's and optimizer's kernels alone exceed the CPU-bound steps (prior kept)",
                           fit.points));
      return;
    case Kept::None:
      break;
  }
  report.add({field, true, fit.points, fit.points - fit.cpu_bound, fit.mape,
              fixed(fit.layer_issue_us, 1) + " us a layer (median of " + std::to_string(fit.cpu_bound) +
                  " CPU-bound steps, less their LM head and optimizer kernels, over " + std::to_string(fit.layers) +
                  " layers); error: every untraced step against the cost model's step with the floor"});
}

void report_kept_fields(FieldReport& report) {
  report.add(kept_line("compute.optimizer_us_per_mparam",
                       "the trace does not say how many parameters the optimizer step updated"));
  report.add(kept_line("memory.*", "activation memory needs allocator probes, not kernel times"));
}

std::string provenance_notes(const std::vector<KinetoTrace>& traces, const FieldReport& report,
                             const TraceStepSummary& steps, const Profile& prior, double peak_tflops) {
  std::string files;
  for (const auto& t : traces) files += (files.empty() ? "" : ", ") + t.file;
  std::string notes = "Fitted by lcsim-fit-trace from " + std::to_string(traces.size()) +
                      " PyTorch profiler trace(s): " + files + ". Fitted: ";
  for (std::size_t i = 0; i < report.fitted.size(); ++i) notes += (i ? "; " : "") + report.fitted[i];
  notes += ". Kept from the prior (" + prior.label() + "): peak_tflops " + fixed(peak_tflops, 0) +
           " (efficiencies refer to it), network, logits bytes, static bytes per parameter, reserve";
  for (const auto& k : report.kept) notes += "; " + k;
  notes += ". Held-out MAPE:";
  for (const auto& l : report.lines) {
    if (l.held_out_mape) notes += " " + l.field + " " + fixed(*l.held_out_mape * 100, 1) + " %;";
  }
  if (steps.steps > 0) {
    notes += " Measured step: " + fixed(steps.mean_step_s * 1e3, 3) + " ms mean over " + std::to_string(steps.steps) +
             " ProfilerStep windows; GPU idle between kernels inside a step " +
             "while traced (the profiler's CPU cost included; the CPU floor is layer_issue_us, fitted from " +
             "untraced steps): " + fixed(steps.mean_gpu_idle_s * 1e3, 3) + " ms per step.";
  }
  return notes;
}

}  // namespace trace_fit

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
        << (l.held_out_mape ? trace_fit::fixed(*l.held_out_mape * 100, 1) + " %" : "n/a") << l.detail << "\n";
  }
  return out.str();
}

}  // namespace lcsim
