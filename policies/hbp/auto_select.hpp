#pragma once
// HBP hierarchical groups auto-selection (Sec. 4.1, Algorithm 1; Appendix I: FindBestSpCkpt, GreedyProfileCkpt).
// HBP profiles a few iterations per (length, SP, GC) on the real cluster; lcsim asks its view of the cost model
// (hbp_view.hpp) instead: ProfileMemory is HbpView::peak_bytes, ProfileTime is HbpView::step_seconds. Strategies of
// different SP degrees and lengths train different token counts per step, so they are compared per token (the time of a
// global batch of a fixed token number, as HBP's "Iter Time" columns are). HbpView times a pack as one sequence of
// the packing length (the worst case of its attention); HBP profiles naive packs of its real data instead.
#include <optional>
#include <span>
#include <vector>

#include "policies/hbp/hbp_view.hpp"

namespace lcsim::hbp {

/// A training strategy s = (sp, ckpt) for packs of `length` tokens, with the cost model's verdict on it.
struct Strategy {
  Tokens length = 0;
  int sp = 1;
  int gc_layers = 0;
  double step_seconds = 0;       ///< one pack per SP group (HbpView::step_seconds)
  double seconds_per_token = 0;  ///< step_seconds / (length x world / sp): what Algorithm 1 minimises
  double peak_bytes = 0;
  bool fits = true;
  friend bool operator==(const Strategy&, const Strategy&) = default;
};

/// The result of Algorithm 1: stage 1's best strategy per candidate length and the hierarchical groups L_p.
struct Selection {
  std::vector<std::optional<Strategy>> stage1;  ///< per candidate length; nullopt when no (sp, gc) fits
  Strategy best;                                ///< s_best at l_best (argmin of seconds per token)
  Strategy longest;                             ///< s_max at l_max (the last candidate)
  std::vector<Strategy> groups;                 ///< L_p, ascending lengths, each with its (sp, gc)
};

/// Algorithm 1 stage 2 on lengths alone: l1 = floor(l_best / sp_best), l2 = floor(l_max / sp_max);
/// [l1, l_best, l2, l_max] when l2 > l_best, else [l1, l_best, l_max]; equal lengths merge (l1 = l_best when
/// sp_best = 1) and lengths below 1 are dropped. Ascending.
std::vector<Tokens> hierarchical_lengths(Tokens l_best, int sp_best, Tokens l_max, int sp_max);

class AutoSelector {
 public:
  /// `world`: GPUs of the cluster; every SP degree must divide it.
  AutoSelector(const CostModel& cost, int world);

  /// The cost model's view of one strategy.
  Strategy evaluate(Tokens length, int sp, int gc_layers) const;

  /// Algorithm 4: the memory freed per checkpointed layer from two "profiles" (no and all layers checkpointed),
  /// c_o = c_max - m_r(c_max) / m_ave rounded up, then corrected one layer at a time against the memory view
  /// (the view is not exactly linear in c). nullopt when even every layer checkpointed does not fit.
  std::optional<int> greedy_profile_ckpt(Tokens length, int sp) const;

  /// Algorithm 3: for every SP degree its GC layers by greedy_profile_ckpt, then the fastest (ties: the first in
  /// `sp_degrees`). nullopt when no degree fits.
  std::optional<Strategy> find_best_sp_ckpt(Tokens length, std::span<const int> sp_degrees) const;

  /// The strategy needing the least memory (largest SP degree, every layer checkpointed), for a length no
  /// strategy fits: its plans are then reported out of memory rather than refused.
  Strategy least_memory(Tokens length, std::span<const int> sp_degrees) const;

  /// Algorithm 1 over ascending `candidates` (the last is l_max) and `sp_degrees`. Stage 2:
  /// l1 = floor(l_best / sp_best), l2 = floor(l_max / sp_max), L_p = [l1, l_best, l2, l_max] when l2 > l_best,
  /// else [l1, l_best, l_max]; equal lengths merge. The derived groups l1 and l2 train without SP (sp 1, their
  /// GC layers by greedy_profile_ckpt): that is the point of splitting them off (Fig. 3). Should sp 1 not fit
  /// (it does whenever l_best / sp_best tokens per GPU fit), FindBestSpCkpt picks their degree.
  Selection select(std::span<const Tokens> candidates, std::span<const int> sp_degrees) const;

 private:
  const CostModel* cost_;
  int world_;
  HbpView view_;
};

}  // namespace lcsim::hbp
