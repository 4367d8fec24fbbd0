#pragma once
// NCCL collectives over the visible GPUs of this node, timed the nccl-tests way (one process driving every GPU,
// out-of-place, float sum, warm-up then timed iterations): time = the slowest rank's CUDA-event time of one
// operation, median over iterations; algbw = size / time; busbw = algbw * bus_factor (model/profile.hpp).
#include <iosfwd>
#include <vector>

#include "calibrate/fit/measurements.hpp"
#include "calibrate/measure/measurement_plan.hpp"
#include "model/model.hpp"

namespace lcsim::gpu {

/// Prints an nccl-tests-like table per (op, group size) to `table`. Throws std::runtime_error when NCCL is not
/// available or fails.
std::vector<CollectiveMeasurement> measure_collectives(const std::vector<CollectivePlan>& plans, int warmup,
                                                       int repetitions, std::ostream& table);

/// The Ulysses exchange of one layer forward for each point: all-to-alls of Q (q_hidden), K, V (kv_hidden) and the
/// attention output (q_hidden) of tokens_per_gpu BF16 rows on each of the CP group's GPUs.
std::vector<UlyssesMeasurement> measure_ulysses(const ModelConfig& model, const std::vector<UlyssesPoint>& points,
                                                int warmup, int repetitions, std::ostream& table);

}  // namespace lcsim::gpu
