#pragma once
// Balance metrics exactly as HBP Sec. 3.1, computed per iteration over the GPUs ("devices") of a plan:
//   DBR = sum_i (Tmax - T_i) / (Tmax N)          T_i: tokens GPU i processes (a shard counts 1/cp)
//   PR  = sum_b (tmax - t_b) / (tmax B)          over padded micro-batches; 0 for packed / varlen batches
//   ABR = sum_i (Amax - A_i) / (Amax N)          A_i: attention work sum s^2 (a shard counts s^2/cp)
//   CR  = sum_i Tcomm_i / sum_i T_i              Tcomm_i: tokens of sequences sharded across a CP/SP group
// plus the max/min per-GPU estimated busy-time ratio, and Hydraulis' rank gap (Fig. 12b): the slowest over the
// fastest pipeline's propagation latency, minus one.
#include <vector>

#include "model/plan.hpp"
#include "model/plan_demand.hpp"

namespace lcsim {

struct BalanceMetrics {
  double dbr = 0;
  double pr = 0;
  double abr = 0;
  double cr = 0;
  double max_min_time_ratio = 1;
  /// (max - min) / min over the plan's replicas that run a micro-batch of their propagation latency: when the last
  /// of their GPUs ends its last micro-batch step (IterationEstimate::propagation_end_s). Bubbles and waits count,
  /// gradient sync and the optimizer do not; 0 without propagation times.
  double pipeline_gap = 0;
  /// ABR's numerator and denominator, sum_i (Amax - A_i) and Amax N (tokens^2): an iteration's idle and total
  /// attention capacity. Summed over a run they give abr_work.
  double attention_idle = 0;
  double attention_capacity = 0;
  /// Over a run (mean_metrics): sum of attention_idle / sum of attention_capacity, ABR with every iteration
  /// weighted by its attention capacity. Per iteration it equals abr.
  double abr_work = 0;
};

BalanceMetrics compute_metrics(const IterationPlan& plan, const IterationEstimate& estimate, int world_size);
/// Mean of each metric over iterations; abr_work and the attention sums over the run.
BalanceMetrics mean_metrics(const std::vector<BalanceMetrics>& per_iteration);

}  // namespace lcsim
