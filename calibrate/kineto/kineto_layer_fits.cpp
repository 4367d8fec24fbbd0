// The fits that price a step with the cost model of the traced model: the element-wise share of the GEMMs
// (gemm_work_overhead), a layer's fixed cost (layer_overhead_us) and the framework's CPU floor (layer_issue_us).
// Data only: the report text is kineto_fit_report.cpp's.
#include <algorithm>
#include <cmath>
#include <set>
#include <span>

#include "base/errors.hpp"
#include "calibrate/kineto/kineto_field_fits.hpp"
#include "calibrate/kineto/kineto_kernels.hpp"
#include "model/cost_model.hpp"

namespace lcsim::trace_fit {
namespace {

/// One step's GEMM and element-wise kernel time and what its forward matmuls say of it: their rows (the
/// step's tokens) and FLOPs.
struct StepWork {
  double gemm_s = 0, elementwise_s = 0, tokens = 0, forward_flops = 0;
};

std::vector<StepWork> step_work(const std::vector<KinetoTrace>& traces) {
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
double step_layers(const StepWork& s, const CostModel& cost) {
  return std::round((s.forward_flops / s.tokens - cost.head_flops_per_token()) / cost.gemm_flops_per_token());
}

struct LayerPoint {  // per layer
  double tokens, floor_s, gemm_s, elementwise_s;
};

/// Each step per layer: its element-wise kernels' HBM floor, its layers' GEMM time (the step's GEMM kernels less
/// the LM head's share of the FLOPs) and its element-wise kernel time. `no_layers` counts the steps left out.
std::vector<LayerPoint> layer_points(const std::vector<KinetoTrace>& traces, const CostModel& cost,
                                     double hbm_bytes_per_s, int& no_layers) {
  const auto layer_bytes = cost.layer_elementwise_bytes_per_token();
  const auto loss_bytes = cost.head_elementwise_bytes_per_token();
  const double layer_flops = cost.gemm_flops_per_token(), head_flops = cost.head_flops_per_token();
  const double rate = hbm_bytes_per_s;
  std::vector<LayerPoint> points;
  for (const StepWork& s : step_work(traces)) {
    const double layers = step_layers(s, cost);
    if (layers < 1) {
      ++no_layers;
      continue;
    }
    const double floor_s =
        s.tokens * (layers * (layer_bytes.forward + layer_bytes.backward) + loss_bytes.forward + loss_bytes.backward) /
        rate;
    const double layer_gemm_s = s.gemm_s * layers * layer_flops / (layers * layer_flops + head_flops);
    points.push_back({s.tokens, floor_s / layers, layer_gemm_s / layers, s.elementwise_s / layers});
  }
  return points;
}

/// Per layer, other - floor = k x GEMM + fixed over the points not held out (every 3rd by token count, as the
/// calibration's curves); k alone, the median share, when they are all of one token count.
void fit_share(std::vector<LayerPoint> points, ElementwiseShareFit& fit) {
  std::sort(points.begin(), points.end(), [](const LayerPoint& a, const LayerPoint& b) { return a.tokens < b.tokens; });
  std::vector<double> base, gemm, measured, shares;
  std::vector<const LayerPoint*> held;
  std::set<double> token_counts;
  const auto mask = held_out_mask(points.size(), kMeasuredHoldOutEvery);
  for (std::size_t i = 0; i < points.size(); ++i) {
    const LayerPoint& pt = points[i];
    if (mask[i]) {
      held.push_back(&pt);
      continue;
    }
    base.push_back(pt.floor_s), gemm.push_back(pt.gemm_s), measured.push_back(pt.elementwise_s);
    shares.push_back((pt.elementwise_s - pt.floor_s) / pt.gemm_s);
    token_counts.insert(pt.tokens);
  }
  fit.joint = token_counts.size() >= 2;
  double share = median(shares), fixed_s = 0;
  if (fit.joint) {
    const LayerOverheadFit joint = fit_layer_overhead(base, gemm, measured);
    share = joint.gemm_share, fixed_s = joint.fixed_seconds;
    fit.clamped = joint.clamped;
  }
  if (!held.empty()) {
    double sum = 0;
    for (const LayerPoint* h : held)
      sum += std::abs(h->floor_s + share * h->gemm_s + (fit.joint ? fixed_s : 0) - h->elementwise_s) / h->elementwise_s;
    fit.mape = sum / static_cast<double>(held.size());
  }
  fit.points = static_cast<int>(points.size()), fit.held_out = static_cast<int>(held.size());
  fit.share = share;
  fit.gemm_work_overhead = std::max(0.0, share);
  if (fit.joint) fit.layer_overhead_us = fixed_s * 1e6;
}

/// The layers the job ran (a trace of a model cut to fewer layers, as torch_trace_step.py --layers makes): the
/// median over its steps of what their forward matmuls add up to.
int layers_run(const std::vector<KinetoTrace>& traces, const ModelConfig& model, const Profile& p) {
  std::vector<double> counted;
  {
    const CostModel cost(model, one_gpu_cluster(p, 0), p);
    for (const StepWork& w : step_work(traces))
      if (const double n = step_layers(w, cost); n >= 1) counted.push_back(n);
  }
  if (counted.empty())
    throw InputError(traces.front().file + ": --untraced: no step whose forward matmuls add up to layers of " +
                     model.name + " (record_shapes=True)");
  std::sort(counted.begin(), counted.end());
  return static_cast<int>(counted[counted.size() / 2]);
}

/// The step on one GPU as the cost model prices it: the layers, the LM head (nothing recomputed, as a plain
/// training loop runs) and the optimizer over every parameter.
class PlainStep {
 public:
  PlainStep() { scheme_.recompute = Recompute::None; }
  static CostModelOptions options() {
    CostModelOptions plain;
    plain.zero_stage = 0;
    return plain;
  }
  double seconds(const CostModel& cost, double tokens, int layers) const {
    const SequenceShare one{static_cast<Tokens>(std::llround(tokens)), 1};
    return cost.compute_seconds(std::span(&one, 1), scheme_, LayerSpan{0, layers}, true) +
           cost.optimizer_seconds(scheme_, 1, 0);
  }

 private:
  ParallelScheme scheme_;
};

}  // namespace

/// k (`gemm_work_overhead`) and the layer's fixed cost (`layer_overhead_us`) from the element-wise kernels' time
/// (the "other" family: norms, activations, copies, the loss) less the cost model's floor for them (docs/model.md:
/// the layers' and the loss's least HBM traffic): per layer, other - floor = k x GEMM + fixed, the calibration's
/// own joint fit (fit_layer_overhead) over the steps. A step's layers come from its forward matmul FLOPs, the
/// layers' GEMM time from its GEMM kernels less the LM head's share of the FLOPs. Steps of one token count cannot
/// tell the two apart: then k is the median share and the fixed cost stays the prior's.
ElementwiseShareFit fit_elementwise_share(const std::vector<KinetoTrace>& traces,
                                          const std::optional<ModelConfig>& model, const Profile& p) {
  ElementwiseShareFit fit;
  if (!model) {
    fit.missing = ElementwiseShareFit::Missing::Model;
    return fit;
  }
  const ClusterSpec cluster = one_gpu_cluster(p, 0);
  if (!(cluster.gpu.hbm_TBps > 0)) {
    fit.missing = ElementwiseShareFit::Missing::HbmBandwidth;
    return fit;
  }
  const CostModel cost(*model, cluster, p);
  std::vector<LayerPoint> points = layer_points(traces, cost, cluster.gpu.hbm_TBps * 1e12, fit.no_layers);
  if (points.empty()) {
    fit.missing = ElementwiseShareFit::Missing::Steps;
    return fit;
  }
  fit_share(std::move(points), fit);
  return fit;
}

/// The framework's CPU floor from the job's untraced step times: a step whose kernels keep the GPU busy less
/// than 80% of it waited for the CPU (docs/calibration.md). One model's trace cannot split the floor into
/// per-layer and per-step parts, so it is charged per layer: the median over those steps of their time less the
/// LM head's and optimizer's kernels, over the layers, so that the cost model's CPU-bound step is the floor.
IssueFloorFit fit_issue_floor(const std::vector<KinetoTrace>& traces, const TraceFitOptions& options,
                              const std::vector<double>& first_trace_busy_s, const Profile& p) {
  const auto& untraced = options.untraced_steps;
  IssueFloorFit fit;
  if (untraced.empty()) {
    fit.kept = IssueFloorFit::Kept::NoUntraced;
    return fit;
  }
  if (!options.model) throw InputError("--untraced: the floor is per layer, so the traced model is needed (--model)");
  if (traces.size() != 1) throw InputError("--untraced: one trace (the untraced times are one job's steps)");
  if (untraced.size() != first_trace_busy_s.size())
    throw InputError(traces.front().file + ": " + std::to_string(first_trace_busy_s.size()) +
                     " ProfilerStep windows with kernels, but " + std::to_string(untraced.size()) +
                     " untraced step times");
  ModelConfig model = *options.model;
  model.layers = layers_run(traces, model, p);
  fit.points = static_cast<int>(untraced.size());
  fit.layers = model.layers;
  // On a CPU-bound step the floor covers the head's and the optimizer's kernels too, so the layers' share of it is
  // what the step took less those.
  const PlainStep step;
  const CostModel no_floor(model, one_gpu_cluster(p, 0), p, PlainStep::options());
  std::vector<double> per_layer;
  for (std::size_t i = 0; i < untraced.size(); ++i)
    if (first_trace_busy_s[i] < 0.8 * untraced[i].seconds)
      per_layer.push_back((untraced[i].seconds - step.seconds(no_floor, untraced[i].tokens, 0)) / model.layers);
  if (per_layer.empty()) {
    fit.kept = IssueFloorFit::Kept::GpuBusy;
    return fit;
  }
  std::sort(per_layer.begin(), per_layer.end());
  const double layer_s = per_layer[per_layer.size() / 2];
  if (!(layer_s > 0)) {
    fit.kept = IssueFloorFit::Kept::HeadExceeds;
    return fit;
  }
  fit.cpu_bound = static_cast<int>(per_layer.size());
  fit.layer_issue_us = layer_s * 1e6;
  // Every step against the cost model with the floor: the GPU-bound ones were not fitted on.
  Profile floored_profile = p;
  floored_profile.compute.layer_issue_us = fit.layer_issue_us;
  floored_profile.compute.step_issue_us = 0;
  const CostModel floored(model, one_gpu_cluster(floored_profile, 0), floored_profile, PlainStep::options());
  double sum = 0;
  for (const UntracedStep& u : untraced) sum += std::abs(step.seconds(floored, u.tokens, model.layers) / u.seconds - 1);
  fit.mape = sum / static_cast<double>(untraced.size());
  return fit;
}

}  // namespace lcsim::trace_fit
