#pragma once
// The cluster's shape as everything above it asks: which NVLink domain a GPU is in, how large a domain is, and which
// link class a group of GPUs crosses. Policies, the cost model and the simulator ask the topology instead of
// dividing by gpus_per_node, so that another shape (rail-optimized nodes, NVLink domains beyond a node) is another
// implementation. Today's one is the fat-tree: nodes of gpus_per_node GPUs on NVSwitch, nodes joined by a
// non-blocking InfiniBand fat-tree, one NIC per GPU (docs/topology-seam.md).
#include <span>
#include <stdexcept>
#include <string_view>

namespace lcsim {

enum class LinkClass { NvLink, InfiniBand };
std::string_view to_string(LinkClass link);

class Topology {
 public:
  virtual ~Topology() = default;
  virtual std::string_view name() const = 0;
  virtual int world_size() const = 0;
  /// The NVLink domain of GPU `gpu` (global index): GPUs of one domain talk over NVLink, others over the network.
  virtual int domain_of(int gpu) const = 0;
  /// GPUs per NVLink domain: the largest group that never leaves NVLink (a TP group's bound).
  virtual int domain_size() const = 0;
  /// NvLink when every GPU of the group is in one domain, else InfiniBand. Throws std::invalid_argument for an
  /// empty group and std::out_of_range for a GPU outside the cluster (a caller bug: plans are validated first).
  LinkClass link_class(std::span<const int> group) const;
  bool same_domain(int a, int b) const { return domain_of(a) == domain_of(b); }
};

/// Nodes of `gpus_per_node` GPUs on NVSwitch, nodes on a non-blocking fat-tree: a node is an NVLink domain. A small
/// value, built where it is asked for (ClusterSpec::topology).
class FatTree final : public Topology {
 public:
  /// Inline: ClusterSpec::topology() builds one wherever a link class or domain is asked, once per collective.
  FatTree(int nodes, int gpus_per_node) : nodes_(nodes), gpus_per_node_(gpus_per_node) {
    if (nodes < 1 || gpus_per_node < 1) throw std::invalid_argument("fat-tree: needs at least one node of one GPU");
  }
  std::string_view name() const override { return "fat-tree"; }
  int world_size() const override { return nodes_ * gpus_per_node_; }
  int domain_of(int gpu) const override { return gpu / gpus_per_node_; }
  int domain_size() const override { return gpus_per_node_; }
  int nodes() const { return nodes_; }

 private:
  int nodes_;
  int gpus_per_node_;
};

}  // namespace lcsim
