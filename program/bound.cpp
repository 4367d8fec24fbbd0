#include "program/bound.hpp"

#include <algorithm>
#include <vector>

#include "model/plan_demand.hpp"

namespace lcsim::program {
namespace {

void flatten_at_best(Curve& curve) {
  const double best = *std::max_element(curve.y.begin(), curve.y.end());
  curve.x = {curve.x.front()};
  curve.y = {best};
}

/// What the program charges a placement (as split_work: a padded micro-batch costs every sequence at its longest).
/// The bounds read placements directly: split_work's per-rank lists, built for every micro-batch, would cost
/// CP x micro-batches at large CP degrees, more than the estimate they spare.
Tokens charged(const MicroBatch& mb, const Placement& p, Tokens longest) {
  return mb.padded ? longest : p.tokens;
}

bool on_rank(const Placement& p, int cp) {
  return p.cp_rank >= 0 && p.cp_rank < cp;
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
    // Every rank computes every sharded share; each its own local ones. The program charges them micro-batch by
    // micro-batch, local and sharded apart or together: at best efficiency the sums agree.
    std::vector<SequenceShare> sharded;
    std::vector<std::vector<SequenceShare>> local(static_cast<std::size_t>(s.cp));
    for (const MicroBatch& mb : replica.micro_batches) {
      const Tokens longest = mb.longest();
      for (const Placement& p : mb.placements) {
        if (p.sharded())
          sharded.push_back({charged(mb, p, longest), s.cp});
        else if (on_rank(p, s.cp))
          local[static_cast<std::size_t>(p.cp_rank)].push_back({charged(mb, p, longest), 1});
      }
    }
    for (int stage = 0; stage < s.pp; ++stage) {
      std::vector<double> rank_seconds(local.size(), 0.0);
      for (int chunk = 0; chunk < s.virtual_pp; ++chunk) {  // an interleaved stage's chunks, one after another
        const LayerSpan layers = chunk_span(best.model(), s, stage, chunk);
        const bool head = stage == s.pp - 1 && chunk == s.virtual_pp - 1;
        const double all = best.compute_seconds(sharded, s, layers, head);
        for (std::size_t j = 0; j < local.size(); ++j)
          rank_seconds[j] += all + best.compute_seconds(local[j], s, layers, head);
      }
      for (double seconds : rank_seconds) busiest = std::max(busiest, seconds);
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
    // The most tokens a GPU of the replica holds for one micro-batch: its sharded part plus the busiest rank's own.
    Tokens held = 0;
    std::vector<Tokens> own(static_cast<std::size_t>(s.cp), 0);
    std::vector<std::size_t> touched;
    for (const MicroBatch& mb : replica.micro_batches) {
      const Tokens longest = mb.longest();
      Tokens sharded = 0, busiest = 0;
      for (const Placement& p : mb.placements) {
        if (p.sharded()) {
          sharded += charged(mb, p, longest);
        } else if (on_rank(p, s.cp)) {
          const auto j = static_cast<std::size_t>(p.cp_rank);
          if (own[j] == 0) touched.push_back(j);
          own[j] += charged(mb, p, longest);
          busiest = std::max(busiest, own[j]);
        }
      }
      for (std::size_t j : touched) own[j] = 0;
      touched.clear();
      held = std::max(held, busiest + (sharded + s.cp - 1) / s.cp);  // split_work: ceil(sharded / cp) per rank
    }
    for (int stage = 0; stage < s.pp; ++stage) {
      // Every chunk of the stage holds a micro-batch's activations from its forward to its backward, and the last
      // chunk's run nested inside the first's: all of them are held at once.
      double per_token = 0;
      for (int chunk = 0; chunk < s.virtual_pp; ++chunk)
        per_token += cost.activation_bytes_per_token(s, chunk_span(cost.model(), s, stage, chunk),
                                                     stage == s.pp - 1 && chunk == s.virtual_pp - 1);
      most = std::max(most, cost.static_bytes(s, shard_degree(cost, s), stage) + per_token * static_cast<double>(held));
    }
  }
  return most;
}

}  // namespace lcsim::program
