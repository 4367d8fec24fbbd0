#pragma once
// IterationPlan: what every GPU does in one training iteration. Policies build plans; the validator and the
// iteration program (program/), which the estimate, the simulator and the live executor run, only read them.
//
//   IterationPlan -> replicas (DP members; each its own ParallelScheme and GPUs)
//                 -> micro-batches (in execution order; 1F1B order for pipelines)
//                 -> placements (a whole sequence on one CP rank, or sharded across the replica's CP group)
//
// Replicas of the same `phase` run concurrently; phases run one after another (HotSPa's strategy switches).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/cost_model.hpp"
#include "model/workload.hpp"

namespace lcsim {

struct Placement {
  static constexpr int kSharded = -1;
  std::int64_t sequence_id = 0;
  Tokens tokens = 0;
  int cp_rank = kSharded;  ///< 0..cp-1: the whole sequence on that CP rank (Skrull "local"); kSharded: 1/cp each
  bool sharded() const { return cp_rank == kSharded; }
  friend bool operator==(const Placement&, const Placement&) = default;
};

/// How a micro-batch's sharded placements are cut across the replica's CP ranks.
enum class CpSplit : std::uint8_t {
  PerDocument,  ///< each sharded sequence balanced on its own (zigzag chunks of that sequence): lcsim's sharding
  /// The sharded placements concatenated in order into one pack, cut into 2 cp equal chunks; rank r gets chunks r
  /// and 2 cp - 1 - r (Llama-3's context parallelism; WLB-LLM's per-sequence sharding). Needs ring attention.
  PerSequence,
};
std::string_view to_string(CpSplit split);
/// "per_document" | "per_sequence"; nullopt for anything else.
std::optional<CpSplit> cp_split_from_string(std::string_view name);

struct MicroBatch {
  std::vector<Placement> placements;
  bool padded = false;  ///< sequences padded to the longest one of the micro-batch (non-packed batching)
  CpSplit cp_split = CpSplit::PerDocument;
  Tokens tokens() const;
  Tokens longest() const;
  friend bool operator==(const MicroBatch&, const MicroBatch&) = default;
};

struct Replica {
  ParallelScheme scheme;
  /// scheme.gpus() global GPU indices; index (stage * cp + cp_rank) * tp + tp_rank.
  std::vector<int> gpus;
  std::vector<MicroBatch> micro_batches;
  int phase = 0;
  /// Skrull DACP (Eq. 2): the all-to-all of distributed sequences overlaps the compute of local sequences.
  bool overlap_cp_comm = false;

  int gpu(int stage, int cp_rank, int tp_rank) const;
  Tokens tokens() const;
  friend bool operator==(const Replica&, const Replica&) = default;
};

struct IterationPlan {
  int index = 0;
  std::string label;  ///< e.g. HBP's packing group, HotSPa's strategies
  std::vector<Replica> replicas;

  Tokens tokens() const;
  std::size_t sequence_count() const;
  int phase_count() const;
  friend bool operator==(const IterationPlan&, const IterationPlan&) = default;
};

/// Contiguous GPU blocks for a homogeneous layout: replica r gets GPUs [r*g, (r+1)*g), g = scheme.gpus().
std::vector<Replica> make_homogeneous_replicas(const ParallelScheme& scheme, int replicas);

}  // namespace lcsim
