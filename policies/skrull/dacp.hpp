#pragma once
// Skrull's Distributed-Aware Context Parallelism (Algorithm 1, Appendix B.1) and the round-robin placement it is
// compared with (Appendix B.2). Pure functions over token counts and FLOPs: no cost model, no plan types, so they
// are cheap enough to run inside GDS's retry loop.
#include <span>
#include <vector>

#include "model/workload.hpp"

namespace lcsim::skrull {

/// Placement of one micro-batch's sequences on a CP group of `cp` ranks.
struct CpAssignment {
  static constexpr int kSharded = -1;
  std::vector<int> ranks;  ///< per input sequence (input order): its CP rank, or kSharded; empty if !scheduled
  bool scheduled = true;   ///< false: roll-back found nothing to give up (a DACP scheduling error)
  bool within_bucket = true;  ///< every rank within BucketSize (Eq. 7); false only when roll-back is disabled
  int rollbacks = 0;       ///< local sequences re-classified as distributed
};

/// Algorithm 1. `flops[i]` is FLOPs(lengths[i]); a sequence sharded over N ranks adds flops/N to every rank.
/// With `rollback`, a sequence that no rank can take even as a shard makes the fullest rank give up one of its
/// local sequences (Algorithm 3's RollBack, applied to every rank's bucket; see dacp.cpp) and the sequence is
/// retried; when nothing is left to give up the micro-batch cannot be scheduled (`scheduled` false). That
/// happens exactly when its tokens exceed C * N, so DACP schedules every micro-batch that any placement could. Without `rollback` the sequence is sharded anyway
/// and the result is marked `within_bucket` false (an OOM the plan will report).
CpAssignment dacp_schedule(std::span<const Tokens> lengths, std::span<const double> flops, double bucket_tokens,
                           int cp, bool rollback);

/// Appendix B.2: each sequence goes to the rank with the largest remaining bucket, else is sharded if the
/// fullest rank can hold its shard, else roll-back as in DACP. Loads are ignored.
CpAssignment round_robin_schedule(std::span<const Tokens> lengths, double bucket_tokens, int cp, bool rollback);

}  // namespace lcsim::skrull
