#include "model/topology.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

namespace lcsim {

// Each kind's reader, defined in its own file under model/topologies/.
std::shared_ptr<const TopologyKind> read_fat_tree(JsonObjectReader& cluster);
std::shared_ptr<const TopologyKind> read_rail_optimized(JsonObjectReader& cluster);
std::shared_ptr<const TopologyKind> read_nvlink_domain(JsonObjectReader& cluster);

namespace {

// clang-format off
constexpr TopologyEntry kTopologies[] = {
    {"fat-tree", "nodes on a fat-tree, one NIC per GPU; cross-node collectives at one NIC per GPU, shared when "
                 "oversubscription > 1 (the default, non-blocking)", read_fat_tree},
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
  return kind_->network_path(shape_, op, layout_of(group));
}

GroupLayout Topology::layout_of(std::span<const int> group) const {
  std::vector<int> domains(group.size());  // the domain of each member, sorted: runs of one domain
  for (std::size_t m = 0; m < group.size(); ++m) domains[m] = domain_of(group[m]);
  std::sort(domains.begin(), domains.end());
  GroupLayout layout{.size = static_cast<int>(group.size()), .min_per_domain = static_cast<int>(group.size())};
  for (std::size_t start = 0; start < domains.size();) {
    std::size_t end = start;
    while (end < domains.size() && domains[end] == domains[start]) ++end;
    const int members = static_cast<int>(end - start);
    ++layout.domains;
    layout.min_per_domain = std::min(layout.min_per_domain, members);
    layout.max_per_domain = std::max(layout.max_per_domain, members);
    start = end;
  }
  return layout;
}

CollectivePath Topology::aligned_path(CollectiveOp op, int group_size, LinkClass link) const {
  if (group_size < 1) throw std::invalid_argument("aligned_path: a group of no GPU");
  if (link == LinkClass::NvLink || group_size < 2 || op == CollectiveOp::SendRecv || !kind_->shapes_collectives())
    return {link, 1.0};
  if (group_size <= domain_size_) return kind_->network_path(shape_, op, {group_size, group_size, 1, 1});
  const int full = group_size / domain_size_;
  const int rest = group_size % domain_size_;
  const GroupLayout layout{.size = group_size,
                           .domains = full + (rest > 0 ? 1 : 0),
                           .min_per_domain = rest > 0 ? rest : domain_size_,
                           .max_per_domain = domain_size_};
  return kind_->network_path(shape_, op, layout);
}

CollectivePath Topology::scattered_path(CollectiveOp op, int group_size, LinkClass link) const {
  if (group_size < 1) throw std::invalid_argument("scattered_path: a group of no GPU");
  if (link == LinkClass::NvLink || group_size < 2 || op == CollectiveOp::SendRecv || !kind_->shapes_collectives())
    return {link, 1.0};
  return kind_->network_path(shape_, op, {group_size, group_size, 1, 1});
}

CollectivePath spread_over_nics(CollectiveOp op, const GroupLayout& group, bool pxn, int nics_per_domain) {
  if (op == CollectiveOp::SendRecv) return {LinkClass::InfiniBand, 1.0};
  if (op == CollectiveOp::AllToAll) {
    const double shared = pxn ? static_cast<double>(nics_per_domain) / group.max_per_domain : 1.0;
    return {LinkClass::InfiniBand, std::max(1.0, shared)};
  }
  return {LinkClass::InfiniBand, static_cast<double>(std::max(1, group.min_per_domain))};
}

FatTree::FatTree(double oversubscription) : oversubscription_(oversubscription) {
  if (!(oversubscription >= 1.0) || !std::isfinite(oversubscription))
    throw std::invalid_argument("fat-tree: oversubscription must be a finite ratio of at least 1");
}

CollectivePath FatTree::network_path(const ClusterShape& shape, CollectiveOp, const GroupLayout& group) const {
  // The node's uplink carries gpus_per_node NICs' worth / r, shared by the group's members on its busiest node.
  const double share = static_cast<double>(shape.gpus_per_node) / (oversubscription_ * group.max_per_domain);
  return {LinkClass::InfiniBand, std::min(1.0, share)};
}

std::vector<std::string> FatTree::describe() const {
  return {"oversubscription = " + std::to_string(oversubscription_)};
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
