#pragma once
// The simulated cluster, built from the scenario's ClusterSpec inside a running SimGrid engine: one star zone
// whose center is the non-blocking switch of a one-level fat-tree and each node's NVSwitch at once.
//
//   gpu-i  --nvlink-i (split duplex)--------------------+
//   nic-i  --ib-i     (split duplex)-- leaf-n (node n) --+-- center
//
// Every GPU has two hosts: `gpu-i` runs its actor and computes, and talks NVLink to the GPUs of its node;
// `nic-i` is its InfiniBand NIC, one per GPU, and carries its traffic to other nodes. Keeping them apart gives a
// GPU two different routes (a star zone has one route per member). Link bandwidths are the cluster's
// per-direction figures; a leaf link carries a whole node's NICs (gpus_per_node x ib), so the fabric is
// non-blocking and the NICs are where inter-node flows contend, unless the topology oversubscribes it (the leaf then
// carries 1/ratio of that: TopologyKind::uplink_share); a one-node cluster has no leaf. Links have no
// latency: every transfer is a collective or send/recv whose fitted latency in the profile already includes the
// wire's, and the collectives pay it (engine/simgrid_collectives.cpp), so the cluster's nvlink_latency_us and
// ib_latency_us are not added a second time. One zone rather than a zone per node under a fat-tree zone: the same
// links on every route, built in linear time (docs/simulation.md, "Scale").
//
// A "node" here is an NVLink domain: a node of a fat-tree or rail-optimized cluster, domain_gpus GPUs of an
// nvlink-domain one (its leaf then carries the domain's NICs).
//
// Aggregate hosts (one flow per node loads every member's links) and merged links (GPUs whose links the same
// declared uses cross share one link): docs/simulation.md, "Platform: aggregates and merged links".
#include <compare>
#include <map>
#include <utility>
#include <vector>

#include "engine/simgrid_compat.hpp"
#include "model/cluster.hpp"

namespace lcsim::sim {

/// Links that one end of a flow crosses together: the links of class `link` of `gpus` (sorted, one node). One GPU
/// is that GPU's own endpoint; more are an aggregate.
struct LinkUse {
  LinkClass link = LinkClass::NvLink;
  std::vector<int> gpus;
  auto operator<=>(const LinkUse&) const = default;
};

class Platform {
 public:
  /// Aggregate hosts (up, down) of one node's parts of collective groups, by link class and sorted GPUs.
  using AggregateMap = std::map<std::pair<LinkClass, std::vector<int>>, std::pair<sg4::Host*, sg4::Host*>>;

  /// Creates the zones, hosts and links in the current engine (call once, before Engine::run), with an aggregate
  /// for every use of two GPUs or more, and links merged as the header says (`merge_links` false keeps one link
  /// per GPU and class: the same results, for checking that). Throws std::invalid_argument for a use outside the
  /// cluster or spanning nodes.
  explicit Platform(const ClusterSpec& cluster, const std::vector<LinkUse>& uses = {}, bool merge_links = true);
  Platform(const Platform&) = delete;
  Platform& operator=(const Platform&) = delete;

  int world_size() const { return static_cast<int>(gpus_.size()); }
  /// The shape it builds: a part of it per NVLink domain (a node on a fat-tree).
  Topology topology() const { return cluster_.topology(); }
  /// The host that computes for GPU `rank` (global GPU index) and sends its NVLink traffic.
  sg4::Host* gpu(int rank) const { return gpus_.at(static_cast<std::size_t>(rank)); }
  /// The host that sends GPU `rank`'s InfiniBand traffic.
  sg4::Host* nic(int rank) const { return nics_.at(static_cast<std::size_t>(rank)); }
  /// Where a flow of link class `link` leaves and enters alone: the GPU host on NVLink, the NIC host on
  /// InfiniBand. Throws std::logic_error when that GPU's link is merged with others (an undeclared use).
  sg4::Host* endpoint(int rank, LinkClass link) const;
  /// How many GPUs share GPU `rank`'s link of class `link` (1: its own).
  int link_sharers(int rank, LinkClass link) const;
  /// Bytes per second of one GPU's link of that class, per direction.
  double bandwidth(LinkClass link) const { return link == LinkClass::NvLink ? nvlink_Bps_ : ib_Bps_; }
  /// The aggregate hosts (up, down) of `gpus`, sorted GPUs of one node, for `link`; {nullptr, nullptr} when the
  /// platform has none (a part of no registered group, or a single GPU).
  std::pair<sg4::Host*, sg4::Host*> aggregate(const std::vector<int>& gpus, LinkClass link) const;
  /// Host speed in flop/s. The executor times compute with waits, so the figure only has to be positive.
  static constexpr double kHostSpeed = 1e12;

 private:
  std::vector<sg4::Host*> gpus_;  // by global GPU index: Engine::get_all_hosts() has no useful order
  std::vector<sg4::Host*> nics_;
  std::vector<AggregateMap> aggregates_;  // by domain: a lookup searches only its domain's few parts
  std::vector<int> nvlink_sharers_;       // by GPU: how many GPUs its NVLink link stands for
  std::vector<int> ib_sharers_;           // and its NIC link
  ClusterSpec cluster_;
  double nvlink_Bps_ = 0;
  double ib_Bps_ = 0;
};

}  // namespace lcsim::sim
