#include "program/estimate.hpp"

#include <algorithm>
#include <utility>

#include "program/replay.hpp"

namespace lcsim::program {

IterationEstimate estimate_iteration(const IterationPlan& plan, const CostModel& cost) {
  return Estimator(cost).estimate(plan);
}

IterationEstimate Estimator::estimate(const IterationPlan& plan) {
  // Folded layers and no work descriptors: without contention, finer blocks give the same times.
  storage_ = build_program(plan, cost_, {.layers_per_block = 0, .describe_work = false}, std::move(storage_));
  IterationOutcome outcome = replay_program(storage_, 0.0, false);
  check_finite(outcome);
  IterationEstimate estimate;
  estimate.seconds = outcome.seconds;
  estimate.busy_seconds = std::move(outcome.busy_seconds);
  estimate.peak_bytes = std::move(outcome.peak_bytes);
  estimate.propagation_end_s = std::move(outcome.propagation_end_s);
  const double capacity = cost_.capacity_bytes();
  estimate.oom_gpus = static_cast<int>(
      std::count_if(estimate.peak_bytes.begin(), estimate.peak_bytes.end(), [&](double b) { return b > capacity; }));
  return estimate;
}

}  // namespace lcsim::program
