#pragma once
// The builder of iteration programs (program/iteration_program.hpp), private to program/: the per-GPU steps of a
// plan, built from the cost model. Its parts: program_builder.cpp (phases, work and collectives, gradient sync),
// program_builder_ring.cpp (ring attention), program_builder_flat.cpp (replicas without pipeline) and
// program_builder_pipeline.cpp (1F1B pipelines).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/check.hpp"
#include "base/errors.hpp"
#include "model/plan_demand.hpp"
#include "program/iteration_program.hpp"

namespace lcsim::program::detail {

using Shares = std::vector<SequenceShare>;
using Ids = std::vector<std::int64_t>;

/// The sequence ids behind split_work's shares, in the same order: per CP rank its local ones, then the sharded.
struct ShareIds {
  std::vector<Ids> local;
  Ids dist;
  std::vector<Ids> dist_ranks;  ///< per CP rank under a per-sequence split: its chunks' sequences
  const Ids& rank_dist(int j) const { return dist_ranks.empty() ? dist : dist_ranks[static_cast<std::size_t>(j)]; }
};
/// The sequence ids of a micro-batch's shares, per CP rank and distributed, into `ids` (its memory kept); with
/// `describe` false only the per-rank lists, empty (the ids describe work, nothing else).
inline void split_ids(const Replica& replica, const MicroBatch& micro_batch, bool describe, ShareIds& ids) {
  ids.local.resize(static_cast<std::size_t>(replica.scheme.cp));
  for (auto& local : ids.local) local.clear();
  ids.dist.clear();
  ids.dist_ranks.clear();
  if (!describe) return;
  std::vector<Tokens> sharded;
  for (const auto& p : micro_batch.placements) {
    if (p.sharded()) {
      ids.dist.push_back(p.sequence_id);
      sharded.push_back(p.tokens);
    } else if (p.cp_rank >= 0 && p.cp_rank < replica.scheme.cp) {
      ids.local[static_cast<std::size_t>(p.cp_rank)].push_back(p.sequence_id);
    }
  }
  if (micro_batch.cp_split == CpSplit::PerSequence && replica.scheme.cp > 1 && !sharded.empty()) {
    std::vector<std::vector<std::size_t>> owners;
    head_tail_chunks(sharded, replica.scheme.cp, &owners);
    for (const auto& rank : owners) {
      Ids& out = ids.dist_ranks.emplace_back();
      for (std::size_t i : rank) out.push_back(ids.dist[i]);
    }
  }
}

struct Block {
  LayerSpan span;     // the block's layers of the model
  LayerMix mix;       // what they compute in backward (the cost model's)
  bool last = false;  // carries the LM head on the last stage
  int layers() const { return span.count; }
  int checkpointed() const { return mix.checkpointed(); }
  bool backward() const { return mix.with_backward() > 0; }
};

/// The blocks of `per_block` layers of a stage (the whole stage when per_block <= 0), cut where the layers run
/// under no_grad end: such a block has no backward pass, its collectives run in the forward only.
inline std::vector<Block> make_blocks(const CostModel& cost, const ParallelScheme& scheme, LayerSpan stage,
                                      int per_block) {
  const int no_grad_end = stage.first + cost.layer_mix(scheme, stage).none;
  std::vector<Block> blocks;
  for (int first = stage.first; first < stage.end();) {
    int end = per_block <= 0 ? stage.end() : std::min(first + per_block, stage.end());
    if (first < no_grad_end) end = std::min(end, no_grad_end);
    const LayerSpan span{first, end - first};
    blocks.push_back({span, cost.layer_mix(scheme, stage, span), end == stage.end()});
    first = end;
  }
  if (blocks.empty()) blocks.push_back({stage, cost.layer_mix(scheme, stage), true});
  return blocks;
}

/// Per-layer seconds of one list of shares on one GPU, from the cost model, by what a layer computes in backward
/// (only those the stage holds are asked for).
struct ShareCost {
  struct Layer {
    double plain = 0;         // forward + backward of a layer
    double checkpointed = 0;  // ... with its forward recomputed
    double forward = 0;       // forward of a layer (pipelines)
  };
  bool empty = true;
  Layer full, activations;
  double no_grad = 0;  // a no_grad layer: its forward only
  double head = 0;     // LM head, forward + backward
  double head_forward = 0;

  ShareCost() = default;
  ShareCost(const CostModel& cost, const Shares& shares, const ParallelScheme& scheme, const LayerMix& stage,
            bool with_head) {
    if (shares.empty()) return;
    empty = false;
    // Only the kinds of layer the stage has: most stages checkpoint none, and each kind is a cost-model query.
    const auto layer = [&](LayerGrad grad, int layers, int checkpointed) {
      Layer l;
      if (layers > checkpointed) l.plain = cost.layer_seconds(shares, scheme.tp, scheme.recompute, false, grad);
      if (checkpointed > 0) l.checkpointed = cost.layer_seconds(shares, scheme.tp, scheme.recompute, true, grad);
      return l;
    };
    if (stage.full > 0) full = layer(LayerGrad::Full, stage.full, stage.checkpointed_full);
    if (stage.activations > 0)
      activations = layer(LayerGrad::Activations, stage.activations, stage.checkpointed_activations);
    if (stage.none > 0) no_grad = cost.layer_seconds(shares, scheme.tp, scheme.recompute, false, LayerGrad::None);
    if (with_head) head = cost.compute_seconds(shares, scheme, 0, true);
    // Pipelines split each micro-batch into its passes; an overlapped gradient sync needs the split too.
    if (scheme.pp > 1 || cost.options().overlap_gradient_sync) {
      // The forward of a trained layer (the model's last, never frozen unless all are) and of a frozen one.
      const int last = cost.model().layers - 1;
      if (stage.full > 0) full.forward = cost.forward_seconds(shares, scheme, LayerSpan{last, 1}, false);
      if (stage.activations > 0) activations.forward = cost.forward_seconds(shares, scheme, LayerSpan{0, 1}, false);
      if (with_head) head_forward = cost.forward_seconds(shares, scheme, 0, true);
    }
  }
  double block(const Block& b) const {
    if (empty) return 0;
    const LayerMix& m = b.mix;
    double seconds = m.checkpointed_full * full.checkpointed + (m.full - m.checkpointed_full) * full.plain;
    if (m.activations > 0)
      seconds += m.checkpointed_activations * activations.checkpointed +
                 (m.activations - m.checkpointed_activations) * activations.plain;
    if (m.none > 0) seconds += m.none * no_grad;
    return seconds + (b.last ? head : 0.0);
  }
  double block_forward(const Block& b) const {
    if (empty) return 0;
    double seconds = b.mix.full * full.forward;
    if (b.mix.activations > 0) seconds += b.mix.activations * activations.forward;
    if (b.mix.none > 0) seconds += b.mix.none * no_grad;
    return seconds + (b.last ? head_forward : 0.0);
  }
  double block_backward(const Block& b) const { return b.backward() || b.last ? block(b) - block_forward(b) : 0.0; }
};

template <class T>
inline std::vector<T> concat(const std::vector<T>& a, const std::vector<T>& b);

/// The compute costs of one micro-batch on one stage, per CP rank: its local shares, and (without overlap) its
/// local and distributed shares together; `dist` is the distributed shares alone. A rank without local shares
/// computes exactly the distributed ones, so the cost model is asked once for all such ranks (with Ulysses, every
/// rank of a baseline), not once per rank and TP rank.
struct MicroBatchCosts {
  ShareCost dist;
  std::vector<ShareCost> dist_ranks;  ///< per CP rank under a per-sequence split (MicroBatchWork::dist_ranks)
  std::vector<ShareCost> local;       ///< per CP rank
  std::vector<ShareCost> all;         ///< per CP rank: local ++ its distributed shares; empty costs with overlap
  const ShareCost& rank_dist(std::size_t j) const { return dist_ranks.empty() ? dist : dist_ranks[j]; }

  MicroBatchCosts() = default;
  MicroBatchCosts(const CostModel& cost, const MicroBatchWork& work, const ParallelScheme& s, const LayerMix& stage,
                  bool overlap, bool head) {
    assign(cost, work, s, stage, overlap, head);
  }
  /// Recomputes them for another micro-batch, keeping the vectors' memory.
  void assign(const CostModel& cost, const MicroBatchWork& work, const ParallelScheme& s, const LayerMix& stage,
              bool overlap, bool head) {
    dist = ShareCost(cost, work.dist, s, stage, head);
    dist_ranks.clear();
    for (const Shares& chunks : work.dist_ranks) dist_ranks.emplace_back(cost, chunks, s, stage, head);
    local.assign(work.local.size(), ShareCost{});
    all.assign(work.local.size(), ShareCost{});
    for (std::size_t j = 0; j < work.local.size(); ++j) {
      const Shares& shares = work.local[j];
      if (shares.empty()) {
        if (!overlap) all[j] = rank_dist(j);
        continue;
      }
      local[j] = ShareCost(cost, shares, s, stage, head);
      if (!overlap) all[j] = ShareCost(cost, concat(shares, work.rank_dist(static_cast<int>(j))), s, stage, head);
    }
  }
};

template <class T>
inline std::vector<T> concat(const std::vector<T>& a, const std::vector<T>& b) {
  std::vector<T> all(a);
  all.insert(all.end(), b.begin(), b.end());
  return all;
}

inline CollectiveTime halve(CollectiveTime t) {
  return {t.latency_s / 2, t.transfer_s / 2};
}
inline std::vector<CollectiveCall> scaled(std::vector<CollectiveCall> calls, double factor) {
  for (auto& call : calls) call.count *= factor;
  return calls;
}
inline std::vector<CollectiveCall> halve(std::vector<CollectiveCall> calls) {
  return scaled(std::move(calls), 0.5);
}

/// The CP group of TP rank t on a stage, and the TP group of CP rank j.
inline std::vector<int> group_over_cp(const Replica& rep, int stage, int t) {
  std::vector<int> gpus;
  for (int j = 0; j < rep.scheme.cp; ++j) gpus.push_back(rep.gpu(stage, j, t));
  return gpus;
}
inline std::vector<int> group_over_tp(const Replica& rep, int stage, int j) {
  std::vector<int> gpus;
  for (int t = 0; t < rep.scheme.tp; ++t) gpus.push_back(rep.gpu(stage, j, t));
  return gpus;
}

/// A model slice's gradient-sync group: the GPUs of the phase's replicas with the same tp and pp at one stage and
/// TP rank (they hold the same parameters), sorted; `replica` is one of those replicas.
struct SliceGroup {
  int replica = 0;
  int stage = 0;
  std::vector<int> gpus;
};

inline std::vector<SliceGroup> slice_groups(const IterationPlan& plan, const std::vector<int>& phase_replicas) {
  const auto replica = [&](int r) -> const Replica& { return plan.replicas[static_cast<std::size_t>(r)]; };
  std::map<std::pair<int, int>, std::vector<int>> by_shape;
  for (int r : phase_replicas) by_shape[{replica(r).scheme.tp, replica(r).scheme.pp}].push_back(r);
  std::vector<SliceGroup> groups;
  for (const auto& [shape, members] : by_shape)
    for (int stage = 0; stage < shape.second; ++stage)
      for (int t = 0; t < shape.first; ++t) {
        SliceGroup group{members.front(), stage, {}};
        for (int r : members)
          for (int j = 0; j < replica(r).scheme.cp; ++j) group.gpus.push_back(replica(r).gpu(stage, j, t));
        std::sort(group.gpus.begin(), group.gpus.end());
        groups.push_back(std::move(group));
      }
  return groups;
}

/// The part of the model a GPU holds: its replica's TP and PP degrees, its stage and TP rank.
struct ModelSlice {
  int tp = 0, pp = 0, stage = -1, tp_rank = -1;
  friend bool operator==(const ModelSlice&, const ModelSlice&) = default;
};

/// The slice of the GPU at `index` in a replica of `scheme` (Replica::gpu's order: stage-major, TP rank minor).
inline ModelSlice slice_of(const ParallelScheme& scheme, int index) {
  return {scheme.tp, scheme.pp, index / (scheme.cp * scheme.tp), index % scheme.tp};
}

inline std::map<int, std::vector<int>> replicas_by_phase(const IterationPlan& plan) {
  std::map<int, std::vector<int>> phases;  // increasing phase order
  for (std::size_t r = 0; r < plan.replicas.size(); ++r) phases[plan.replicas[r].phase].push_back(static_cast<int>(r));
  return phases;
}

[[noreturn]] inline void plan_error(const IterationPlan& plan, std::size_t replica, const std::string& what) {
  throw PlanningError("iteration plan " + std::to_string(plan.index) + ", replica " + std::to_string(replica) + ": " +
                      what);
}

/// The shape and GPUs of every replica. Placements are checked as the builder reads each micro-batch
/// (check_placements), so that building reads a plan once: at a thousand GPUs a plan is rarely in cache.
inline void check_replicas(const IterationPlan& plan, const CostModel& cost) {
  const int world = cost.cluster().world_size();
  for (std::size_t r = 0; r < plan.replicas.size(); ++r) {
    const auto& replica = plan.replicas[r];
    const auto& s = replica.scheme;
    if (s.tp < 1 || s.pp < 1 || s.cp < 1 || s.checkpointed_layers < 0 || s.virtual_pp < 1 ||
        cost.model().layers % s.virtual_stages() != 0 || replica.gpus.size() != static_cast<std::size_t>(s.gpus()))
      plan_error(plan, r, "malformed parallel scheme or GPU list");
    for (int g : replica.gpus)
      if (g < 0 || g >= world) plan_error(plan, r, "GPU index " + std::to_string(g) + " outside the cluster");
  }
}

inline void check_placements(const IterationPlan& plan, std::size_t r, const MicroBatch& micro_batch) {
  const int cp = plan.replicas[r].scheme.cp;
  for (const auto& p : micro_batch.placements)
    if (p.cp_rank < Placement::kSharded || p.cp_rank >= cp)
      plan_error(plan, r, "cp_rank " + std::to_string(p.cp_rank) + " outside the CP group");
}

class Builder {
 public:
  Builder(const IterationPlan& plan, const CostModel& cost, const ProgramOptions& options, IterationProgram storage)
      : plan_(plan),
        cost_(cost),
        options_(options),
        ring_attention_(shards_tokens(cost.options().cp_attention)),
        program_(std::move(storage)) {
    if (options.fold_replicas) stand_ins_ = replica_stand_ins(plan, cost.cluster().topology().domain_size());
    program_.gpus.assign(gpu_lanes(plan, cost.cluster().world_size(), stand_ins_));  // keeps the lists' capacity
    program_.collectives.clear();
    program_.transfers.clear();
    program_.works.clear();
  }

  IterationProgram build();

 private:
  const Replica& replica(int r) const { return plan_.replicas[static_cast<std::size_t>(r)]; }
  /// Whether replica r's steps are another's (ProgramOptions::fold_replicas): its GPUs run that replica's lanes.
  bool folded(int r) const { return !stand_ins_.empty() && stand_ins_[static_cast<std::size_t>(r)] != r; }
  /// Whether `gpu` writes its lane's steps (GpuSteps): the other GPUs of a lane are given none, since they run
  /// its list.
  bool leads(int gpu) const { return program_.gpus.leads(static_cast<std::size_t>(gpu)); }
  std::vector<Step>& steps_of(int gpu) {
    return program_.gpus.lane_steps(program_.gpus.lane(static_cast<std::size_t>(gpu)));
  }
  void push(int gpu, const Step& step) {
    if (leads(gpu)) steps_of(gpu).push_back(step);
  }
  std::size_t step_count(int gpu) { return steps_of(gpu).size(); }
  Step& step_at(int gpu, std::size_t i) { return steps_of(gpu)[i]; }

  ShareIds share_ids(const Replica& rep, const MicroBatch& micro_batch) const {
    ShareIds ids;
    split_ids(rep, micro_batch, options_.describe_work, ids);
    return ids;
  }

  static Step compute(WorkKind kind, double seconds, int replica, int micro_batch, int work) {
    return Step{.type = Step::Type::Compute,
                .kind = kind,
                .seconds = seconds,
                .replica = replica,
                .micro_batch = micro_batch,
                .work = work};
  }

  static ComputeWork parameter_work(ComputeWork::Pass pass, double parameters) {
    ComputeWork work;
    work.pass = pass;
    work.parameters = parameters;
    return work;
  }
  int add_work(ComputeWork work);
  /// The work of `shares` over one block (or one pass of it); -1 when there are no shares.
  int add_work(ComputeWork::Pass pass, const Shares& shares, const Ids& ids, const ParallelScheme& s, const Block& b,
               bool head_stage);
  /// The work of one rank's local shares and the distributed ones together (no overlap), concatenated only when
  /// work is described.
  int add_work(ComputeWork::Pass pass, const Shares& local, const Ids& local_ids, const Shares& dist,
               const Ids& dist_ids, const ParallelScheme& s, const Block& b, bool head_stage);
  static Step join(int collective, WorkKind kind, int replica, int micro_batch) {
    return Step{.type = Step::Type::Collective,
                .kind = kind,
                .index = collective,
                .replica = replica,
                .micro_batch = micro_batch};
  }

  int add_collective(std::vector<int> gpus, LinkClass link, CollectiveTime time, WorkKind kind,
                     std::vector<CollectiveCall> calls, double flow_scale = 1.0);

  /// A collective of the cost model's calls over `gpus`, timed on the path the topology gives the group.
  int add_calls(std::vector<int> gpus, const std::vector<CollectiveCall>& calls, WorkKind kind, bool half = false);

  void add_phase_barrier();

  /// Seconds and work of one list of shares over one block (or one pass of it).
  struct BlockWork {
    double seconds = 0;
    int work = -1;
  };

  /// A block's TP collectives over one TP group: the part that runs before its compute, and under async TP the
  /// part hidden beside it (CostModel::tp_hidden_seconds; -1 when none). `half`: one pass's (pipelines).
  struct TpCollectives {
    int exposed = -1;
    int hidden = -1;
  };
  TpCollectives add_tp_collectives(std::vector<int> gpus, Tokens tokens, int tp, LayerSpan span, bool half = false);

  /// `step` (a Compute step) for `gpu`; while `tp_hidden` names a collective, the first such step with time runs
  /// beside it (ComputeWithCollective) and takes it. The hidden part is at most the block's GEMM time, so the step
  /// still lasts its compute unless contention stretches the transfers.
  void push_compute(int gpu, Step step, int& tp_hidden);
  /// Joins what push_compute could not overlap (a block without plain compute), after the block.
  void join_leftover_tp(int gpu, int tp_hidden, int r, int m);

  /// The compute and CP steps of one block (or one pass of it) for one GPU, beside TP collective `tp_hidden`.
  void add_block_compute(int gpu, bool overlap, BlockWork local, BlockWork dist, BlockWork all, int cp_collective,
                         int layers, WorkKind kind, int r, int m, int tp_hidden = -1);

  /// One ring exchange of a block: its collective, the attention beside it and what it leaves exposed alone.
  struct RingStep {
    int collective = -1;
    double beside_s = 0;
    double exposed_s = 0;
    CpExchange::Pass pass = CpExchange::Pass::Forward;
    double buffer_bytes = 0;  ///< held while the step runs (CpExchange::buffer_bytes)
  };

  /// The ring exchanges of one block of `work` over the CP group of TP rank t on a stage, one collective each.
  std::vector<RingStep> add_ring(const Replica& rep, int stage, int t, const MicroBatchWork& work, const Block& b);

  /// `ring` as CP rank j runs it: under a per-sequence split the ranks' attention differs, so each runs its own
  /// blocks beside the shared transfers (the exchange then waits for the busiest); `which`: every exchange (0),
  /// the forward ones (1) or the backward ones (2), as `ring` holds them.
  /// The result is `shared` itself or a member scratch, valid until the next call.
  const std::vector<RingStep>& rank_ring(const std::vector<RingStep>& shared, const Replica& rep,
                                         const MicroBatchWork& work, int j, const Block& b, int which);

  /// The compute and ring steps of one block (or one pass of it) for one GPU (header comment); `ring` not empty.
  /// The compute that does not run beside the ring is never empty (it holds the GEMMs and the attention blocks
  /// no transfer overlaps), so it carries the work descriptor; with overlap the local descriptor goes with the
  /// first ring step that computes any local work.
  void add_block_ring(int gpu, bool overlap, BlockWork local, BlockWork dist, BlockWork all,
                      const std::vector<RingStep>& ring, WorkKind kind, int r, int m, int tp_hidden = -1);

  /// A flat replica's layers as blocks, and what they hold per token.
  struct FlatLayers {
    LayerSpan layers;
    std::vector<Block> blocks;
    double bytes_per_token = 0;
    LayerMix mix;
  };

  void add_flat_replica(int r);

  // A micro-batch's state lives in scratch_, reused: a replica's micro-batches are the program's bulk (131,072 an
  // iteration for DeepSpeed at 16,384 GPUs), and fresh vectors for each were a third of the build's time.
  void add_flat_micro_batch(int r, const FlatLayers& f, std::size_t mi);

  /// scratch_.cp_index[block][tp rank]: the block's all-to-all among the CP ranks of that TP rank;
  /// scratch_.ring[block][tp rank] its ring exchanges instead, with ring attention.
  void add_flat_cp_collectives(const Replica& rep, const std::vector<Block>& blocks, bool sharded);

  /// The GPUs of CP rank j (one per TP rank) for micro-batch m: each block's TP collective, compute and CP
  /// exchange, then the activations they hold.
  void add_flat_cp_rank(int r, const FlatLayers& f, int m, int j, double sharded_bytes);

  /// Block b of micro-batch m on GPU g (CP rank j, TP rank t), forward and backward together.
  void add_flat_block(int r, int m, int j, int t, int g, const Block& block, std::size_t b);

  /// Activations held from the first step of [first, end) to the end of the last one.
  void mark_in_flight(int gpu, std::size_t first, double bytes);

  /// Collectives of one micro-batch on one stage, forward and backward pass.
  struct PassCollectives {
    std::vector<std::vector<int>> cp_fwd, cp_bwd;                        // [block][tp rank]
    std::vector<std::vector<std::vector<RingStep>>> ring_fwd, ring_bwd;  // [block][tp rank], ring attention
    std::vector<std::vector<TpCollectives>> tp_fwd, tp_bwd;              // [cp rank][block]
  };
  /// Pipeline transfers of a replica: [micro-batch][boundary][j * tp + t] (virtual stage b -> b + 1 for
  /// activations, b + 1 -> b for gradients); -1 where CP rank j holds nothing.
  struct PipelineTransfers {
    std::vector<std::vector<std::vector<int>>> act, grad;
  };
  /// What the steps of one pipeline stage (one model chunk of it, when interleaved) are built from.
  struct StageContext {
    int r = 0;
    int stage = 0;
    int vstage = 0;     ///< its virtual stage: chunk x pp + stage (the stage without interleaving)
    bool head = false;  ///< the last virtual stage, with the LM head
    double bytes_per_token = 0;
    const std::vector<double>& sharded_bytes;  ///< per micro-batch: its shards' copies (CostModel), on every rank
    const std::vector<Block>& blocks;
    const std::vector<MicroBatchWork>& works;
    const std::vector<ShareIds>& ids;
    const std::vector<MicroBatchCosts>& costs;
    const std::vector<PassCollectives>& passes;
    const PipelineTransfers& transfers;
  };

  /// Whether activation gradients cross the boundary between virtual stage `boundary` and the next: not when the
  /// lower one ends in a no_grad layer (then nothing before it trains either).
  bool gradient_crosses(const ParallelScheme& s, int boundary) const {
    return cost_.layer_grad(stage_span(cost_.model(), s.virtual_stages(), boundary).end() - 1) != LayerGrad::None;
  }
  void add_pipelined_replica(int r);
  PipelineTransfers add_pipeline_transfers(const Replica& rep, const std::vector<MicroBatchWork>& works);
  PassCollectives add_pass_collectives(const Replica& rep, int stage, const MicroBatchWork& work,
                                       const std::vector<Block>& blocks);
  /// One forward or backward pass of micro-batch m on the GPU of CP rank j and TP rank t: receive, the blocks
  /// (in reverse for the backward), send. `first_step`: where the forward began, whose activations the backward
  /// frees.
  void add_pipeline_pass(const StageContext& c, int j, int t, std::size_t m, bool forward, std::size_t& first_step);
  void add_gradient_sync(const std::vector<int>& replicas);
  /// Under CostModelOptions::overlap_gradient_sync: the longest plain compute step among the GPU's steps from
  /// `first` on, a micro-batch's (or pass's) work of which `backward_share` is backward, becomes the GPU's backward
  /// site (the last one noted wins) and, the first time, its forward site.
  void note_sync_sites(int gpu, std::size_t first, double backward_share);
  /// Of CP rank j's compute in the flat micro-batch being built (scratch_.costs), the backward's share.
  double backward_share(const Replica& rep, const FlatLayers& f, int j) const;
  /// Of the gradient sync's calls over `group` (the reduce, then the all-gather under ZeRO 1-3), the parts that run
  /// beside the members' sites (CostModel::gradient_sync_hidden_seconds), as collectives set on the site steps;
  /// what stays exposed of each, as a share of its call (1: nothing hides).
  std::array<double, 2> hide_gradient_sync(const SliceGroup& group, const std::vector<CollectiveCall>& calls);

  /// rows x cols of `fill`, keeping the rows' memory.
  static void resize_grid(std::vector<std::vector<int>>& grid, std::size_t rows, std::size_t cols, int fill) {
    grid.resize(rows);
    for (auto& row : grid) row.assign(cols, fill);
  }

  /// add_flat_replica's per micro-batch state (see there).
  struct FlatScratch {
    MicroBatchWork work;
    ShareIds ids;
    std::vector<std::vector<int>> cp_index;
    std::vector<std::vector<std::vector<RingStep>>> ring;
    std::vector<TpCollectives> tp_index;
    MicroBatchCosts costs;
  };

  const IterationPlan& plan_;
  const CostModel& cost_;
  const ProgramOptions& options_;
  const bool ring_attention_;
  IterationProgram program_;
  std::vector<int> stand_ins_;  ///< replica_stand_ins under ProgramOptions::fold_replicas, else empty
  FlatScratch scratch_;
  std::vector<RingStep> rank_ring_;  ///< rank_ring's result under a per-sequence split
  /// A compute step a gradient-sync collective can run beside, and the seconds of it that are backward (or forward).
  struct SyncSite {
    std::size_t step = 0;
    double beside_s = 0;
    bool set = false;
  };
  std::vector<SyncSite> backward_sites_;  ///< per GPU: in its last micro-batch (overlap_gradient_sync only)
  std::vector<SyncSite> forward_sites_;   ///< per GPU: in its first micro-batch
};

}  // namespace lcsim::program::detail
