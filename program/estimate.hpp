#pragma once
// `lcsim plan`'s estimate of an iteration: its program (program/iteration_program.hpp) replayed without
// contention (program/replay.hpp). The simulator runs the same program with contention, and live replay the same
// program on GPUs, so the three agree by construction wherever nothing shares a link.
#include "model/cost_model.hpp"
#include "model/plan.hpp"
#include "model/plan_demand.hpp"
#include "program/iteration_program.hpp"

namespace lcsim::program {

/// Throws PlanningError for a malformed plan (bad shapes, GPUs outside the cluster, cp_rank outside the CP group)
/// and whatever the cost model throws (InputError for a profile missing a collective).
IterationEstimate estimate_iteration(const IterationPlan& plan, const CostModel& cost);

/// estimate_iteration for many plans in a row: each program reuses the previous one's memory, which at a thousand
/// GPUs is most of the cost of building it.
class Estimator {
 public:
  explicit Estimator(const CostModel& cost) : cost_(cost) {}
  IterationEstimate estimate(const IterationPlan& plan);

 private:
  const CostModel& cost_;
  IterationProgram storage_;
};

}  // namespace lcsim::program
