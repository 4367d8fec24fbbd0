#pragma once
// Skrull's Global Data Scheduling (Algorithm 2): balance the global batch across DP ranks by FLOPs, then cut each
// rank's share into as few interleaved micro-batches as memory and DACP allow.
#include <cstddef>
#include <span>
#include <vector>

#include "policies/skrull/dacp.hpp"

namespace lcsim::skrull {

/// Greedy FLOPs bin packing across `ranks` (largest first onto the least-loaded rank; ties to the lower index,
/// equal FLOPs in input order). Returns the input indices held by each rank, in input order.
std::vector<std::vector<std::size_t>> binpack_by_flops(std::span<const double> flops, int ranks);

enum class CpPlacer { Dacp, RoundRobin };

struct GdsOptions {
  double bucket_tokens = 0;  ///< C
  int cp = 1;                ///< N
  bool rollback = true;
  CpPlacer placer = CpPlacer::Dacp;
};

struct ScheduledMicroBatch {
  std::vector<std::size_t> sequences;  ///< indices into the global batch
  std::vector<int> ranks;              ///< CP rank per sequence, or CpAssignment::kSharded
};

struct RankSchedule {
  std::vector<ScheduledMicroBatch> micro_batches;
  bool within_bucket = true;  ///< false: some CP rank exceeds C (roll-back disabled, or a sequence > C*N)
  int attempts = 0;           ///< micro-batch counts tried
  int rollbacks = 0;          ///< roll-backs made placing the cuts within Eq. 10 (cuts over it are never placed)
};

/// Places one micro-batch (indices into the global batch) on the CP group.
CpAssignment place_micro_batch(std::span<const Tokens> lengths, std::span<const double> flops,
                               std::span<const std::size_t> members, const GdsOptions& options);

/// Algorithm 2 for one DP rank holding `subset` (indices into `lengths`). Starting at ceil(Sum / (C N))
/// micro-batches, the ascending-sorted subset is cut interleaved (micro-batch j takes positions j, j+m, ...).
/// Retry semantics (the printed `continue` is ambiguous): as soon as one micro-batch of a cut holds more than
/// C N tokens (Eq. 10) or cannot be placed by DACP, the whole cut is discarded and the rank retries with one more
/// micro-batch. If even one sequence per micro-batch fails, that sequence is longer than the CP group can hold:
/// it is sharded and the schedule is marked outside the bucket (the plan reports the OOM).
RankSchedule gds_schedule_rank(std::span<const Tokens> lengths, std::span<const double> flops,
                               std::span<const std::size_t> subset, const GdsOptions& options);

}  // namespace lcsim::skrull
