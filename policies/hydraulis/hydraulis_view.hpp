#pragma once
// Hydraulis' cost formulas as a view of the one CostModel: the latency curve and memory bound the paper profiles
// offline are computed from the CostModel, so Hydraulis plans with its own formulas while the estimate and the
// simulator time the plan from the same source.
#include "model/cost_model.hpp"
#include "model/fitting.hpp"  // QuadraticFit

namespace lcsim::hydraulis {

/// Hydraulis (Appendix B): T(l, P) = a l^2 + b l + c for one forward + backward of one pipeline stage, fitted
/// over sampled lengths; MaxLen(P) from the memory model (optimizer states sharded across all `total_gpus`,
/// 16-bit parameters and gradients per scheme, activations of PP micro-batches in flight on the first stage,
/// safety margin = the profile's reserve).
class HydraulisView {
 public:
  HydraulisView(const CostModel& cost, int total_gpus);
  QuadraticFit latency(const ParallelScheme& scheme) const;
  Tokens max_len(const ParallelScheme& scheme) const;
  /// Appendix C: UtilLen(P), the shortest sequence length whose throughput (tokens per second of one stage's
  /// forward + backward, the quantity T(l, P) fits) reaches `threshold` x the scheme's best throughput over the
  /// lengths latency() is fitted on (the paper uses 0.85). threshold in (0, 1].
  Tokens util_len(const ParallelScheme& scheme, double threshold) const;
  /// The cost model's time T(l, P) that latency() fits: one forward + backward of the slowest (last) stage for
  /// a single sequence of l tokens, with its TP collectives and pipeline transfers.
  double stage_seconds(const ParallelScheme& scheme, Tokens l) const;

 private:
  const CostModel* cost_;
  int total_gpus_;
};

}  // namespace lcsim::hydraulis
