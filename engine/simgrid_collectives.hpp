#pragma once
// Collectives and transfers as flows over the platform, so that groups sharing a link slow each other down.
// The cost model says how long a collective takes alone (latency + transfer, from the profile's fits); the flows
// reproduce exactly that time when nothing else uses the links, and CM02 max-min sharing stretches them when
// something does. Algorithms (engine/simgrid_collectives.cpp explains each):
//   - Ulysses all-to-all (CP):   one flow per rank to a peer, carrying all n-1 of its messages
//   - ring attention (CP):       one flow per rank to its ring successor, carrying all its steps
//   - ring all-gather / reduce-scatter / all-reduce (TP, ZeRO): collapsed ring, one flow per rank
//   - send/recv (pipelines):     one flow
// A group whose links nothing else can use (exclusive_groups) needs no flow: its time alone is known.
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

#include "engine/platform.hpp"
#include "engine/simgrid_compat.hpp"
#include "program/iteration_program.hpp"

namespace lcsim::sim {

/// When a member's communication ran: from the moment the last member arrived to completion.
struct CommInterval {
  double start = 0;
  double end = 0;
};

/// The flows of one collective instance, `bytes` each.
struct FlowPlan {
  struct Flow {
    sg4::Host* from = nullptr;
    sg4::Host* to = nullptr;
  };
  std::vector<Flow> flows;
  std::uint64_t bytes = 0;
  double delay_s = 0;  ///< the collective's latency, paid before the flows start
};
/// Exposed for tests: the flows that make `spec` take exactly its cost-model time on an idle platform.
FlowPlan plan_flows(const Platform& platform, const program::CollectiveSpec& spec);

/// The GPU sets (sorted) of `groups` whose flows have their links to themselves: no link that a flow of a group
/// over those GPUs crosses -- NVLink links, NICs -- is crossed by a flow of a group over other GPUs. On a
/// non-blocking fabric the leaf links do not count: a leaf carries its node's NICs at their summed bandwidth
/// (engine/platform.hpp), so the flows through it, each held to its NIC's bandwidth or less, never fill it. On an
/// oversubscribed one (TopologyKind::uplink_share below 1) they do, and two groups crossing one leaf share it.
std::set<std::vector<int>> exclusive_groups(const ClusterSpec& cluster, const std::vector<program::FlowGroup>& groups);

/// The platform, and what it knows of every group of GPUs it has planned flows for: all collectives of one group
/// and kind (a CP group's all-to-all at every block, micro-batch and iteration) have the same flow ends, and only
/// their bytes and latency differ, so the ends are worked out once per group instead of once per collective.
class FlowCache {
 public:
  /// `exclusive`: GPU sets whose collectives are timed without flows (exclusive_groups). Only for callers whose
  /// collectives over one set never overlap in time, as in the executor, where every member takes part in each:
  /// nothing else shares the links of such a set, but two of its collectives at once would.
  explicit FlowCache(const Platform& platform, const std::set<std::vector<int>>& exclusive = {});
  const Platform& platform() const { return platform_; }

  struct Group {
    std::vector<FlowPlan::Flow> flows;  ///< plan_flows(platform(), spec)'s flows
    /// The collective's flows always run alone: its time is known without simulating them
    /// (engine/simgrid_collectives.cpp).
    bool exclusive = false;
    /// Exclusive: when the last collective over the same GPUs (of any kind) ends. The closed form rests on those
    /// never overlapping; one that starts earlier is refused (std::logic_error), never timed as if alone.
    double* busy_until = nullptr;
  };
  Group& group(const program::CollectiveSpec& spec);
  /// group(spec).flows.
  const std::vector<FlowPlan::Flow>& flows(const program::CollectiveSpec& spec) { return group(spec).flows; }

 private:
  struct Key {
    LinkClass link;
    program::WorkKind kind;
    std::vector<int> gpus;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& key) const;
  };
  const Platform& platform_;
  std::map<std::vector<int>, double> exclusive_;  // by exclusive GPU set: when its last collective ends
  std::unordered_map<Key, Group, KeyHash> groups_;
  Key key_;  // the lookup key, kept to reuse its memory
};

/// One flow before hosts are chosen: it leaves through the links of class `link` of `from` and enters through
/// those of `to` (one GPU: its own endpoint; more, on one node: their aggregate).
struct FlowShape {
  LinkClass link = LinkClass::NvLink;
  std::vector<int> from;
  std::vector<int> to;
};
/// The flows of a collective of `kind` over `gpus` (in group order) on link class `link`, or of a transfer
/// (`kind` PpActivation or PpGradient, `gpus` = {from, to}); `aggregate` false: one flow per member, never per
/// node. plan_flows() gives these hosts; link_uses() declares them to the platform.
std::vector<FlowShape> flow_shapes(const Topology& topology, const std::vector<int>& gpus, LinkClass link,
                                   program::WorkKind kind, bool aggregate);
/// What the flows of a collective (or transfer) of `kind` over `gpus` cross, on the group's link class: the
/// platform must be built with these for plan_flows() to find its aggregates and its endpoints unmerged.
std::vector<LinkUse> link_uses(const ClusterSpec& cluster, const std::vector<int>& gpus, program::WorkKind kind);

/// One collective instance at run time. It starts when the last member is ready and ends when the last flow does
/// (as NCCL collectives do: each rank needs data from all). The executor records arrivals without blocking (a
/// member may even be arrived on another's behalf) and has the actor of the last arrival call run(); who waits,
/// and how, is the caller's business.
class CollectiveRun {
 public:
  /// Records the arrival of `member` (a GPU, or the executor's lane of `gpus` GPUs that run the same steps), ready
  /// at `ready`; true when it completes the spec's GPUs.
  bool arrive(const program::CollectiveSpec& spec, int member, double ready, std::size_t gpus = 1);
  /// Whether run() returns at once: one GPU, nothing on the wire, or an exclusive group (its time is computed).
  bool immediate(FlowCache& flows, const program::CollectiveSpec& spec);
  /// Runs the collective once every member has arrived (blocking the calling actor for its simulated duration).
  CommInterval run(FlowCache& flows, const program::CollectiveSpec& spec);
  /// The members in arrival order.
  const std::vector<int>& members() const { return members_; }
  /// Forgets the instance, keeping the memory for the next one (the executor reuses its runs every iteration).
  void clear() {
    members_.clear();
    arrived_ = 0;
    ready_ = 0;
    interval_ = {};
    group_ = nullptr;
  }

 private:
  void run_flows(FlowCache& flows, const program::CollectiveSpec& spec);
  /// The spec's group in `flows`, looked up once per instance (immediate() and run() both need it).
  FlowCache::Group& group(FlowCache& flows, const program::CollectiveSpec& spec) {
    if (group_ == nullptr) group_ = &flows.group(spec);
    return *group_;
  }

  std::vector<int> members_;
  std::size_t arrived_ = 0;  // GPUs
  double ready_ = 0;
  CommInterval interval_;
  FlowCache::Group* group_ = nullptr;  // FlowCache keeps its groups in place
};

/// One point-to-point transfer at run time: the flow starts when both sides have arrived (NCCL send/recv is a
/// rendezvous); the sender never waits, the receiver waits for the data.
class TransferRun {
 public:
  void send(const Platform& platform, const program::TransferSpec& spec);
  CommInterval receive(const Platform& platform, const program::TransferSpec& spec);

 private:
  sg4::CommPtr start(const Platform& platform, const program::TransferSpec& spec);

  bool sent_ = false;
  bool receiver_waiting_ = false;
  double start_ = 0;
  sg4::CommPtr comm_;
  sg4::SemaphorePtr ready_;
};

}  // namespace lcsim::sim
