#pragma once
// Each paper's cost formula as a view of the one CostModel. The coefficients a paper would obtain by offline
// profiling are fitted here against the CostModel over sampled lengths, and every fit carries its error, so a
// policy planning with its paper's formula and the estimate/simulator timing the plan use the same source.
#include <optional>
#include <vector>

#include "policies/core/cost_model.hpp"
#include "policies/core/fitting.hpp"  // LinearFit, QuadraticFit

namespace lcsim {

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

/// HBP (Appendix I): time and memory of training packs of length L with SP degree sp and gc checkpointed layers
/// on `world` GPUs (world / sp replicas, one pack per replica per step).
class HbpView {
 public:
  HbpView(const CostModel& cost, int world);
  /// Seconds of one step (one pack per SP group, forward + backward + recompute) at packing length L.
  double step_seconds(Tokens packing_length, int sp, int gc_layers) const;
  /// Peak bytes on one GPU.
  double peak_bytes(Tokens packing_length, int sp, int gc_layers) const;
  bool fits(Tokens packing_length, int sp, int gc_layers) const;

 private:
  const CostModel* cost_;
  int world_;
};

}  // namespace lcsim
