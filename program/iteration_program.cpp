#include "program/iteration_program.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "base/check.hpp"
#include "base/errors.hpp"
#include "model/plan_demand.hpp"

namespace lcsim::program {

const char* to_string(WorkKind kind) {
  switch (kind) {
    case WorkKind::Compute:
      return "compute";
    case WorkKind::ComputeLocal:
      return "compute local";
    case WorkKind::ComputeDist:
      return "compute distributed";
    case WorkKind::Forward:
      return "forward";
    case WorkKind::Backward:
      return "backward";
    case WorkKind::CpAllToAll:
      return "CP all-to-all";
    case WorkKind::TpCollective:
      return "TP all-gather/reduce-scatter";
    case WorkKind::GradReduceScatter:
      return "gradient reduce-scatter";
    case WorkKind::GradAllGather:
      return "parameter all-gather";
    case WorkKind::GradAllReduce:
      return "gradient all-reduce";
    case WorkKind::Optimizer:
      return "optimizer step";
    case WorkKind::Switch:
      return "strategy switch";
    case WorkKind::PpActivation:
      return "pipeline activations";
    case WorkKind::PpGradient:
      return "pipeline gradients";
    case WorkKind::PhaseBarrier:
      return "phase barrier";
    case WorkKind::CpRing:
      return "CP ring";
  }
  return "unknown";
}

const char* to_string(ComputeWork::Pass pass) {
  switch (pass) {
    case ComputeWork::Pass::ForwardBackward:
      return "forward+backward";
    case ComputeWork::Pass::Forward:
      return "forward";
    case ComputeWork::Pass::Backward:
      return "backward";
    case ComputeWork::Pass::Optimizer:
      return "optimizer";
    case ComputeWork::Pass::Switch:
      return "switch";
  }
  return "unknown";
}

bool is_communication(WorkKind kind) {
  switch (kind) {
    case WorkKind::CpAllToAll:
    case WorkKind::TpCollective:
    case WorkKind::GradReduceScatter:
    case WorkKind::GradAllGather:
    case WorkKind::GradAllReduce:
    case WorkKind::PpActivation:
    case WorkKind::PpGradient:
    case WorkKind::PhaseBarrier:
    case WorkKind::CpRing:
      return true;
    default:
      return false;
  }
}

namespace {

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
void split_ids(const Replica& replica, const MicroBatch& micro_batch, bool describe, ShareIds& ids) {
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
std::vector<Block> make_blocks(const CostModel& cost, const ParallelScheme& scheme, LayerSpan stage, int per_block) {
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
    if (scheme.pp > 1) {
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
std::vector<T> concat(const std::vector<T>& a, const std::vector<T>& b);

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
std::vector<T> concat(const std::vector<T>& a, const std::vector<T>& b) {
  std::vector<T> all(a);
  all.insert(all.end(), b.begin(), b.end());
  return all;
}

CollectiveTime halve(CollectiveTime t) {
  return {t.latency_s / 2, t.transfer_s / 2};
}
std::vector<CollectiveCall> halve(std::vector<CollectiveCall> calls) {
  for (auto& call : calls) call.count /= 2;
  return calls;
}

/// The CP group of TP rank t on a stage, and the TP group of CP rank j.
std::vector<int> group_over_cp(const Replica& rep, int stage, int t) {
  std::vector<int> gpus;
  for (int j = 0; j < rep.scheme.cp; ++j) gpus.push_back(rep.gpu(stage, j, t));
  return gpus;
}
std::vector<int> group_over_tp(const Replica& rep, int stage, int j) {
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

std::vector<SliceGroup> slice_groups(const IterationPlan& plan, const std::vector<int>& phase_replicas) {
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
ModelSlice slice_of(const ParallelScheme& scheme, int index) {
  return {scheme.tp, scheme.pp, index / (scheme.cp * scheme.tp), index % scheme.tp};
}

std::map<int, std::vector<int>> replicas_by_phase(const IterationPlan& plan) {
  std::map<int, std::vector<int>> phases;  // increasing phase order
  for (std::size_t r = 0; r < plan.replicas.size(); ++r) phases[plan.replicas[r].phase].push_back(static_cast<int>(r));
  return phases;
}

[[noreturn]] void plan_error(const IterationPlan& plan, std::size_t replica, const std::string& what) {
  throw PlanningError("iteration plan " + std::to_string(plan.index) + ", replica " + std::to_string(replica) + ": " +
                      what);
}

/// The shape and GPUs of every replica. Placements are checked as the builder reads each micro-batch
/// (check_placements), so that building reads a plan once: at a thousand GPUs a plan is rarely in cache.
void check_replicas(const IterationPlan& plan, const CostModel& cost) {
  const int world = cost.cluster().world_size();
  for (std::size_t r = 0; r < plan.replicas.size(); ++r) {
    const auto& replica = plan.replicas[r];
    const auto& s = replica.scheme;
    if (s.tp < 1 || s.pp < 1 || s.cp < 1 || s.checkpointed_layers < 0 || cost.model().layers % s.pp != 0 ||
        replica.gpus.size() != static_cast<std::size_t>(s.gpus()))
      plan_error(plan, r, "malformed parallel scheme or GPU list");
    for (int g : replica.gpus)
      if (g < 0 || g >= world) plan_error(plan, r, "GPU index " + std::to_string(g) + " outside the cluster");
  }
}

void check_placements(const IterationPlan& plan, std::size_t r, const MicroBatch& micro_batch) {
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
        ring_attention_(cost.options().cp_attention == CpAttention::Ring),
        program_(std::move(storage)) {
    for (auto& steps : program_.gpus) steps.clear();  // keeps their capacity
    program_.gpus.resize(static_cast<std::size_t>(cost.cluster().world_size()));
    program_.collectives.clear();
    program_.transfers.clear();
    program_.works.clear();
  }

  IterationProgram build() {
    bool first = true;
    const std::map<int, std::vector<int>> phases = replicas_by_phase(plan_);
    std::vector<ModelSlice> held(program_.gpus.size());
    for (const auto& [phase, replicas] : phases) {
      double switch_s = 0;
      double switch_params = 0;
      // A strategy switch moves parameters only when some GPU is to hold another slice of the model: groups that
      // change their CP degree alone (FlexSP) keep every GPU's parameters and ZeRO shards where they are.
      bool moves = false;
      for (int r : replicas) {
        const Replica& rep = replica(r);
        for (std::size_t i = 0; i < rep.gpus.size(); ++i) {
          const ModelSlice slice = slice_of(rep.scheme, static_cast<int>(i));
          ModelSlice& h = held[static_cast<std::size_t>(rep.gpus[i])];
          moves = moves || h != slice;
          h = slice;
        }
      }
      if (!first) {
        add_phase_barrier();
        for (int r : moves ? replicas : std::vector<int>{}) {
          const double s = cost_.switch_seconds(replica(r).scheme);
          if (s > switch_s) switch_params = cost_.parameters_per_gpu(replica(r).scheme);
          switch_s = std::max(switch_s, s);
        }
      }
      first = false;
      for (int r : replicas) {
        const Replica& rep = replica(r);
        // Stages differ when part of the model is frozen; GPUs are stage-major in the replica (Replica::gpu).
        std::vector<double> static_bytes;
        for (int stage = 0; stage < rep.scheme.pp; ++stage)
          static_bytes.push_back(cost_.static_bytes(rep.scheme, shard_degree(cost_, rep.scheme), stage));
        const std::size_t per_stage = rep.gpus.size() / static_cast<std::size_t>(rep.scheme.pp);
        for (std::size_t i = 0; i < rep.gpus.size(); ++i) {
          const int g = rep.gpus[i];
          Step set{.type = Step::Type::SetStatic, .kind = WorkKind::Compute};
          set.bytes = static_bytes[i / per_stage];
          push(g, set);
          if (switch_s > 0) {
            push(g, compute(WorkKind::Switch, switch_s, r, -1,
                            add_work(parameter_work(ComputeWork::Pass::Switch, switch_params))));
          }
        }
        if (rep.scheme.pp == 1)
          add_flat_replica(r);
        else
          add_pipelined_replica(r);
      }
      // One gradient sync and optimizer step per iteration, after the last phase (earlier phases accumulate).
      if (phase == phases.rbegin()->first) add_gradient_sync(replicas);
    }
    return std::move(program_);
  }

 private:
  const Replica& replica(int r) const { return plan_.replicas[static_cast<std::size_t>(r)]; }
  void push(int gpu, const Step& step) { program_.gpus[static_cast<std::size_t>(gpu)].push_back(step); }
  std::size_t step_count(int gpu) const { return program_.gpus[static_cast<std::size_t>(gpu)].size(); }
  Step& step_at(int gpu, std::size_t i) { return program_.gpus[static_cast<std::size_t>(gpu)][i]; }

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
  int add_work(ComputeWork work) {
    if (!options_.describe_work) return -1;
    program_.works.push_back(std::move(work));
    return static_cast<int>(program_.works.size()) - 1;
  }
  /// The work of `shares` over one block (or one pass of it); -1 when there are no shares.
  int add_work(ComputeWork::Pass pass, const Shares& shares, const Ids& ids, const ParallelScheme& s, const Block& b,
               bool head_stage) {
    if (shares.empty() || !options_.describe_work) return -1;
    return add_work(ComputeWork{.pass = pass,
                                .shares = shares,
                                .sequence_ids = ids,
                                .tp = s.tp,
                                .layers = b.layers(),
                                .checkpointed_layers = b.checkpointed(),
                                .recompute = s.recompute,
                                .lm_head = head_stage && b.last});
  }
  /// The work of one rank's local shares and the distributed ones together (no overlap), concatenated only when
  /// work is described.
  int add_work(ComputeWork::Pass pass, const Shares& local, const Ids& local_ids, const Shares& dist,
               const Ids& dist_ids, const ParallelScheme& s, const Block& b, bool head_stage) {
    if (!options_.describe_work) return -1;
    return add_work(pass, concat(local, dist), concat(local_ids, dist_ids), s, b, head_stage);
  }
  static Step join(int collective, WorkKind kind, int replica, int micro_batch) {
    return Step{.type = Step::Type::Collective,
                .kind = kind,
                .index = collective,
                .replica = replica,
                .micro_batch = micro_batch};
  }

  int add_collective(std::vector<int> gpus, LinkClass link, CollectiveTime time, WorkKind kind,
                     std::vector<CollectiveCall> calls, double flow_scale = 1.0) {
    program_.collectives.push_back({std::move(gpus), link, time, kind, std::move(calls), flow_scale});
    return static_cast<int>(program_.collectives.size()) - 1;
  }

  /// A collective of the cost model's calls over `gpus`, timed on the path the topology gives the group.
  int add_calls(std::vector<int> gpus, const std::vector<CollectiveCall>& calls, WorkKind kind, bool half = false) {
    const Topology topology = cost_.cluster().topology();
    const LinkClass link = topology.link_class(gpus);
    const CollectiveTime time = cost_.collective_time(calls, gpus);
    // Only a fabric below the members' links slows their flows' bytes (a spread ring moves each NIC's share).
    double flow_scale = 1.0;
    if (link == LinkClass::InfiniBand && !calls.empty() && topology.kind().uplink_share() < 1.0)
      flow_scale = std::min(1.0, topology.collective_path(calls.front().op, gpus).bandwidth_scale);
    std::vector<CollectiveCall> described;  // the calls are for the live executor only
    if (options_.describe_work) described = half ? halve(calls) : calls;
    return add_collective(std::move(gpus), link, half ? halve(time) : time, kind, std::move(described), flow_scale);
  }

  void add_phase_barrier() {
    std::vector<int> all(program_.gpus.size());
    for (std::size_t g = 0; g < all.size(); ++g) all[g] = static_cast<int>(g);
    const int c = add_collective(std::move(all), LinkClass::InfiniBand, {}, WorkKind::PhaseBarrier, {});
    for (std::size_t g = 0; g < program_.gpus.size(); ++g)
      push(static_cast<int>(g), join(c, WorkKind::PhaseBarrier, -1, -1));
  }

  /// Seconds and work of one list of shares over one block (or one pass of it).
  struct BlockWork {
    double seconds = 0;
    int work = -1;
  };

  /// The compute and CP steps of one block (or one pass of it) for one GPU.
  void add_block_compute(int gpu, bool overlap, BlockWork local, BlockWork dist, BlockWork all, int cp_collective,
                         int layers, WorkKind kind, int r, int m) {
    if (overlap) {
      if (cp_collective >= 0) {
        Step s = join(cp_collective, WorkKind::CpAllToAll, r, m);
        if (local.seconds > 0) {  // the step's kind names its compute part; the collective's names the communication
          s.type = Step::Type::ComputeWithCollective;
          s.kind = kind == WorkKind::Compute ? WorkKind::ComputeLocal : kind;
          s.seconds = local.seconds;
          s.lead_s = local.seconds / layers;
          s.work = local.work;
        }
        push(gpu, s);
      } else if (local.seconds > 0) {
        push(gpu, compute(kind == WorkKind::Compute ? WorkKind::ComputeLocal : kind, local.seconds, r, m, local.work));
      }
      if (dist.seconds > 0)
        push(gpu, compute(kind == WorkKind::Compute ? WorkKind::ComputeDist : kind, dist.seconds, r, m, dist.work));
    } else {
      if (all.seconds > 0) push(gpu, compute(kind, all.seconds, r, m, all.work));
      if (cp_collective >= 0) push(gpu, join(cp_collective, WorkKind::CpAllToAll, r, m));
    }
  }

  /// One ring exchange of a block: its collective, the attention beside it and what it leaves exposed alone.
  struct RingStep {
    int collective = -1;
    double beside_s = 0;
    double exposed_s = 0;
    CpExchange::Pass pass = CpExchange::Pass::Forward;
  };

  /// The ring exchanges of one block of `work` over the CP group of TP rank t on a stage, one collective each.
  std::vector<RingStep> add_ring(const Replica& rep, int stage, int t, const MicroBatchWork& work, const Block& b) {
    std::vector<int> group = group_over_cp(rep, stage, t);
    std::vector<RingStep> steps;
    for (const CpExchange& e :
         cost_.cp_exchanges(work.dist, work.sharded_per_gpu, rep.scheme, b.span, b.checkpointed()))
      steps.push_back(
          {add_calls(group, e.calls, WorkKind::CpRing), e.beside_s, cost_.exposed_seconds(e, group), e.pass});
    return steps;
  }

  /// `ring` as CP rank j runs it: under a per-sequence split the ranks' attention differs, so each runs its own
  /// blocks beside the shared transfers (the exchange then waits for the busiest); `which`: every exchange (0),
  /// the forward ones (1) or the backward ones (2), as `ring` holds them.
  /// The result is `shared` itself or a member scratch, valid until the next call.
  const std::vector<RingStep>& rank_ring(const std::vector<RingStep>& shared, const Replica& rep,
                                         const MicroBatchWork& work, int j, const Block& b, int which) {
    if (work.dist_ranks.empty() || shared.empty()) return shared;
    std::vector<RingStep>& ring = rank_ring_;
    ring = shared;
    std::vector<CpExchange> mine =
        cost_.cp_exchanges(work.rank_dist(j), work.sharded_per_gpu, rep.scheme, b.span, b.checkpointed());
    std::erase_if(mine, [&](const CpExchange& e) {
      return which == 1 ? e.pass != CpExchange::Pass::Forward : which == 2 && e.pass == CpExchange::Pass::Forward;
    });
    for (std::size_t e = 0; e < ring.size(); ++e) {
      const double beside = e < mine.size() ? mine[e].beside_s : 0.0;
      ring[e].beside_s = beside;
      ring[e].exposed_s =
          std::max(0.0, program_.collectives[static_cast<std::size_t>(ring[e].collective)].time.seconds() - beside);
    }
    return ring;
  }

  /// The compute and ring steps of one block (or one pass of it) for one GPU (header comment); `ring` not empty.
  /// The compute that does not run beside the ring is never empty (it holds the GEMMs and the attention blocks
  /// no transfer overlaps), so it carries the work descriptor; with overlap the local descriptor goes with the
  /// first ring step that computes any local work.
  void add_block_ring(int gpu, bool overlap, BlockWork local, BlockWork dist, BlockWork all,
                      const std::vector<RingStep>& ring, WorkKind kind, int r, int m) {
    double beside = 0;
    for (const RingStep& step : ring) beside += step.beside_s;
    const WorkKind compute_kind = overlap && kind == WorkKind::Compute ? WorkKind::ComputeDist : kind;
    const BlockWork rest = overlap ? dist : all;
    push(gpu, compute(compute_kind, rest.seconds - beside, r, m, rest.work));
    double local_left = overlap ? local.seconds : 0.0;
    int local_work = overlap ? local.work : -1;
    for (std::size_t e = 0; e < ring.size(); ++e) {
      const double dealt = e + 1 == ring.size() ? local_left : std::min(local_left, ring[e].exposed_s);
      local_left -= dealt;
      Step step = join(ring[e].collective, WorkKind::CpRing, r, m);
      if (ring[e].beside_s + dealt > 0) {  // the step's kind names its compute part, the collective's the transfers
        step.type = Step::Type::ComputeWithCollective;
        step.kind = compute_kind;
        step.seconds = ring[e].beside_s + dealt;
        if (dealt > 0) step.work = std::exchange(local_work, -1);
      }
      push(gpu, step);
    }
  }

  /// A flat replica's layers as blocks, and what they hold per token.
  struct FlatLayers {
    LayerSpan layers;
    std::vector<Block> blocks;
    double bytes_per_token = 0;
    LayerMix mix;
  };

  void add_flat_replica(int r) {
    const Replica& rep = replica(r);
    const ParallelScheme& s = rep.scheme;
    FlatLayers f;
    f.layers = stage_span(cost_.model(), 1, 0);
    f.blocks = make_blocks(cost_, s, f.layers, options_.layers_per_block);
    f.bytes_per_token = cost_.activation_bytes_per_token(s, f.layers, true);
    f.mix = cost_.layer_mix(s, f.layers);
    for (std::size_t mi = 0; mi < rep.micro_batches.size(); ++mi) {
      add_flat_micro_batch(r, f, mi);
      if (options_.after_flat_micro_batch) options_.after_flat_micro_batch(program_, rep.gpus);
    }
  }

  // A micro-batch's state lives in scratch_, reused: a replica's micro-batches are the program's bulk (131,072 an
  // iteration for DeepSpeed at 16,384 GPUs), and fresh vectors for each were a third of the build's time.
  void add_flat_micro_batch(int r, const FlatLayers& f, std::size_t mi) {
    const Replica& rep = replica(r);
    const ParallelScheme& s = rep.scheme;
    MicroBatchWork& work = scratch_.work;
    check_placements(plan_, static_cast<std::size_t>(r), rep.micro_batches[mi]);
    split_work(rep, rep.micro_batches[mi], work);
    split_ids(rep, rep.micro_batches[mi], options_.describe_work, scratch_.ids);
    const bool sharded = s.cp > 1 && work.sharded_tokens > 0;
    const double sharded_bytes = sharded ? cost_.sharded_attention_bytes(work.dist, s, f.layers) : 0;
    add_flat_cp_collectives(rep, f.blocks, sharded);
    scratch_.costs.assign(cost_, work, s, f.mix, rep.overlap_cp_comm, true);
    for (int j = 0; j < s.cp; ++j) add_flat_cp_rank(r, f, static_cast<int>(mi), j, sharded_bytes);
  }

  /// scratch_.cp_index[block][tp rank]: the block's all-to-all among the CP ranks of that TP rank;
  /// scratch_.ring[block][tp rank] its ring exchanges instead, with ring attention.
  void add_flat_cp_collectives(const Replica& rep, const std::vector<Block>& blocks, bool sharded) {
    const ParallelScheme& s = rep.scheme;
    auto& cp_index = scratch_.cp_index;
    auto& ring = scratch_.ring;
    resize_grid(cp_index, blocks.size(), static_cast<std::size_t>(s.tp), -1);
    ring.resize(blocks.size());
    for (auto& per_tp : ring) {
      per_tp.resize(static_cast<std::size_t>(s.tp));
      for (auto& steps : per_tp) steps.clear();
    }
    if (!sharded) return;
    const MicroBatchWork& work = scratch_.work;
    for (std::size_t b = 0; b < blocks.size(); ++b)
      for (int t = 0; t < s.tp; ++t) {
        const auto tt = static_cast<std::size_t>(t);
        if (ring_attention_)
          ring[b][tt] = add_ring(rep, 0, t, work, blocks[b]);
        else
          cp_index[b][tt] =
              add_calls(group_over_cp(rep, 0, t), cost_.ulysses_calls(work.sharded_per_gpu, s.cp, blocks[b].span),
                        WorkKind::CpAllToAll);
      }
  }

  /// The GPUs of CP rank j (one per TP rank) for micro-batch m: each block's TP collective, compute and CP
  /// exchange, then the activations they hold.
  void add_flat_cp_rank(int r, const FlatLayers& f, int m, int j, double sharded_bytes) {
    const Replica& rep = replica(r);
    const ParallelScheme& s = rep.scheme;
    const MicroBatchWork& work = scratch_.work;
    const auto jj = static_cast<std::size_t>(j);
    if (work.local[jj].empty() && work.dist.empty()) return;
    const Tokens tokens = work.gpu_tokens(j);
    auto& tp_index = scratch_.tp_index;
    tp_index.assign(f.blocks.size(), -1);
    if (s.tp > 1 && tokens > 0)
      for (std::size_t b = 0; b < f.blocks.size(); ++b)
        tp_index[b] = add_calls(group_over_tp(rep, 0, j), cost_.tp_comm_calls(tokens, s.tp, f.blocks[b].span),
                                WorkKind::TpCollective);
    for (int t = 0; t < s.tp; ++t) {
      const int g = rep.gpu(0, j, t);
      const std::size_t first = step_count(g);
      for (std::size_t b = 0; b < f.blocks.size(); ++b) add_flat_block(r, m, j, t, g, f.blocks[b], b);
      mark_in_flight(g, first, f.bytes_per_token * static_cast<double>(tokens) + sharded_bytes);
    }
  }

  /// Block b of micro-batch m on GPU g (CP rank j, TP rank t), forward and backward together.
  void add_flat_block(int r, int m, int j, int t, int g, const Block& block, std::size_t b) {
    const Replica& rep = replica(r);
    const ParallelScheme& s = rep.scheme;
    const MicroBatchWork& work = scratch_.work;
    const ShareIds& ids = scratch_.ids;
    const auto jj = static_cast<std::size_t>(j);
    if (scratch_.tp_index[b] >= 0) push(g, join(scratch_.tp_index[b], WorkKind::TpCollective, r, m));
    constexpr auto kPass = ComputeWork::Pass::ForwardBackward;
    const Shares& local_shares = work.local[jj];
    const Ids& local_ids = ids.local[jj];
    const BlockWork local_work{scratch_.costs.local[jj].block(block),
                               rep.overlap_cp_comm ? add_work(kPass, local_shares, local_ids, s, block, true) : -1};
    const Shares& dist_shares = work.rank_dist(j);
    const Ids& dist_ids = ids.rank_dist(j);
    const BlockWork dist_work{scratch_.costs.rank_dist(jj).block(block),
                              rep.overlap_cp_comm ? add_work(kPass, dist_shares, dist_ids, s, block, true) : -1};
    const BlockWork all_work{
        scratch_.costs.all[jj].block(block),
        rep.overlap_cp_comm ? -1 : add_work(kPass, local_shares, local_ids, dist_shares, dist_ids, s, block, true)};
    const auto tt = static_cast<std::size_t>(t);
    const auto& ring_steps = rank_ring(scratch_.ring[b][tt], rep, work, j, block, 0);
    if (!ring_steps.empty())
      add_block_ring(g, rep.overlap_cp_comm, local_work, dist_work, all_work, ring_steps, WorkKind::Compute, r, m);
    else
      add_block_compute(g, rep.overlap_cp_comm, local_work, dist_work, all_work, scratch_.cp_index[b][tt],
                        block.layers(), WorkKind::Compute, r, m);
  }

  /// Activations held from the first step of [first, end) to the end of the last one.
  void mark_in_flight(int gpu, std::size_t first, double bytes) {
    if (step_count(gpu) == first) return;
    step_at(gpu, first).alloc_bytes += bytes;
    step_at(gpu, step_count(gpu) - 1).free_bytes += bytes;
  }

  /// Collectives of one micro-batch on one stage, forward and backward pass.
  struct PassCollectives {
    std::vector<std::vector<int>> cp_fwd, cp_bwd;                        // [block][tp rank]
    std::vector<std::vector<std::vector<RingStep>>> ring_fwd, ring_bwd;  // [block][tp rank], ring attention
    std::vector<std::vector<int>> tp_fwd, tp_bwd;                        // [cp rank][block]
  };
  /// Pipeline transfers of a replica: [micro-batch][boundary][j * tp + t] (stage b -> b + 1 for activations,
  /// b + 1 -> b for gradients); -1 where CP rank j holds nothing.
  struct PipelineTransfers {
    std::vector<std::vector<std::vector<int>>> act, grad;
  };
  /// What the steps of one pipeline stage are built from.
  struct StageContext {
    int r = 0;
    int stage = 0;
    bool head = false;  ///< the last stage, with the LM head
    double bytes_per_token = 0;
    const std::vector<double>& sharded_bytes;  ///< per micro-batch: its shards' copies (CostModel), on every rank
    const std::vector<Block>& blocks;
    const std::vector<MicroBatchWork>& works;
    const std::vector<ShareIds>& ids;
    const std::vector<MicroBatchCosts>& costs;
    const std::vector<PassCollectives>& passes;
    const PipelineTransfers& transfers;
  };

  /// Whether activation gradients cross the boundary between stage `boundary` and the next: not when the lower
  /// stage ends in a no_grad layer (then nothing before it trains either).
  bool gradient_crosses(const ParallelScheme& s, int boundary) const {
    return cost_.layer_grad(stage_span(cost_.model(), s.pp, boundary).end() - 1) != LayerGrad::None;
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
    std::vector<int> tp_index;
    MicroBatchCosts costs;
  };

  const IterationPlan& plan_;
  const CostModel& cost_;
  const ProgramOptions& options_;
  const bool ring_attention_;
  IterationProgram program_;
  FlatScratch scratch_;
  std::vector<RingStep> rank_ring_;  ///< rank_ring's result under a per-sequence split
};

/// The 1F1B order of a stage: min(pp - 1 - stage, M) warm-up forwards, then one forward and one backward
/// alternately, then the remaining backwards; (micro-batch, forward?) pairs.
std::vector<std::pair<std::size_t, bool>> one_f_one_b(int pp, int stage, std::size_t micro_batches) {
  const std::size_t warmup = std::min(static_cast<std::size_t>(pp - 1 - stage), micro_batches);
  std::vector<std::pair<std::size_t, bool>> order;
  for (std::size_t m = 0; m < warmup; ++m) order.emplace_back(m, true);
  for (std::size_t k = 0; k + warmup < micro_batches; ++k) {
    order.emplace_back(warmup + k, true);
    order.emplace_back(k, false);
  }
  for (std::size_t m = micro_batches - warmup; m < micro_batches; ++m) order.emplace_back(m, false);
  return order;
}

void Builder::add_pipelined_replica(int r) {
  const Replica& rep = replica(r);
  const ParallelScheme& s = rep.scheme;
  std::vector<MicroBatchWork> works;
  std::vector<ShareIds> ids;
  for (const auto& mb : rep.micro_batches) {
    check_placements(plan_, static_cast<std::size_t>(r), mb);
    works.push_back(split_work(rep, mb));
    ids.push_back(share_ids(rep, mb));
  }
  const PipelineTransfers transfers = add_pipeline_transfers(rep, works);
  for (int stage = 0; stage < s.pp; ++stage) {
    const bool head = stage == s.pp - 1;
    const LayerSpan layers = stage_span(cost_.model(), s.pp, stage);
    const std::vector<Block> blocks = make_blocks(cost_, s, layers, options_.layers_per_block);
    const LayerMix mix = cost_.layer_mix(s, layers);
    std::vector<PassCollectives> passes;
    std::vector<MicroBatchCosts> costs;
    std::vector<double> sharded_bytes;
    for (const MicroBatchWork& work : works) {
      sharded_bytes.push_back(cost_.sharded_attention_bytes(work.dist, s, layers));
      passes.push_back(add_pass_collectives(rep, stage, work, blocks));
      costs.emplace_back(cost_, work, s, mix, rep.overlap_cp_comm, head);
    }
    const StageContext context{
        r,     stage,  head,     cost_.activation_bytes_per_token(s, layers, head), sharded_bytes, blocks, works, ids,
        costs, passes, transfers};
    const auto order = one_f_one_b(s.pp, stage, works.size());
    for (int j = 0; j < s.cp; ++j)
      for (int t = 0; t < s.tp; ++t) {
        std::vector<std::size_t> first_step(works.size(), 0);
        for (const auto& [m, forward] : order) add_pipeline_pass(context, j, t, m, forward, first_step[m]);
      }
  }
}

Builder::PipelineTransfers Builder::add_pipeline_transfers(const Replica& rep,
                                                           const std::vector<MicroBatchWork>& works) {
  const ParallelScheme& s = rep.scheme;
  const auto ranks = static_cast<std::size_t>(s.cp * s.tp);
  PipelineTransfers out;
  out.act.assign(works.size(),
                 std::vector<std::vector<int>>(static_cast<std::size_t>(s.pp - 1), std::vector<int>(ranks, -1)));
  out.grad = out.act;
  for (std::size_t m = 0; m < works.size(); ++m)
    for (int b = 0; b + 1 < s.pp; ++b)
      for (int j = 0; j < s.cp; ++j) {
        const Tokens tokens = works[m].gpu_tokens(j);
        if (tokens == 0) continue;
        const std::vector<CollectiveCall> calls = cost_.pp_transfer_calls(tokens, s.tp);
        double bytes = 0;
        for (const CollectiveCall& call : calls) bytes += call.bytes * call.count;
        for (int t = 0; t < s.tp; ++t) {
          const int lower = rep.gpu(b, j, t);
          const int upper = rep.gpu(b + 1, j, t);
          const int pair[] = {lower, upper};
          const LinkClass link = cost_.cluster().topology().link_class(pair);
          const CollectiveTime time = cost_.collective_time(calls, link);
          const auto k = static_cast<std::size_t>(j * s.tp + t);
          program_.transfers.push_back({lower, upper, link, time, WorkKind::PpActivation, bytes});
          out.act[m][static_cast<std::size_t>(b)][k] = static_cast<int>(program_.transfers.size()) - 1;
          if (!gradient_crosses(s, b)) continue;
          program_.transfers.push_back({upper, lower, link, time, WorkKind::PpGradient, bytes});
          out.grad[m][static_cast<std::size_t>(b)][k] = static_cast<int>(program_.transfers.size()) - 1;
        }
      }
  return out;
}

Builder::PassCollectives Builder::add_pass_collectives(const Replica& rep, int stage, const MicroBatchWork& work,
                                                       const std::vector<Block>& blocks) {
  const ParallelScheme& s = rep.scheme;
  const auto tp = static_cast<std::size_t>(s.tp);
  PassCollectives pc;
  pc.cp_fwd.assign(blocks.size(), std::vector<int>(tp, -1));
  pc.cp_bwd = pc.cp_fwd;
  pc.ring_fwd.assign(blocks.size(), std::vector<std::vector<RingStep>>(tp));
  pc.ring_bwd = pc.ring_fwd;
  if (s.cp > 1 && work.sharded_tokens > 0)
    for (std::size_t b = 0; b < blocks.size(); ++b)
      for (int t = 0; t < s.tp; ++t) {
        const auto tt = static_cast<std::size_t>(t);
        if (ring_attention_) {
          for (const RingStep& step : add_ring(rep, stage, t, work, blocks[b]))
            (step.pass == CpExchange::Pass::Forward ? pc.ring_fwd : pc.ring_bwd)[b][tt].push_back(step);
          continue;
        }
        // Half the calls run in each pass; a block without backward runs them all in its forward.
        const auto calls = cost_.ulysses_calls(work.sharded_per_gpu, s.cp, blocks[b].span);
        const bool backward = blocks[b].backward();
        pc.cp_fwd[b][tt] = add_calls(group_over_cp(rep, stage, t), calls, WorkKind::CpAllToAll, backward);
        if (backward) pc.cp_bwd[b][tt] = add_calls(group_over_cp(rep, stage, t), calls, WorkKind::CpAllToAll, true);
      }
  pc.tp_fwd.assign(static_cast<std::size_t>(s.cp), std::vector<int>(blocks.size(), -1));
  pc.tp_bwd = pc.tp_fwd;
  for (int j = 0; j < s.cp; ++j) {
    const Tokens tokens = work.gpu_tokens(j);
    if (s.tp == 1 || tokens == 0) continue;
    const auto jj = static_cast<std::size_t>(j);
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      const auto calls = cost_.tp_comm_calls(tokens, s.tp, blocks[b].span);
      const bool backward = blocks[b].backward();
      pc.tp_fwd[jj][b] = add_calls(group_over_tp(rep, stage, j), calls, WorkKind::TpCollective, backward);
      if (backward) pc.tp_bwd[jj][b] = add_calls(group_over_tp(rep, stage, j), calls, WorkKind::TpCollective, true);
    }
  }
  return pc;
}

void Builder::add_pipeline_pass(const StageContext& c, int j, int t, std::size_t m, bool forward,
                                std::size_t& first_step) {
  const Replica& rep = replica(c.r);
  const ParallelScheme& s = rep.scheme;
  const auto jj = static_cast<std::size_t>(j);
  const auto tt = static_cast<std::size_t>(t);
  const MicroBatchWork& work = c.works[m];
  const Shares& local_shares = work.local[jj];
  if (local_shares.empty() && work.dist.empty()) return;
  const int g = rep.gpu(c.stage, j, t);
  const int mi = static_cast<int>(m);
  const auto k = static_cast<std::size_t>(j * s.tp + t);
  const auto transfer = [&](Step::Type type, bool activations, int boundary) {
    const auto& table = activations ? c.transfers.act : c.transfers.grad;
    push(g, Step{.type = type,
                 .kind = activations ? WorkKind::PpActivation : WorkKind::PpGradient,
                 .index = table[m][static_cast<std::size_t>(boundary)][k],
                 .replica = c.r,
                 .micro_batch = mi});
  };
  // The works of one block and pass: local, distributed, or (without overlap) both together.
  const ShareCost& local = c.costs[m].local[jj];
  const ShareCost& dist = c.costs[m].rank_dist(jj);
  const ShareCost& all = c.costs[m].all[jj];
  const Ids& local_ids = c.ids[m].local[jj];
  const Shares& dist_shares = work.rank_dist(j);
  const Ids& dist_ids = c.ids[m].rank_dist(j);
  const bool overlap = rep.overlap_cp_comm;
  const auto pass = forward ? ComputeWork::Pass::Forward : ComputeWork::Pass::Backward;
  const auto add_block = [&](std::size_t b) {
    const Block& block = c.blocks[b];
    const PassCollectives& pc = c.passes[m];
    const int tp_collective = (forward ? pc.tp_fwd : pc.tp_bwd)[jj][b];
    if (tp_collective >= 0) push(g, join(tp_collective, WorkKind::TpCollective, c.r, mi));
    const BlockWork local_work{forward ? local.block_forward(block) : local.block_backward(block),
                               overlap ? add_work(pass, local_shares, local_ids, s, block, c.head) : -1};
    const BlockWork dist_work{forward ? dist.block_forward(block) : dist.block_backward(block),
                              overlap ? add_work(pass, dist_shares, dist_ids, s, block, c.head) : -1};
    const BlockWork all_work{
        forward ? all.block_forward(block) : all.block_backward(block),
        overlap ? -1 : add_work(pass, local_shares, local_ids, dist_shares, dist_ids, s, block, c.head)};
    const WorkKind kind = forward ? WorkKind::Forward : WorkKind::Backward;
    const auto& ring = rank_ring((forward ? pc.ring_fwd : pc.ring_bwd)[b][tt], rep, work, j, block, forward ? 1 : 2);
    if (!ring.empty())
      add_block_ring(g, overlap, local_work, dist_work, all_work, ring, kind, c.r, mi);
    else
      add_block_compute(g, overlap, local_work, dist_work, all_work, (forward ? pc.cp_fwd : pc.cp_bwd)[b][tt],
                        block.layers(), kind, c.r, mi);
  };
  const int pp = s.pp;
  if (forward) {
    if (c.stage > 0) transfer(Step::Type::Recv, true, c.stage - 1);
    first_step = step_count(g);
    for (std::size_t b = 0; b < c.blocks.size(); ++b) add_block(b);
    if (c.stage + 1 < pp) transfer(Step::Type::Send, true, c.stage);
    return;
  }
  if (c.stage + 1 < pp && gradient_crosses(s, c.stage)) transfer(Step::Type::Recv, false, c.stage);
  for (std::size_t b = c.blocks.size(); b-- > 0;) add_block(b);
  // The micro-batch's activations live from its forward's first step to its backward's last.
  const double bytes = c.bytes_per_token * static_cast<double>(work.gpu_tokens(j)) + c.sharded_bytes[m];
  step_at(g, first_step).alloc_bytes += bytes;
  step_at(g, step_count(g) - 1).free_bytes += bytes;
  if (c.stage > 0 && gradient_crosses(s, c.stage - 1)) transfer(Step::Type::Send, false, c.stage - 1);
}

void Builder::add_gradient_sync(const std::vector<int>& replicas) {
  for (const SliceGroup& group : slice_groups(plan_, replicas)) {
    const ParallelScheme& scheme = replica(group.replica).scheme;
    const int shards = shard_degree(cost_, scheme);
    const double optimizer_s = cost_.optimizer_seconds(scheme, shards, group.stage);
    // As optimizer_seconds: ZeRO 1-3 update the GPU's shard, ZeRO-0 every parameter it holds.
    const double updated =
        cost_.trained_parameters_per_gpu(scheme, group.stage) / (cost_.options().zero_stage >= 1 ? shards : 1);
    std::vector<std::pair<int, WorkKind>> syncs;
    for (const CollectiveCall& call : cost_.gradient_sync_calls(scheme, shards, group.stage)) {
      const WorkKind kind = call.op == CollectiveOp::ReduceScatter ? WorkKind::GradReduceScatter
                            : call.op == CollectiveOp::AllGather   ? WorkKind::GradAllGather
                                                                   : WorkKind::GradAllReduce;
      syncs.emplace_back(add_calls(group.gpus, {call}, kind), kind);
    }
    for (int g : group.gpus) {
      // Reduce-scatter, optimizer step on the shard, all-gather; an all-reduce comes before the step.
      for (const auto& [c, kind] : syncs)
        if (kind != WorkKind::GradAllGather) push(g, join(c, kind, -1, -1));
      if (optimizer_s > 0)
        push(g, compute(WorkKind::Optimizer, optimizer_s, -1, -1,
                        add_work(parameter_work(ComputeWork::Pass::Optimizer, updated))));
      for (const auto& [c, kind] : syncs)
        if (kind == WorkKind::GradAllGather) push(g, join(c, kind, -1, -1));
    }
  }
}

}  // namespace

IterationProgram build_program(const IterationPlan& plan, const CostModel& cost, const ProgramOptions& options,
                               IterationProgram storage) {
  check_replicas(plan, cost);
  IterationProgram program = Builder(plan, cost, options, std::move(storage)).build();
  // Every time the simulator, the estimate and the trace read comes from here: a non-finite one would abort
  // SimGrid or write "dur":inf, so it is a broken invariant (the loaders bound every physical quantity).
  for (const auto& steps : program.gpus)
    for (const Step& step : steps) LCSIM_CHECK(std::isfinite(step.seconds) && step.seconds >= 0, "a step's seconds");
  for (const auto& c : program.collectives)
    LCSIM_CHECK(std::isfinite(c.time.latency_s) && std::isfinite(c.time.transfer_s), "a collective's time");
  for (const auto& t : program.transfers)
    LCSIM_CHECK(std::isfinite(t.time.latency_s) && std::isfinite(t.time.transfer_s), "a transfer's time");
  return program;
}

std::vector<FlowGroup> flow_groups(const IterationPlan& plan, const CostModel& cost) {
  check_replicas(plan, cost);  // the groups do not depend on placements
  const WorkKind cp_kind = cost.options().cp_attention == CpAttention::Ring ? WorkKind::CpRing : WorkKind::CpAllToAll;
  std::vector<FlowGroup> groups;
  for (const auto& [phase, replicas] : replicas_by_phase(plan)) {
    for (int r : replicas) {
      const Replica& rep = plan.replicas[static_cast<std::size_t>(r)];
      const ParallelScheme& s = rep.scheme;
      for (int stage = 0; stage < s.pp; ++stage) {
        if (s.cp > 1)
          for (int t = 0; t < s.tp; ++t) groups.push_back({group_over_cp(rep, stage, t), cp_kind});
        if (s.tp > 1)
          for (int j = 0; j < s.cp; ++j) groups.push_back({group_over_tp(rep, stage, j), WorkKind::TpCollective});
        if (stage + 1 < s.pp)  // activations up, gradients back down: the same two endpoints
          for (int j = 0; j < s.cp; ++j)
            for (int t = 0; t < s.tp; ++t)
              groups.push_back({{rep.gpu(stage, j, t), rep.gpu(stage + 1, j, t)}, WorkKind::PpActivation});
      }
    }
    for (SliceGroup& group : slice_groups(plan, replicas))
      groups.push_back({std::move(group.gpus), WorkKind::GradAllReduce});
  }
  return groups;
}

}  // namespace lcsim::program
