#pragma once
// FlexSP's cost formulas (Sec. 4.1.2, Eq. 11-14) as a view of the one CostModel. A group of d GPUs (Ulysses SP,
// no TP or PP, an aligned block) runs one packed micro-batch of sequences s_k in
//   T_d = a_d sum s_k^2 + b_d sum s_k + c_d
// (attention quadratic; GEMMs, element-wise work and the all-to-alls linear; c_d a micro-batch's fixed cost), the
// paper's alpha-beta form with its coefficients fitted on the cost model's times, and holds at most capacity(d)
// tokens (model states sharded over every GPU, ZeRO; activations over the group). FlexSP plans with this view; the
// estimate and the simulator time its plans from the cost model itself.
#include <span>
#include <vector>

#include "model/cost_model.hpp"
#include "model/fitting.hpp"

namespace lcsim::flexsp {

/// One SP degree a group may take: its time formula and the most tokens a group of it holds.
struct DegreeCost {
  int degree = 1;
  QuadraticFit time;  ///< seconds of one micro-batch against its sequences' lengths (fitted per sequence)
  Tokens capacity = 0;
  double seconds(double sum_sq, double sum) const { return time.a * sum_sq + time.b * sum + time.c; }
};

/// The scheme of a FlexSP group of `degree` GPUs.
ParallelScheme group_scheme(int degree, Recompute recompute);

class FlexSpView {
 public:
  /// The powers of two from 1 (2 without `allow_sp1`) to min(max_degree, GPUs) that hold at least one token.
  /// PlanningError when none does (the model states fill the GPUs).
  FlexSpView(const CostModel& cost, Recompute recompute, int max_degree, bool allow_sp1);

  /// Ascending degree.
  const std::vector<DegreeCost>& degrees() const { return degrees_; }
  int gpus() const { return gpus_; }
  /// The cost model's own time of one group of `degree` running `lengths` as one micro-batch (what the fit
  /// approximates; the estimate charges the same compute and all-to-alls).
  double group_seconds(int degree, std::span<const Tokens> lengths) const;
  /// The smallest degree whose group holds a sequence of `tokens`, or nullptr.
  const DegreeCost* smallest_holding(Tokens tokens) const;
  /// Tokens the whole cluster holds in one micro-batch: the best over degrees of (GPUs / d) x capacity(d).
  Tokens cluster_capacity() const;

 private:
  Tokens capacity(int degree) const;

  const CostModel* cost_;
  Recompute recompute_;
  int gpus_;
  std::vector<DegreeCost> degrees_;
};

}  // namespace lcsim::flexsp
