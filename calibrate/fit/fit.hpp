#pragma once
// Fitting measurements into profile entries, each with its error on held-out points. Used by
// lcsim-derive-profile (published tables) and lcsim-gpu calibrate (measured sweeps). The least-squares core
// (relative-error weighting, MAPE) is model/fitting.hpp, shared with the paper views.
#include <optional>
#include <span>
#include <vector>

#include "model/fitting.hpp"
#include "model/profile.hpp"

namespace lcsim {

/// Which of `points` points (sorted by x) a fit holds out: with every_k >= 2, those with index i % every_k == 1,
/// never the last one, so each held-out point lies between fitted ones and its error measures interpolation, the
/// way the fit is used. every_k == 0 holds out nothing. Throws std::invalid_argument for every_k == 1 or < 0.
std::vector<bool> held_out_mask(std::size_t points, int every_k);

template <class Fit>
struct HeldOutFit {
  Fit fit;                              ///< fitted on the points that were not held out
  std::optional<double> held_out_mape;  ///< MAPE (fraction) on the held-out points; empty when none
};

/// x must be sorted increasing. Throws std::invalid_argument when too few points remain to fit.
HeldOutFit<LinearFit> fit_linear_held_out(std::span<const double> x, std::span<const double> y, int every_k);
HeldOutFit<QuadraticFit> fit_quadratic_held_out(std::span<const double> x, std::span<const double> y, int every_k);

/// One nccl-tests-style measurement: `bytes` is nccl-tests' "size" column.
struct CollectiveSample {
  double bytes = 0;
  double seconds = 0;
};

struct PiecewiseCollectiveFit {
  CollectiveOp op = CollectiveOp::AllReduce;
  int group_size = 2;
  std::vector<CollectiveSegment> segments;  ///< one or two; the last has max_bytes = +infinity (open-ended)
  double training_mape = 0;                 ///< on the fitted points
  std::optional<double> held_out_mape;      ///< on the held-out points; empty when none were held out

  /// As a profile entry (fit_mape = the held-out MAPE).
  CollectiveFit to_profile_entry(LinkClass link, bool measured) const;
};

/// Latency + bandwidth fit, t = latency + bytes * bus_factor(op, n) / bus_bandwidth: one segment, or two joined
/// continuously at a breakpoint (small messages use other NCCL protocols than large ones). The breakpoint is
/// searched on a log grid and at the fitted sizes, keeping >= 2 fitted points on each side; two segments are kept only
/// when they lower the Akaike information criterion n ln(SSE / n) + 2k (k = 2 vs 4) of the relative errors, so a second
/// segment must earn its two extra parameters. Latencies are kept >= 0 (refit through the origin when the intercept
/// comes out negative). Samples need not be sorted; `every_k` as held_out_mask. Throws InputError naming the op when a
/// sample is not positive, two samples share a size, too few remain, or the times do not grow with size.
PiecewiseCollectiveFit fit_collective_segments(std::span<const CollectiveSample> samples, CollectiveOp op,
                                               int group_size, int every_k);

}  // namespace lcsim
