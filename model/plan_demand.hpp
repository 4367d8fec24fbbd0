#pragma once
// What a plan asks of each GPU, for the planners and the validator: a micro-batch's work per CP rank, the ZeRO
// shard degree, and the peak-memory bound every plan is checked against. The estimate of a whole iteration is
// program::estimate_iteration (program/estimate.hpp): the iteration program, replayed without contention.
#include <span>
#include <vector>

#include "model/cost_model.hpp"
#include "model/plan.hpp"

namespace lcsim {

/// An iteration as program::estimate_iteration times it.
struct IterationEstimate {
  double seconds = 0;                ///< iteration time: until the last GPU ends
  std::vector<double> busy_seconds;  ///< per GPU: compute + communication not hidden by compute
  std::vector<double> peak_bytes;    ///< per GPU: static + activations in flight
  /// Per GPU: end of its last micro-batch step from the iteration start (IterationOutcome::propagation_end_s);
  /// empty when the timing does not say (then metrics leave pipeline_gap at 0).
  std::vector<double> propagation_end_s;
  int oom_gpus = 0;  ///< GPUs whose peak exceeds the cost model's capacity
  bool out_of_memory() const { return oom_gpus > 0; }
};

/// One micro-batch split by CP rank: the work the estimate (and the simulator) charges each rank.
struct MicroBatchWork {
  std::vector<std::vector<SequenceShare>> local;  ///< per CP rank: its whole sequences, SequenceShare{tokens, 1}
  std::vector<Tokens> local_tokens;               ///< per CP rank
  std::vector<SequenceShare> dist;                ///< sharded sequences, SequenceShare{tokens, cp}
  Tokens sharded_tokens = 0;
  Tokens sharded_per_gpu = 0;  ///< ceil(sharded_tokens / cp)
  /// CpSplit::PerSequence with cp > 1: per CP rank, the chunks of `dist` it computes (head_tail_chunks); empty
  /// otherwise, when every rank computes `dist` (1/cp of each sequence). Communication and memory still read
  /// `dist` and sharded_per_gpu: either split leaves each rank the same tokens, give or take one.
  std::vector<std::vector<SequenceShare>> dist_ranks;
  Tokens gpu_tokens(int cp_rank) const { return local_tokens[static_cast<std::size_t>(cp_rank)] + sharded_per_gpu; }
  /// What CP rank j computes of the sharded sequences.
  const std::vector<SequenceShare>& rank_dist(int cp_rank) const {
    return dist_ranks.empty() ? dist : dist_ranks[static_cast<std::size_t>(cp_rank)];
  }
};

/// Llama-3's per-sequence CP split of a pack of `sequences` (in order, T tokens in all) over `cp` ranks: the pack
/// cut into 2 cp chunks at floor(k T / (2 cp)), rank r given chunks r and 2 cp - 1 - r, each cut again where a
/// sequence ends. Per rank, its pieces as chunk shares (SequenceShare::chunk_tokens), chunk r's first; `owners`
/// (optional) receives, parallel to them, each piece's index in `sequences`.
std::vector<std::vector<SequenceShare>> head_tail_chunks(std::span<const Tokens> sequences, int cp,
                                                         std::vector<std::vector<std::size_t>>* owners = nullptr);
/// A padded micro-batch costs (and holds) every sequence at its longest length. Placements with a cp_rank outside
/// [-1, cp) are skipped (the validator reports them).
MicroBatchWork split_work(const Replica& replica, const MicroBatch& micro_batch);
/// The same into `work`, whose vectors keep their capacity (a program builds one per micro-batch).
void split_work(const Replica& replica, const MicroBatch& micro_batch, MicroBatchWork& work);

/// The forward passes (of one model chunk each) that stage `stage` runs before its first backward, out of
/// micro_batches x virtual_pp: plain 1F1B's pp - 1 - stage; Megatron's interleaved schedule's
/// 2 (pp - 1 - stage) + (virtual_pp - 1) pp, all of them when that reaches the total (program/ orders the steps;
/// with interleaving, counted over micro_batches rounded up to a multiple of pp, the absent ones included).
std::size_t pipeline_warmup(const ParallelScheme& scheme, int stage, std::size_t micro_batches);
/// Peak bytes on every GPU of the plan (indexed by global GPU index, world-size long): static bytes plus the
/// activations of the micro-batches in flight; on stage s of a pipeline the pipeline_warmup + 1 largest of its
/// micro-batches' chunk activations (plain 1F1B keeps up to pp - s forward passes alive there), whatever their
/// order: a bound of the program's peak that does not depend on the order the policy chose.
std::vector<double> estimate_peak_bytes(const IterationPlan& plan, const CostModel& cost);
/// The largest static bytes (parameters, gradients, optimizer states: CostModel::static_bytes) of any GPU of the
/// plan: what estimate_peak_bytes adds activations to.
double plan_static_bytes(const IterationPlan& plan, const CostModel& cost);
/// ZeRO sharding degree for a replica's parameters: all GPUs of the plan holding the same model slice.
int shard_degree(const CostModel& cost, const ParallelScheme& scheme);

}  // namespace lcsim
