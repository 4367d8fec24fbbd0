#pragma once
// WLB-LLM's cost formulas as a view of the one CostModel (Sec. 4.1 and 5.3): the paper profiles W_a(d) (attention,
// quadratic) and W_l(d) (GEMMs, element-wise work and collectives, linear) offline; here both come from a quadratic
// fit of the cost model's time for one document alone, and the adaptive CP sharding compares the busiest CP rank
// of a micro-batch under either split as the cost model prices it (the paper's profiled kernel latencies).
#include <span>
#include <vector>

#include "model/cost_model.hpp"
#include "model/fitting.hpp"
#include "model/plan.hpp"

namespace lcsim::wlbllm {

class WlbView {
 public:
  /// `scheme`: the replica's; `context_length` bounds the fitted lengths (documents are at most one window).
  WlbView(const CostModel& cost, const ParallelScheme& scheme, Tokens context_length);
  /// W_a(d) + W_l(d): a d^2 + b d of the fit (its constant, the micro-batch's fixed cost, belongs to no document).
  double workload(Tokens d) const;
  const QuadraticFit& fit() const { return fit_; }
  /// One forward + backward of the last stage (its layers and the LM head) for a micro-batch of `documents`, on
  /// its busiest CP rank under `split`: compute, TP collectives and exposed CP communication.
  double micro_batch_seconds(std::span<const Tokens> documents, CpSplit split) const;
  /// Sec. 5.3: the split whose busiest rank is faster (per-sequence on ties: no per-document re-layout). Always
  /// per-document without ring attention (Ulysses shards heads: a split changes nothing) or with cp 1.
  CpSplit choose_split(std::span<const Tokens> documents) const;
  /// The largest micro-batch (tokens) whose activations fit memory when pp of them are in flight on the first stage
  /// (1F1B), and one with the logits on the last: (capacity - static bytes) x cp / (in flight x bytes per token).
  Tokens memory_s_max() const;

 private:
  double rank_seconds(std::span<const SequenceShare> shares, Tokens tokens_on_gpu) const;

  const CostModel* cost_;
  ParallelScheme scheme_;
  LayerSpan last_stage_;
  LinkClass tp_link_, cp_link_;
  QuadraticFit fit_;
};

}  // namespace lcsim::wlbllm
