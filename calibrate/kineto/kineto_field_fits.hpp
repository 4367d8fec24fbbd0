#pragma once
// Private to calibrate/kineto: the fits behind fit_profile_from_traces, one per group of profile fields. Each fit
// returns data (the fitted fields and their error figures, or why none was fitted); the report_* functions turn that
// data into the report's lines, so the numbers and the text can be read, and changed, apart.
#include <algorithm>
#include <cstddef>
#include <iomanip>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "calibrate/fit/fit.hpp"
#include "calibrate/fit/profile_fit.hpp"
#include "calibrate/kineto/kineto_fit.hpp"
#include "calibrate/kineto/kineto_trace.hpp"
#include "model/profile.hpp"

namespace lcsim::trace_fit {

inline std::string fixed(double v, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << v;
  return out.str();
}

inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

inline int count_held(std::size_t n) {
  const auto mask = held_out_mask(n, kMeasuredHoldOutEvery);
  return static_cast<int>(std::count(mask.begin(), mask.end(), true));
}

/// The report's lines in the order the fits add them, and the field lists the provenance notes repeat.
struct FieldReport {
  std::vector<TraceFieldLine> lines;
  std::vector<std::string> fitted;  ///< fitted fields, by name
  std::vector<std::string> kept;    ///< "field (why)" of each field kept from the prior, and other notes
  int fitted_fields = 0;

  /// A fitted field, or one kept from the prior (its detail says why).
  void add(TraceFieldLine line);
};

/// An efficiency curve through measured points: fitted (3 or more points), or the prior's scaled through them.
struct CurveFit {
  Curve curve;
  std::size_t points = 0;
  std::optional<double> prior_scale;  ///< set when the prior's curve was scaled (too few points for a curve)
};

struct GemmFit {
  std::size_t ops = 0;  ///< GEMM ops with kernel time in the traces' steps
  int backward = 0, no_shape = 0, other_dtype = 0;
  std::optional<CurveFit> efficiency;  ///< empty without a forward BF16/FP16 matmul with recorded shapes
};
GemmFit fit_gemm_efficiency(const std::vector<KinetoTrace>& traces, const Profile& p);
void report_gemm_efficiency(const GemmFit& fit, FieldReport& report);

struct AttentionFit {
  std::size_t ops = 0;  ///< attention ops with kernel time in the traces' steps
  int varlen = 0, no_shape = 0, no_causal = 0, backward = 0;
  std::optional<CurveFit> efficiency;         ///< empty without a forward op with dense shapes
  std::size_t forward_ops = 0;                ///< forward ops the curve's medians are over
  std::vector<double> forward_s, backward_s;  ///< median kernel seconds per shape that has both
  int unpaired = 0;                           ///< backward ops without a forward op of their shape
  std::optional<ProportionalFit> backward_ratio;
};
AttentionFit fit_attention(const std::vector<KinetoTrace>& traces, const Profile& p);
void report_attention(const AttentionFit& fit, FieldReport& report);

/// One (op, link, group size) of the NCCL kernels: fitted when it has two sizes or more and the fit takes them.
struct CollectiveGroupFit {
  CollectiveOp op = CollectiveOp::AllReduce;
  LinkClass link = LinkClass::NvLink;
  int group = 0;
  int calls = 0;
  std::vector<CollectiveSample> points;  ///< median seconds per size
  std::optional<CollectiveFit> entry;    ///< the profile entry, when fitted
  std::string error;                     ///< why fit_collective_segments refused the points
};
struct CollectivesFit {
  int kernels = 0;                     ///< NCCL kernels in the traces' steps
  std::map<std::string, int> skipped;  ///< kernels not used, by why
  std::vector<CollectiveGroupFit> groups;
};
CollectivesFit fit_collectives(const std::vector<KinetoTrace>& traces, int gpus_per_node);
/// The fitted entries replace the prior's of their op and link (and their provenance.fitted_on).
void apply_collectives(const CollectivesFit& fit, Profile& p);
void report_collectives(const CollectivesFit& fit, FieldReport& report);

/// gemm_work_overhead and layer_overhead_us from the element-wise kernels (see fit_elementwise_share).
struct ElementwiseShareFit {
  enum class Missing { None, Model, HbmBandwidth, Steps };
  Missing missing = Missing::None;
  int no_layers = 0;  ///< steps whose matmuls do not add up to a layer
  int points = 0, held_out = 0;
  std::optional<double> mape;
  bool joint = false;  ///< steps of two token counts or more: the fixed cost fitted too
  double share = 0;    ///< k as fitted, below 0 included
  double gemm_work_overhead = 0;
  double layer_overhead_us = 0;      ///< when joint
  std::vector<std::string> clamped;  ///< terms the joint fit fixed at 0
};
ElementwiseShareFit fit_elementwise_share(const std::vector<KinetoTrace>& traces,
                                          const std::optional<ModelConfig>& model, const Profile& p);
/// `model_name` and `gpu` name what a kept field lacked.
void report_elementwise_share(const ElementwiseShareFit& fit, const std::string& model_name, const std::string& gpu,
                              FieldReport& report);

struct StepTimes {
  TraceStepSummary summary;
  std::vector<double> first_trace_busy_s;  ///< the first trace's steps with kernels: their kernels' union
};
StepTimes measure_steps(const std::vector<KinetoTrace>& traces);
void report_steps(const StepTimes& steps, FieldReport& report);

/// layer_issue_us from the job's untraced step times (see fit_issue_floor).
struct IssueFloorFit {
  enum class Kept { None, NoUntraced, GpuBusy, HeadExceeds };
  Kept kept = Kept::None;
  int points = 0;     ///< untraced steps
  int cpu_bound = 0;  ///< of which fitted on
  int layers = 0;
  double layer_issue_us = 0;
  double mape = 0;
};
IssueFloorFit fit_issue_floor(const std::vector<KinetoTrace>& traces, const TraceFitOptions& options,
                              const std::vector<double>& first_trace_busy_s, const Profile& p);
void report_issue_floor(const IssueFloorFit& fit, FieldReport& report);

/// The fields no trace can give.
void report_kept_fields(FieldReport& report);

/// provenance.notes: what was fitted and from which traces, what was kept, the held-out errors and the steps.
std::string provenance_notes(const std::vector<KinetoTrace>& traces, const FieldReport& report,
                             const TraceStepSummary& steps, const Profile& prior, double peak_tflops);

}  // namespace lcsim::trace_fit
