#include "policies/core/topology.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace lcsim {

// Each kind's reader, defined in its own file under policies/core/topologies/.
std::shared_ptr<const TopologyKind> read_fat_tree(JsonObjectReader& cluster);
std::shared_ptr<const TopologyKind> read_rail_optimized(JsonObjectReader& cluster);
std::shared_ptr<const TopologyKind> read_nvlink_domain(JsonObjectReader& cluster);

namespace {

// clang-format off
constexpr TopologyEntry kTopologies[] = {
    {"fat-tree", "nodes on a non-blocking fat-tree, one NIC per GPU; cross-node collectives at one NIC per GPU "
                 "(the default)", read_fat_tree},
    {"rail-optimized", "one NIC per GPU on its rail; ring collectives spread over the node's NICs, all-to-all "
                       "at one NIC per GPU unless pxn", read_rail_optimized},
    {"nvlink-domain", "NVLink domains of domain_gpus GPUs across nodes (e.g. GB200 NVL72); domains on a "
                      "non-blocking fat-tree", read_nvlink_domain},
};
// clang-format on

}  // namespace

std::string_view to_string(LinkClass link) {
  switch (link) {
    case LinkClass::NvLink:
      return "nvlink";
    case LinkClass::InfiniBand:
      return "infiniband";
  }
  throw std::invalid_argument("to_string: invalid LinkClass value");
}

void TopologyKind::check(const ClusterShape& shape) const {
  if (shape.nodes < 1 || shape.gpus_per_node < 1)
    throw std::invalid_argument(std::string(name()) + ": needs at least one node of one GPU");
}

CollectivePath TopologyKind::network_path(const ClusterShape&, CollectiveOp, const GroupLayout&) const {
  return {LinkClass::InfiniBand, 1.0};
}

Topology::Topology(std::shared_ptr<const TopologyKind> kind, ClusterShape shape)
    : kind_(std::move(kind)), shape_(shape), domain_size_(0) {
  if (kind_ == nullptr) throw std::invalid_argument("topology: no kind");
  domain_size_ = kind_->domain_size(shape);
  if (shape.nodes < 1 || shape.gpus_per_node < 1 || domain_size_ < 1)
    throw std::invalid_argument(std::string(kind_->name()) + ": needs at least one node of one GPU");
}

LinkClass Topology::link_class(std::span<const int> group) const {
  if (group.empty()) throw std::invalid_argument("link_class: empty GPU group");
  const int world = world_size();
  for (const int index : group)
    if (index < 0 || index >= world)
      throw std::out_of_range("link_class: GPU " + std::to_string(index) + " outside a cluster of " +
                              std::to_string(world) + " GPUs");
  const int domain = domain_of(group.front());
  for (const int index : group)
    if (domain_of(index) != domain) return LinkClass::InfiniBand;
  return LinkClass::NvLink;
}

CollectivePath Topology::collective_path(CollectiveOp op, std::span<const int> group) const {
  const LinkClass link = link_class(group);
  if (link == LinkClass::NvLink || op == CollectiveOp::SendRecv || !kind_->shapes_collectives()) return {link, 1.0};
  std::vector<int> nodes(group.size());  // the node of each member, sorted: runs of one node
  for (std::size_t m = 0; m < group.size(); ++m) nodes[m] = node_of(group[m]);
  std::sort(nodes.begin(), nodes.end());
  GroupLayout layout{.size = static_cast<int>(group.size()), .min_per_node = static_cast<int>(group.size())};
  for (std::size_t start = 0; start < nodes.size();) {
    std::size_t end = start;
    while (end < nodes.size() && nodes[end] == nodes[start]) ++end;
    const int members = static_cast<int>(end - start);
    ++layout.nodes;
    layout.min_per_node = std::min(layout.min_per_node, members);
    layout.max_per_node = std::max(layout.max_per_node, members);
    start = end;
  }
  return kind_->network_path(shape_, op, layout);
}

CollectivePath Topology::aligned_path(CollectiveOp op, int group_size, LinkClass link) const {
  if (group_size < 1) throw std::invalid_argument("aligned_path: a group of no GPU");
  if (link == LinkClass::NvLink || group_size < 2 || op == CollectiveOp::SendRecv || !kind_->shapes_collectives())
    return {link, 1.0};
  const int per_node = shape_.gpus_per_node;
  if (group_size <= per_node) return kind_->network_path(shape_, op, {group_size, group_size, 1, 1});
  const int full = group_size / per_node;
  const int rest = group_size % per_node;
  const GroupLayout layout{.size = group_size,
                           .nodes = full + (rest > 0 ? 1 : 0),
                           .min_per_node = rest > 0 ? rest : per_node,
                           .max_per_node = per_node};
  return kind_->network_path(shape_, op, layout);
}

std::shared_ptr<const TopologyKind> FatTree::shared() {
  static const auto kind = std::make_shared<const FatTree>();
  return kind;
}

std::span<const TopologyEntry> topology_kinds() {
  return kTopologies;
}

const TopologyEntry* find_topology(std::string_view name) {
  for (const TopologyEntry& entry : kTopologies)
    if (entry.name == name) return &entry;
  return nullptr;
}

}  // namespace lcsim
