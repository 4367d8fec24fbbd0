#pragma once
// Skrull's cost formula as a view of the one CostModel: the coefficients the paper obtains by offline profiling
// are fitted against the CostModel over sampled lengths, each fit with its error, so Skrull plans with its own
// formula while the estimate and the simulator time the plan from the same source.
#include <optional>

#include "model/cost_model.hpp"
#include "model/fitting.hpp"  // LinearFit

namespace lcsim::skrull {

/// Skrull (Appendix C): FLOPs(S) (Eq. 13, MLP term for the model's gated ffn), Tcomp = a FLOPs + b (Eq. 14),
/// Volume(S) = S h_kv (Eq. 15), Tcomm = a V + Tfixed (Eq. 16), Memory(S) = a S + b (Eq. 12), BucketSize C.
/// `scheme.cp` is the CP degree N. Tcomm fits the cost model's exposed CP time (cp_comm_seconds): the Ulysses
/// all-to-alls, or with ring attention what the ring leaves exposed, fitted over the lengths where that is not 0
/// (none: Tcomm is 0) and never below 0.
class SkrullView {
 public:
  SkrullView(const CostModel& cost, const ParallelScheme& scheme, int shard_degree,
             std::optional<Tokens> bucket_size_override = std::nullopt);

  /// Eq. 13 per layer x layers: forward FLOPs of a whole sequence of s tokens (b = 1).
  double flops(Tokens s) const;
  /// FLOPs one CP rank carries for a sequence sharded over n ranks: FLOPs(s) / n.
  double flops_sharded(Tokens s, int n) const;
  double tcomp(double flops) const { return tcomp_(flops); }
  /// Eq. 15, elements (b = 1); Tcomm takes the total volume of the distributed sequences.
  double volume(Tokens s) const;
  double tcomm(double volume) const;
  /// Activation bytes of s local tokens (Eq. 12).
  double memory(Tokens s) const { return memory_(static_cast<double>(s)); }
  /// C: tokens one CP rank can hold, from the memory view (or the override).
  Tokens bucket_size() const { return bucket_size_; }

  const LinearFit& tcomp_fit() const { return tcomp_; }
  const LinearFit& tcomm_fit() const { return tcomm_; }
  const LinearFit& memory_fit() const { return memory_; }

 private:
  const CostModel* cost_;
  ParallelScheme scheme_;
  LinearFit tcomp_;
  LinearFit tcomm_;
  LinearFit memory_;
  Tokens bucket_size_ = 0;
};

}  // namespace lcsim::skrull
