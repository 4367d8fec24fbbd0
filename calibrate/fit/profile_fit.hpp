#pragma once
// Turning one calibration run's measurements into a Profile. Each fitted field records its error on held-out
// points (every kMeasuredHoldOutEvery-th point, see held_out_mask); fields that were not measured keep the prior's
// value, and the profile's notes say which is which. The method, field by field, is in calibrate/PROFILE.md
// ("Measured profiles").
#include <optional>
#include <string>
#include <vector>

#include "calibrate/fit/measurements.hpp"
#include "model/cluster.hpp"
#include "model/model.hpp"
#include "model/profile.hpp"

namespace lcsim {

inline constexpr int kMeasuredHoldOutEvery = 3;

/// One row of the fit summary `lcsim-gpu calibrate` prints.
struct FitReportLine {
  std::string what;
  int points = 0;    ///< measurements used, held-out ones included
  int held_out = 0;  ///< of which held out
  std::optional<double> held_out_mape;
  std::string result;
};

struct FittedProfile {
  Profile profile;
  std::vector<FitReportLine> report;
};

/// `prior` supplies what one node cannot measure (peak, static and logits bytes, reserve, InfiniBand, and the
/// collectives when fewer than two GPUs were visible). Throws InputError when the measurements lack the GEMM or
/// attention sweeps, contain an efficiency above 1 (the prior's peak is wrong for this GPU), or are inconsistent;
/// its message starts with `file` (the measurements file) and the JSON path of the offending measurements.
FittedProfile fit_profile(const Measurements& measurements, const ModelConfig& model, const Profile& prior,
                          const std::string& file = "measurements");

/// The named model the measurements were taken with; InputError naming `file` and "model" when it is unknown.
ModelConfig measured_model(const Measurements& measurements, const std::string& file);

/// Curve points with their interpolation error: the curve keeps every point; fit_mape is the mean of
/// |t_predicted / t_measured - 1| over held-out points, t_predicted from the curve built without them
/// (time is inversely proportional to efficiency). x need not be sorted; duplicates are an InputError.
Curve efficiency_curve(std::vector<double> x, std::vector<double> efficiency, int every_k, const std::string& what);

/// y = slope x through the origin on the points not held out (ordered by x, every `every_k`-th held out as
/// held_out_mask); MAPE of the slope on the held-out ones (none when nothing is held out).
struct ProportionalFit {
  double slope = 0;
  std::optional<double> held_out_mape;
};
ProportionalFit proportional_held_out(const std::vector<double>& x, const std::vector<double>& y, int every_k);

/// Per-token-per-layer bytes = c_h hidden + c_kv kv_hidden + c_f ffn from several model shapes, minimising relative
/// error; a coefficient that comes out negative is fixed at 0 and the rest refitted.
struct ActivationFit {
  ActivationCoefficients coefficients;
  std::optional<double> held_out_mape;
  int points = 0;
  int held_out = 0;
};
struct ActivationSample {
  double hidden = 0, kv_hidden = 0, ffn = 0;
  double bytes_per_token_per_layer = 0;
};
ActivationFit fit_activation_coefficients(std::vector<ActivationSample> samples, int every_k);

/// measured = base + gemm_share gemm + fixed_seconds, minimising relative error, where base is the cost model's
/// GEMM and attention time of a layer and gemm its GEMM passes' part (CostModel::layer_work_seconds). A term that
/// comes out negative is fixed at 0, the other refitted, and named in `clamped`. Throws std::invalid_argument on
/// mismatched or empty inputs or a non-positive measurement.
struct LayerOverheadFit {
  double fixed_seconds = 0;
  double gemm_share = 0;
  std::vector<std::string> clamped;
};
/// One GPU of `profile`'s kind as a cluster, for pricing its measurements with the cost model: the named GPU's
/// datasheet figures when the kind is known, else one of `memory_bytes` at the profile's peak and no HBM figure.
ClusterSpec one_gpu_cluster(const Profile& profile, double memory_bytes);

LayerOverheadFit fit_layer_overhead(const std::vector<double>& base, const std::vector<double>& gemm,
                                    const std::vector<double>& measured);

}  // namespace lcsim
