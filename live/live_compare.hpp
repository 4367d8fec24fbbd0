#pragma once
// Predicted vs measured: the maths of `lcsim-gpu live`'s report, host-only.
//   error of an iteration  = (predicted - measured) / measured   (positive: the prediction is too slow)
//   MAPE of a policy       = mean over its measured iterations of |error|
//   speedup of a policy    = its tokens/s over the baseline's, tokens/s = total tokens / total seconds (the same
//                            definition as `lcsim plan`); predicted and measured speedups each from their own times.
// An iteration that could not be measured (out of memory) has measured = NaN: it has no error, and a policy with
// such an iteration -- or a baseline with one -- has no measured total, tokens/s or speedup (NaN), never a number
// made from the iterations that happened to fit.
#include <cstdint>
#include <string>
#include <vector>

namespace lcsim {

struct LiveSeries {
  std::string label;
  std::vector<std::int64_t> tokens;  ///< per iteration
  std::vector<double> predicted_s;   ///< per iteration
  std::vector<double> measured_s;    ///< per iteration; NaN when the iteration could not be measured
};

struct LiveComparison {
  std::string label;
  std::vector<double> error;  ///< per iteration (signed, relative to measured); NaN when not measured
  double mape = 0;            ///< NaN when no iteration was measured
  int measured_iterations = 0;
  double predicted_total_s = 0;
  double measured_total_s = 0;  ///< NaN when an iteration was not measured
  double predicted_tokens_per_s = 0;
  double measured_tokens_per_s = 0;
  double predicted_speedup = 0;  ///< over the baseline
  double measured_speedup = 0;   ///< NaN when either side has an unmeasured iteration
};

/// (predicted - measured) / measured; NaN when measured is NaN or not positive.
double relative_error(double predicted, double measured);

/// One comparison per series, speedups over the series labelled `baseline`. Throws std::invalid_argument when
/// the baseline is missing or a series' vectors differ in length.
std::vector<LiveComparison> compare_live(const std::vector<LiveSeries>& series, const std::string& baseline);

}  // namespace lcsim
