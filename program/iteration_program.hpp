#pragma once
// An IterationPlan as what each GPU does, in order: compute of the cost model's seconds, collectives and pipeline
// transfers with the cost model's latency and transfer time, and what each compute step computes. Pure data, no
// SimGrid: the no-contention replay (program/replay.hpp, `lcsim plan`'s estimate), the SimGrid executor and live
// replay all run it. The steps of each kind of replica, pipelines and phases: docs/program.md.
#include <compare>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/cost_model.hpp"
#include "model/plan.hpp"

namespace lcsim::program {

/// What a step or span is, for timelines and busy time.
enum class WorkKind : std::uint8_t {
  Compute,       ///< a micro-batch's forward + backward (non-pipelined)
  ComputeLocal,  ///< Skrull: the CP rank's own sequences, overlapping the all-to-all
  ComputeDist,   ///< Skrull: the sharded sequences, after the all-to-all
  Forward,       ///< pipelined: forward pass
  Backward,      ///< pipelined: backward pass (with recomputation)
  CpAllToAll,    ///< Ulysses all-to-alls of a block
  TpCollective,  ///< Megatron-SP all-gathers and reduce-scatters of a block
  GradReduceScatter,
  GradAllGather,
  GradAllReduce,
  Optimizer,
  Switch,        ///< parallel-strategy switch before a phase
  PpActivation,  ///< pipeline activations, stage s -> s + 1
  PpGradient,    ///< pipeline gradients, stage s + 1 -> s
  PhaseBarrier,
  CpRing,  ///< ring attention's K,V (and dK,dV) transfers of a block, beside its attention blocks; all-gather CP's
           ///< K,V all-gathers and dK,dV reduce-scatters (NCCL runs them as rings), beside nothing
};
const char* to_string(WorkKind kind);
bool is_communication(WorkKind kind);

/// One collective instance: its members, in ring order, and the cost model's time for it.
struct CollectiveSpec {
  std::vector<int> gpus;
  LinkClass link = LinkClass::NvLink;
  CollectiveTime time;
  WorkKind kind = WorkKind::CpAllToAll;
  /// What `time` times (a pipeline pass's half: counts halved); none: barrier, or not described
  /// (ProgramOptions::describe_work).
  std::vector<CollectiveCall> calls;
  /// A member's bytes per second of transfer, relative to its link's bandwidth: below 1 where an oversubscribed
  /// fabric, not the member's own link, bounds it (Topology::collective_path), so that its flows load the fabric's
  /// links with what the transfer really moves.
  double flow_scale = 1.0;
};

/// One point-to-point transfer (pipeline activations or gradients).
struct TransferSpec {
  int from = 0;
  int to = 0;
  LinkClass link = LinkClass::NvLink;
  CollectiveTime time;
  WorkKind kind = WorkKind::PpActivation;
  double bytes = 0;  ///< what moves (the cost model's pp_transfer_calls)
};

/// What one compute step computes on its GPU, as the cost model charged it.
struct ComputeWork {
  enum class Pass : std::uint8_t {
    ForwardBackward,  ///< forward and backward of `layers` layers (+ LM head), recomputation included
    Forward,          ///< pipelined: the forward pass only
    Backward,         ///< pipelined: the backward pass (with recomputation) of the same shares
    Optimizer,        ///< the optimizer step over `parameters` parameters (this GPU's ZeRO shard)
    Switch,           ///< re-sharding `parameters` parameters into a new strategy (HotSPa)
  };
  Pass pass = Pass::ForwardBackward;
  /// The sequences (or 1/cp shards of them: Ulysses, all sequence_tokens for 1/cp of the heads) this GPU
  /// computes, in placement order; sequence_ids is parallel to it. Padded micro-batches: padded lengths.
  std::vector<SequenceShare> shares;
  std::vector<std::int64_t> sequence_ids;
  int tp = 1;
  int layers = 0;               ///< layers of this step
  int checkpointed_layers = 0;  ///< of which fully recomputed in backward (the first ones)
  Recompute recompute = Recompute::Selective;
  bool lm_head = false;
  double parameters = 0;  ///< Optimizer, Switch
  friend bool operator==(const ComputeWork&, const ComputeWork&) = default;
};
const char* to_string(ComputeWork::Pass pass);

/// Aligned to a cache line, which it fills: the simulator streams through every GPU's steps, and an unaligned step
/// would straddle two lines.
struct alignas(64) Step {
  enum class Type : std::uint8_t {
    Compute,                ///< `seconds` of compute
    Collective,             ///< join collective `index`
    ComputeWithCollective,  ///< `seconds` of compute concurrently with collective `index`
    Send,                   ///< start transfer `index` (does not wait)
    Recv,                   ///< wait for transfer `index`
    SetStatic,              ///< the GPU now holds `bytes` of parameters, gradients and optimizer states
  };
  Type type = Type::Compute;
  WorkKind kind = WorkKind::Compute;  ///< of the compute part, or of the communication
  int index = -1;
  double seconds = 0;
  int replica = -1;        ///< plan replica, or -1
  int micro_batch = -1;    ///< index in the replica, or -1
  double alloc_bytes = 0;  ///< activations the GPU starts holding when the step starts
  double free_bytes = 0;   ///< activations it releases when the step ends
  double bytes = 0;        ///< SetStatic
  /// ComputeWithCollective: how much of the compute may run before the collective starts. One layer's worth: a
  /// layer's all-to-all overlaps that layer's local compute, so a rank that arrives early gets one layer ahead.
  double lead_s = 0;
  int work = -1;  ///< Compute, ComputeWithCollective: index in IterationProgram::works
};
static_assert(sizeof(Step) == 64, "a step fills one cache line");

/// Each GPU's steps, stored once per lane: a lane is a set of GPUs that run identical steps (the CP ranks of a
/// Ulysses group: the same shares, joining the same collectives), so the builder writes its list once, and the
/// replay and the simulator run it once for all its GPUs (gpu_lanes). Read like a vector of per-GPU lists.
class GpuSteps {
 public:
  GpuSteps() = default;
  /// One list per GPU, each its own lane (a program written by hand).
  GpuSteps(std::vector<std::vector<Step>> per_gpu);  // NOLINT(google-explicit-constructor): reads as the lists
  /// `world` GPUs in lanes: lane_of[g] for each, lanes numbered from 0 in order of their first GPU.
  void assign(std::vector<int> lane_of);
  std::size_t size() const { return lane_of_.size(); }  ///< GPUs
  const std::vector<Step>& operator[](std::size_t gpu) const { return lanes_[lane(gpu)]; }
  std::size_t lane(std::size_t gpu) const { return static_cast<std::size_t>(lane_of_[gpu]); }
  std::size_t lane_count() const { return lanes_.size(); }
  /// The GPUs of a lane, increasing; the first writes its steps.
  std::span<const int> lane_gpus(std::size_t lane) const {
    return {members_.data() + first_[lane], members_.data() + first_[lane + 1]};
  }
  bool leads(std::size_t gpu) const { return lane_gpus(lane(gpu)).front() == static_cast<int>(gpu); }
  const std::vector<Step>& lane_steps(std::size_t lane) const { return lanes_[lane]; }
  std::vector<Step>& lane_steps(std::size_t lane) { return lanes_[lane]; }
  /// One lane per GPU, each with a copy of its lane's steps: for a caller that changes one GPU's steps alone.
  void unshare();

  class Iterator {  // over the GPUs' lists
   public:
    Iterator(const GpuSteps& steps, std::size_t gpu) : steps_(&steps), gpu_(gpu) {}
    const std::vector<Step>& operator*() const { return (*steps_)[gpu_]; }
    Iterator& operator++() {
      ++gpu_;
      return *this;
    }
    bool operator==(const Iterator&) const = default;

   private:
    const GpuSteps* steps_;
    std::size_t gpu_;
  };
  Iterator begin() const { return {*this, 0}; }
  Iterator end() const { return {*this, size()}; }

 private:
  std::vector<std::vector<Step>> lanes_;  // their capacity is kept across assign()
  std::vector<int> lane_of_;
  std::vector<int> members_;        // the lanes' GPUs, lane after lane
  std::vector<std::size_t> first_;  // where each lane's GPUs start in members_, and the end
};

/// For each replica of `plan`, the replica whose steps stand for its own in a replay without contention (itself
/// when none does). Replica q stands for r when the plan has one phase, the two have the same scheme and
/// micro-batch shapes (sequence ids aside), and r's GPUs are q's moved up by a whole number of `domain_size`-GPU
/// NVLink domains: a topology prices a group by how it sits on the domains, so each of r's collectives costs what
/// q's does, the gradient sync they share starts for both at once, and r's GPUs run q's timeline. q is the lowest
/// placed replica of its kind.
std::vector<int> replica_stand_ins(const IterationPlan& plan, int domain_size);

/// The lanes of a plan's GPUs (GpuSteps): GPUs share a lane when in every phase they belong to the same replica
/// and that replica runs the same steps on all of its GPUs -- no pipeline stages, no tensor parallelism (TP ranks
/// join different CP groups), and in every micro-batch every sequence sharded over the CP group with the
/// same share on each rank (no local sequences, no per-sequence split). GPUs in no replica share one lane. Lane
/// numbers are dense, in order of each lane's first GPU.
/// `stand_ins` (replica_stand_ins, or empty): GPU i of a replica also joins the lane of GPU i of its stand-in, so
/// a lane no longer lies within one replica's collectives (the replay counts arrivals by lane).
std::vector<int> gpu_lanes(const IterationPlan& plan, int world, std::span<const int> stand_ins = {});

struct IterationProgram {
  GpuSteps gpus;  ///< steps per global GPU index (world-size entries), one list per lane
  std::vector<CollectiveSpec> collectives;
  std::vector<TransferSpec> transfers;
  std::vector<ComputeWork> works;
};

struct ProgramOptions {
  /// Layers simulated as one block of compute followed by its communication: 1 simulates every layer; 0 (or any
  /// value >= the stage's layers) folds a stage's layers into one block. Without contention the result is the
  /// same; with contention, finer blocks interleave flows of different groups more faithfully, at the price of
  /// proportionally more simulated events.
  int layers_per_block = 0;
  /// Fill IterationProgram::works, the steps' `work` indices and the collectives' `calls`. The live executor runs
  /// them; the simulator reads only seconds and turns this off, which saves a copy of every share list per compute
  /// step and of every call list per collective.
  bool describe_work = true;
  /// Called after each micro-batch of a replica without pipeline stages, with the program so far and that replica's
  /// GPUs: the streaming estimate (program/estimate.hpp) replays them there and drops what they have run. It may
  /// clear those GPUs' steps and, when nothing else is pending, every collective; the builder indexes from there.
  std::function<void(IterationProgram&, std::span<const int>)> after_flat_micro_batch;
  /// Build only the replicas that stand for others (replica_stand_ins) and put the others' GPUs in their lanes.
  /// Exact for the replay without contention (the estimate), where a thousand-GPU data-parallel plan then costs
  /// what one replica does; never for the simulator, whose flows of every replica share links.
  bool fold_replicas = false;
};

/// Throws PlanningError for a plan the estimate would refuse (bad shapes, GPUs outside the cluster), and whatever
/// the cost model throws (InputError for a profile missing a collective).
/// `storage`: a previous program whose memory is reused (a simulation builds one per iteration); its contents do
/// not matter.
IterationProgram build_program(const IterationPlan& plan, const CostModel& cost, const ProgramOptions& options,
                               IterationProgram storage = {});

/// A group of GPUs that build_program may give flows: the members of a collective of `kind`, or a pipeline
/// transfer's pair {from, to} (kind PpActivation).
struct FlowGroup {
  std::vector<int> gpus;
  WorkKind kind = WorkKind::CpAllToAll;
  auto operator<=>(const FlowGroup&) const = default;
};
/// Every such group of a plan (CP, TP and gradient-sync groups, pipeline neighbours; not the phase barrier, which
/// moves no data): the platform is built for their flows. Throws as build_program.
std::vector<FlowGroup> flow_groups(const IterationPlan& plan, const CostModel& cost);

}  // namespace lcsim::program
