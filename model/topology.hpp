#pragma once
// The cluster's shape as everything above it asks: which NVLink domain a GPU is in, how large a domain is, which
// link class a group of GPUs crosses, and what bandwidth a collective over a group gets from the wiring. Policies,
// the cost model and the simulator ask the topology instead of dividing by gpus_per_node, so that another shape is
// another registered kind (docs/topology.md): `fat-tree` (the default), `rail-optimized`, `nvlink-domain`.
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lcsim {

class JsonObjectReader;

enum class LinkClass { NvLink, InfiniBand };
std::string_view to_string(LinkClass link);

enum class CollectiveOp { AllGather, ReduceScatter, AllReduce, AllToAll, SendRecv };

/// The scenario's node arithmetic: what every kind is built over.
struct ClusterShape {
  int nodes = 1;
  int gpus_per_node = 8;
  int world_size() const { return nodes * gpus_per_node; }
};

/// What the wiring does to one collective over a group: the link class whose profile fit prices it, and the factor
/// on that class's per-GPU bandwidth (the cluster's figure). 1 on a non-blocking fat-tree; above 1 where rings spread
/// over a node's NICs.
struct CollectivePath {
  LinkClass link = LinkClass::NvLink;
  double bandwidth_scale = 1.0;
};

/// How a group of GPUs sits on the NVLink domains, which is all a kind needs to price its collectives.
struct GroupLayout {
  int size = 0;
  int domains = 0;         ///< domains it has members on
  int min_per_domain = 0;  ///< members on its least populated domain
  int max_per_domain = 0;  ///< and on its most populated one
};

/// NCCL on one NIC per GPU: a ring per NIC, data moved to it over NVLink, so a ring collective crosses the network on
/// as many NICs as the group's least populated domain has members (every ring passes through it). An all-to-all has
/// no ring: one NIC per GPU, unless PXN (`pxn`) routes each message over NVLink to the NIC on the destination's rail
/// first, which shares a domain's `nics_per_domain` NICs among its members. docs/topology.md has the checks.
CollectivePath spread_over_nics(CollectiveOp op, const GroupLayout& group, bool pxn, int nics_per_domain);

/// One kind of cluster wiring with its own parameters (immutable; ClusterSpec copies share it). A kind answers for a
/// shape; the Topology view below pairs the two.
class TopologyKind {
 public:
  virtual ~TopologyKind() = default;
  virtual std::string_view name() const = 0;
  /// GPUs per NVLink domain. Domains are contiguous runs of GPU indices. Default: a node.
  virtual int domain_size(const ClusterShape& shape) const { return shape.gpus_per_node; }
  /// Throws std::invalid_argument when the shape does not fit the kind's parameters (e.g. a domain that is not a
  /// whole number of nodes). Called when a scenario is read and when a sweep changes the shape.
  virtual void check(const ClusterShape& shape) const;
  /// Whether network_path can differ from one NIC's bandwidth per GPU (false: it is never asked).
  virtual bool shapes_collectives() const { return false; }
  /// The path of `op` (not a send/recv) over a group of at least two GPUs crossing the network (InfiniBand).
  /// Default: one NIC's bandwidth per GPU.
  virtual CollectivePath network_path(const ClusterShape& shape, CollectiveOp op, const GroupLayout& group) const;
  /// The share of a domain's NIC bandwidth that the fabric above it carries to other domains: 1 non-blocking,
  /// 1 / ratio on an oversubscribed fabric. The simulator sizes each domain's uplink (its leaf link) by it.
  virtual double uplink_share() const { return 1.0; }
  /// The kind's parameters as `key = value` lines for printing, empty for none.
  virtual std::vector<std::string> describe() const { return {}; }
};

/// The topology of one cluster: a kind over a shape. A small value that shares the kind, so it may outlive the
/// ClusterSpec it came from.
class Topology {
 public:
  Topology(std::shared_ptr<const TopologyKind> kind, ClusterShape shape);

  std::string_view name() const { return kind_->name(); }
  const TopologyKind& kind() const { return *kind_; }
  const ClusterShape& shape() const { return shape_; }
  int world_size() const { return shape_.world_size(); }
  int nodes() const { return shape_.nodes; }
  int gpus_per_node() const { return shape_.gpus_per_node; }
  /// GPUs per NVLink domain: the largest group that never leaves NVLink (a TP group's bound).
  int domain_size() const { return domain_size_; }
  int domains() const { return world_size() / domain_size_; }
  /// The NVLink domain of GPU `gpu` (global index): GPUs of one domain talk over NVLink, others over the network.
  int domain_of(int gpu) const { return gpu / domain_size_; }
  int node_of(int gpu) const { return gpu / shape_.gpus_per_node; }
  bool same_domain(int a, int b) const { return domain_of(a) == domain_of(b); }
  /// NvLink when every GPU of the group is in one domain, else InfiniBand. Throws std::invalid_argument for an
  /// empty group and std::out_of_range for a GPU outside the cluster (a caller bug: plans are validated first).
  LinkClass link_class(std::span<const int> group) const;
  /// What `op` over `group` gets from the wiring: within a domain, NVLink at its bandwidth; across domains, the
  /// kind's network_path. A send/recv pair is its link class at its own bandwidth.
  CollectivePath collective_path(CollectiveOp op, std::span<const int> group) const;
  /// How `group` (crossing the network) sits on the domains: what collective_path prices, for a caller pricing
  /// several collectives over one group.
  GroupLayout layout_of(std::span<const int> group) const;
  /// The same for a group of `group_size` GPUs on `link` whose members are not known: what a policy's cost view
  /// assumes. On the network, whole nodes from a node's start (the remainder on the last); a group no larger than a
  /// node, one GPU per node.
  CollectivePath aligned_path(CollectiveOp op, int group_size, LinkClass link) const;
  /// The same for a group whose placement nobody knows yet: one GPU per domain, the placement that gets the least
  /// from the wiring (no spread; a whole uplink each).
  CollectivePath scattered_path(CollectiveOp op, int group_size, LinkClass link) const;

 private:
  std::shared_ptr<const TopologyKind> kind_;
  ClusterShape shape_;
  int domain_size_;
};

/// Nodes of gpus_per_node GPUs on NVSwitch, one NIC per GPU, nodes on a fat-tree; a collective's cross-node traffic
/// runs at one NIC's bandwidth per GPU. With `oversubscription` r > 1 the fabric carries 1/r of a node's NIC
/// bandwidth from it, shared by the node's members of a group. The default kind (r = 1); a node is an NVLink domain.
class FatTree final : public TopologyKind {
 public:
  explicit FatTree(double oversubscription = 1.0);
  std::string_view name() const override { return "fat-tree"; }
  bool shapes_collectives() const override { return oversubscription_ > 1.0; }
  CollectivePath network_path(const ClusterShape& shape, CollectiveOp op, const GroupLayout& group) const override;
  double uplink_share() const override { return 1.0 / oversubscription_; }
  std::vector<std::string> describe() const override;
  double oversubscription() const { return oversubscription_; }
  /// The non-blocking instance every ClusterSpec starts with.
  static std::shared_ptr<const TopologyKind> shared();

 private:
  double oversubscription_;
};

/// A registered kind: its name for cluster.topology, one line of help, and the reader of its keys from the
/// scenario's cluster object (strict: the reader's finish() then rejects every key no kind read).
struct TopologyEntry {
  std::string_view name;
  std::string_view summary;
  std::shared_ptr<const TopologyKind> (*read)(JsonObjectReader& cluster);
};

/// The built-in kinds, in the order `lcsim list topologies` prints them.
std::span<const TopologyEntry> topology_kinds();
/// The entry named `name`; nullptr for none.
const TopologyEntry* find_topology(std::string_view name);

}  // namespace lcsim
