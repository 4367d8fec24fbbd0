#pragma once
// WLB-LLM's pipeline-level balancing (Wang et al., OSDI 2025, Sec. 4): variable-length packing (Algorithm 1) with
// outlier documents delayed through a multi-level queue (Sec. 4.2). Pure algorithms over document lengths and a
// workload function; wlbllm_policy.cpp feeds them the cost view's W_a + W_l.
//
// Decisions the paper leaves open (notes/wlbllm.md Sec. 3.3-3.4):
// - A document is an outlier when d > L_1; it waits in queue i, the last with L_i < d (L_1 < L_2 < ...).
// - A queue holding at least N documents releases its N oldest (FIFO), every queue in the same iteration.
// - Fit tests are strict, as printed: tokens(mb) + d < S_max; ties in both arg-mins go to the lowest index.
// - Carried-over documents come first, in their old order, then the new ones (released outliers among them),
//   sorted by length descending (stable: data order among equal lengths), as the pseudo-code does.
// - After the last global batch, flush(): iterations that release every non-empty queue whatever its size, until
//   queues and carry-over are empty (Algorithm 1 never emits them; lcsim's window must train every document).
#include <cstddef>
#include <deque>
#include <functional>
#include <span>
#include <vector>

#include "model/workload.hpp"

namespace lcsim::wlbllm {

/// Seconds of one document of d tokens in a micro-batch: W_a(d) + W_l(d).
using Workload = std::function<double(Tokens)>;

/// Sec. 4.2's multi-level queue: thresholds L_1 < ... < L_n, release count N.
class OutlierQueues {
 public:
  /// `thresholds` strictly increasing and positive (may be empty: no outlier delay); release >= 1.
  OutlierQueues(std::vector<Tokens> thresholds, std::size_t release);
  /// Queues `d` when it is an outlier; false when it is not (the caller packs it now).
  bool push(const Sequence& d);
  /// The N oldest of every queue that holds at least N, in queue order.
  std::vector<Sequence> release();
  /// Everything still queued, in queue order, oldest first.
  std::vector<Sequence> flush();
  bool empty() const;
  std::size_t size(std::size_t queue) const { return queues_[queue].size(); }
  std::size_t queue_count() const { return queues_.size(); }

 private:
  std::vector<Tokens> thresholds_;
  std::size_t release_;
  std::vector<std::deque<Sequence>> queues_;
};

/// Algorithm 1 over a stream of global batches, with its state (the queues and the carried-over documents).
class VariableLengthPacker {
 public:
  /// `micro_batches` N >= 1; `s_max` > 0 (a document of s_max tokens or more never fits: strict test).
  VariableLengthPacker(int micro_batches, Tokens s_max, Workload workload, OutlierQueues queues);
  /// One iteration: the N micro-batches packed from `batch` (empty ones dropped), outliers queued or released.
  std::vector<std::vector<Sequence>> next(std::span<const Sequence> batch);
  /// One more iteration after the last batch (file comment); empty when nothing is left.
  std::vector<std::vector<Sequence>> flush();
  bool drained() const { return remained_.empty() && queues_.empty(); }
  std::size_t carried() const { return remained_.size(); }
  const OutlierQueues& queues() const { return queues_; }

 private:
  std::vector<std::vector<Sequence>> pack(std::vector<Sequence> fresh);

  int micro_batches_;
  Tokens s_max_;
  Workload workload_;
  OutlierQueues queues_;
  std::vector<Sequence> remained_;
};

/// Steps 5-6 of Algorithm 1 alone: `docs` in the given order into `micro_batches` micro-batches below s_max tokens;
/// what fits nowhere goes to `left` (when not null). Empty micro-batches are kept.
std::vector<std::vector<Sequence>> pack_greedy(std::span<const Sequence> docs, int micro_batches, Tokens s_max,
                                               const Workload& workload, std::vector<Sequence>* left);

/// Eq. 2 solved exactly by enumeration (for checking the heuristic on small inputs: up to about 12 documents):
/// the least possible max over `micro_batches` micro-batches of the summed workload, every document placed and
/// each micro-batch below s_max tokens; infinity when no assignment fits.
double exact_max_workload(std::span<const Sequence> docs, int micro_batches, Tokens s_max, const Workload& workload);

}  // namespace lcsim::wlbllm
