#pragma once
// Closed-form estimate of an IterationPlan from the cost model (no SimGrid): per-GPU busy time and peak memory,
// iteration time. The semantics here are the reference the simulator's no-contention case must match.
#include <vector>

#include "policies/core/cost_model.hpp"
#include "policies/core/plan.hpp"

namespace lcsim {

struct IterationEstimate {
  double seconds = 0;                 ///< iteration time: slowest replica per phase, summed over phases
  std::vector<double> busy_seconds;   ///< per GPU: compute + communication not hidden by compute
  std::vector<double> peak_bytes;     ///< per GPU: static + activations in flight
  int oom_gpus = 0;                   ///< GPUs whose peak exceeds the cost model's capacity
  bool out_of_memory() const { return oom_gpus > 0; }
};

/// One micro-batch split by CP rank: the work the estimate (and the simulator) charges each rank.
struct MicroBatchWork {
  std::vector<std::vector<SequenceShare>> local;  ///< per CP rank: its whole sequences, SequenceShare{tokens, 1}
  std::vector<Tokens> local_tokens;               ///< per CP rank
  std::vector<SequenceShare> dist;                ///< sharded sequences, SequenceShare{tokens, cp}
  Tokens sharded_tokens = 0;
  Tokens sharded_per_gpu = 0;                     ///< ceil(sharded_tokens / cp)
  Tokens gpu_tokens(int cp_rank) const { return local_tokens[static_cast<std::size_t>(cp_rank)] + sharded_per_gpu; }
};
/// A padded micro-batch costs (and holds) every sequence at its longest length. Placements with a cp_rank outside
/// [-1, cp) are skipped (the validator reports them).
MicroBatchWork split_work(const Replica& replica, const MicroBatch& micro_batch);

/// Time of one micro-batch on one CP rank of a non-pipelined replica (Skrull Eq. 2 when the replica overlaps).
double micro_batch_rank_seconds(const CostModel& cost, const Replica& replica, const MicroBatch& micro_batch,
                                int cp_rank);
/// Time of one micro-batch for a whole replica: slowest CP rank (per pipeline stage when pp > 1).
double micro_batch_seconds(const CostModel& cost, const Replica& replica, const MicroBatch& micro_batch);
/// Peak bytes on every GPU of the plan (indexed by global GPU index, world-size long).
std::vector<double> estimate_peak_bytes(const IterationPlan& plan, const CostModel& cost);
/// ZeRO sharding degree for a replica's parameters: all GPUs of the plan holding the same model slice.
int shard_degree(const CostModel& cost, const ParallelScheme& scheme);

IterationEstimate estimate_iteration(const IterationPlan& plan, const CostModel& cost);

}  // namespace lcsim
