#include "program/bound.hpp"

#include <algorithm>
#include <vector>

#include "policies/core/estimate.hpp"

namespace lcsim::program {
namespace {

void flatten_at_best(Curve& curve) {
  const double best = *std::max_element(curve.y.begin(), curve.y.end());
  curve.x = {curve.x.front()};
  curve.y = {best};
}

}  // namespace

CostModel at_best_efficiency(const CostModel& cost) {
  Profile profile = cost.profile();
  ComputeProfile& c = profile.compute;
  flatten_at_best(c.gemm_efficiency);
  flatten_at_best(c.attention_efficiency);
  c.layer_overhead_us = 0;
  c.gemm_work_overhead = 0;
  c.attention_blocks.tile_tokens = 0;  // the busiest SM only ever lengthens a call
  return CostModel(cost.model(), cost.cluster(), std::move(profile), cost.options());
}

double compute_bound_seconds(const IterationPlan& plan, const CostModel& best) {
  double busiest = 0;
  for (const Replica& replica : plan.replicas) {
    const ParallelScheme& s = replica.scheme;
    // Per CP rank, every share it computes over the iteration (the program charges them micro-batch by
    // micro-batch, local and distributed apart or together: at best efficiency the sums agree).
    std::vector<std::vector<SequenceShare>> shares(static_cast<std::size_t>(s.cp));
    for (const MicroBatch& mb : replica.micro_batches) {
      const MicroBatchWork work = split_work(replica, mb);
      for (std::size_t j = 0; j < shares.size(); ++j) {
        shares[j].insert(shares[j].end(), work.local[j].begin(), work.local[j].end());
        shares[j].insert(shares[j].end(), work.dist.begin(), work.dist.end());
      }
    }
    for (int stage = 0; stage < s.pp; ++stage) {
      const LayerSpan layers = stage_span(best.model(), s.pp, stage);
      for (const auto& rank : shares)
        busiest = std::max(busiest, best.compute_seconds(rank, s, layers, stage == s.pp - 1));
    }
  }
  return busiest;
}

std::optional<double> replica_bound_seconds(const IterationPlan& plan, Estimator& estimator) {
  if (plan.replicas.size() < 2 || plan.phase_count() > 1) return std::nullopt;
  const auto attention_work = [](const Replica& replica) {
    double sum = 0;
    for (const MicroBatch& mb : replica.micro_batches)
      for (const Placement& p : mb.placements) sum += static_cast<double>(p.tokens) * static_cast<double>(p.tokens);
    return sum;
  };
  std::size_t heaviest = 0;
  double most = -1;
  for (std::size_t r = 0; r < plan.replicas.size(); ++r)
    if (const double work = attention_work(plan.replicas[r]); work > most) {
      most = work;
      heaviest = r;
    }
  IterationPlan alone;
  alone.index = plan.index;
  alone.label = plan.label;
  alone.replicas = {plan.replicas[heaviest]};
  const IterationEstimate estimate = estimator.estimate(alone);
  return *std::max_element(estimate.propagation_end_s.begin(), estimate.propagation_end_s.end());
}

double memory_bound_bytes(const IterationPlan& plan, const CostModel& cost) {
  double most = 0;
  for (const Replica& replica : plan.replicas) {
    const ParallelScheme& s = replica.scheme;
    std::vector<Tokens> largest(static_cast<std::size_t>(s.cp), 0);  // per CP rank, its largest micro-batch
    for (const MicroBatch& mb : replica.micro_batches) {
      const MicroBatchWork work = split_work(replica, mb);
      for (int j = 0; j < s.cp; ++j)
        largest[static_cast<std::size_t>(j)] = std::max(largest[static_cast<std::size_t>(j)], work.gpu_tokens(j));
    }
    const Tokens held = *std::max_element(largest.begin(), largest.end());
    for (int stage = 0; stage < s.pp; ++stage) {
      const double per_token =
          cost.activation_bytes_per_token(s, stage_span(cost.model(), s.pp, stage), stage == s.pp - 1);
      most = std::max(most, cost.static_bytes(s, shard_degree(cost, s), stage) + per_token * static_cast<double>(held));
    }
  }
  return most;
}

}  // namespace lcsim::program
