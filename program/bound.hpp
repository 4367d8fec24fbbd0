#pragma once
// Lower bounds of an iteration's estimate (program/estimate.hpp) that cost a fraction of it: `lcsim tune` skips a
// candidate whose bounds already lose to the candidates it has estimated (docs/tune.md). Each follows from how the
// replay runs a program, never from a fitted number:
//  - compute: a GPU runs its compute steps one after another, so the iteration lasts at least the busiest GPU's
//    compute; timed at the profile's best efficiency without the fixed overheads, that compute is additive over
//    sequences and needs only the plan's placements, not the program.
//  - replica: replicas share nothing before the gradient sync, so one replica's program alone ends its last
//    micro-batch exactly when it does in the whole program; its replay costs 1/replicas of the estimate.
//  - memory: a micro-batch's activations are held at once beside the GPU's static bytes, so the largest of them
//    bounds the peak from below.
#include <optional>

#include "model/cost_model.hpp"
#include "model/plan.hpp"
#include "program/estimate.hpp"

namespace lcsim::program {

/// `cost` at its best: every efficiency curve at its highest point, no layer overhead, no element-wise share, no
/// attention block model. Each of its compute times is at most `cost`'s for the same work, and it is linear in the
/// work, so a GPU's compute is the sum over its sequences.
CostModel at_best_efficiency(const CostModel& cost);

/// The compute of the busiest GPU of `plan` under `best` (at_best_efficiency): at most the plan's iteration time.
double compute_bound_seconds(const IterationPlan& plan, const CostModel& best);

/// When its last micro-batch step ends on the replica with the most attention work (sum of squared sequence
/// lengths; a long-context iteration is attention-bound), replayed alone: at most the plan's iteration time. None
/// for a plan of one replica (the bound would cost the estimate) or of several phases (replicas of one phase wait
/// for the previous phase).
std::optional<double> replica_bound_seconds(const IterationPlan& plan, Estimator& estimator);

/// The largest over GPUs of static bytes plus its largest micro-batch's activations: at most the plan's peak.
double memory_bound_bytes(const IterationPlan& plan, const CostModel& cost);

}  // namespace lcsim::program
