#include "sim/platform.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>

namespace lcsim::sim {
namespace {

struct LinkFigures {
  double nvlink_Bps;
  double ib_Bps;
};

using AggregateKey = std::pair<LinkClass, std::vector<int>>;

/// The parts (on one node, two GPUs or more) of every group, by node.
std::vector<std::set<AggregateKey>> aggregate_parts(const ClusterSpec& cluster,
                                                    const std::vector<std::vector<int>>& groups) {
  std::vector<std::set<AggregateKey>> parts(static_cast<std::size_t>(cluster.nodes));
  for (std::vector<int> group : groups) {
    if (group.size() < 2) continue;
    for (int g : group)
      if (g < 0 || g >= cluster.world_size()) throw std::invalid_argument("platform: group GPU outside the cluster");
    const LinkClass link = cluster.link_class(group);
    std::sort(group.begin(), group.end());
    group.erase(std::unique(group.begin(), group.end()), group.end());
    for (std::size_t first = 0; first < group.size();) {
      const int node = cluster.node_of(group[first]);
      std::size_t last = first;
      while (last < group.size() && cluster.node_of(group[last]) == node) ++last;
      if (last - first >= 2)
        parts[static_cast<std::size_t>(node)].insert(
            {link, std::vector<int>(group.begin() + static_cast<std::ptrdiff_t>(first),
                                    group.begin() + static_cast<std::ptrdiff_t>(last))});
      first = last;
    }
  }
  return parts;
}

class NodeBuilder {
 public:
  NodeBuilder(const ClusterSpec& cluster, const LinkFigures& figures, std::vector<sg4::Host*>& gpus,
              std::vector<sg4::Host*>& nics, std::vector<Platform::AggregateMap>& aggregates)
      : cluster_(cluster), f_(figures), gpus_(gpus), nics_(nics), aggregates_(aggregates) {}

  /// One node: a star zone (the NVSwitch) holding the node's GPU and NIC hosts, its aggregates and the gateway
  /// to the fabric.
  FatTreeLeaf make(int node, const sg4::NetZone* parent, const std::set<AggregateKey>& parts) {
    const std::string n = std::to_string(node);
    sg4::NetZone* zone = make_star_zone("node-" + n, parent);
    auto* gateway = parent != nullptr ? zone->create_router("gw-" + n) : nullptr;
    std::map<int, sg4::Link*> nvlinks;
    std::map<int, sg4::Link*> ibs;
    for (int local = 0; local < cluster_.gpus_per_node; ++local) {
      const int rank = node * cluster_.gpus_per_node + local;
      const std::string r = std::to_string(rank);
      sg4::Host* gpu = zone->create_host("gpu-" + r, Platform::kHostSpeed)->seal();
      sg4::Link* nvlink = zone->create_split_duplex_link("nvlink-" + r, f_.nvlink_Bps)->set_latency(0);
      add_star_route(zone, gpu->get_netpoint(), nullptr, {nvlink->seal()});
      sg4::Host* nic = zone->create_host("nic-" + r, Platform::kHostSpeed)->seal();
      sg4::Link* ib = zone->create_split_duplex_link("ib-" + r, f_.ib_Bps)->set_latency(0);
      add_star_route(zone, nic->get_netpoint(), nullptr, {ib->seal()});
      gpus_[static_cast<std::size_t>(rank)] = gpu;
      nics_[static_cast<std::size_t>(rank)] = nic;
      nvlinks[rank] = nvlink;
      ibs[rank] = ib;
    }
    int k = 0;
    for (const auto& key : parts) {
      const auto& links = key.first == LinkClass::NvLink ? nvlinks : ibs;
      std::vector<sg4::Link*> part_links;
      for (int g : key.second) part_links.push_back(links.at(g));
      const std::string name =
          std::string(key.first == LinkClass::NvLink ? "agg-nv-" : "agg-ib-") + n + "-" + std::to_string(k++);
      sg4::Host* up = zone->create_host(name + "-up", Platform::kHostSpeed)->seal();
      sg4::Host* down = zone->create_host(name + "-down", Platform::kHostSpeed)->seal();
      add_star_one_way(zone, up->get_netpoint(), nullptr, part_links);
      add_star_one_way(zone, nullptr, down->get_netpoint(), part_links);
      aggregates_[static_cast<std::size_t>(node)][key] = {up, down};
    }
    zone->seal();
    return {zone->get_netpoint(), gateway};
  }

 private:
  const ClusterSpec& cluster_;
  const LinkFigures& f_;
  std::vector<sg4::Host*>& gpus_;
  std::vector<sg4::Host*>& nics_;
  std::vector<Platform::AggregateMap>& aggregates_;
};

}  // namespace

Platform::Platform(const ClusterSpec& cluster, const std::vector<std::vector<int>>& groups) {
  if (cluster.nodes < 1 || cluster.gpus_per_node < 1) throw std::invalid_argument("platform: empty cluster");
  if (!(cluster.nvlink_GBps > 0) || !(cluster.ib_GBps > 0))
    throw std::invalid_argument("platform: link bandwidths must be positive");
  gpus_per_node_ = cluster.gpus_per_node;
  nvlink_Bps_ = cluster.nvlink_GBps * 1e9;
  ib_Bps_ = cluster.ib_GBps * 1e9;
  const LinkFigures figures{nvlink_Bps_, ib_Bps_};

  const auto world = static_cast<std::size_t>(cluster.world_size());
  gpus_.assign(world, nullptr);
  nics_.assign(world, nullptr);
  aggregates_.resize(static_cast<std::size_t>(cluster.nodes));
  const std::vector<std::set<AggregateKey>> parts = aggregate_parts(cluster, groups);
  NodeBuilder nodes(cluster, figures, gpus_, nics_, aggregates_);
  if (cluster.nodes == 1) {
    nodes.make(0, nullptr, parts[0]);
    return;
  }
  sg4::NetZone* fabric =
      make_fat_tree_zone("fabric", static_cast<unsigned>(cluster.nodes), cluster.gpus_per_node * ib_Bps_,
                         [&](sg4::NetZone* zone, unsigned long id) {
                           return nodes.make(static_cast<int>(id), zone, parts[static_cast<std::size_t>(id)]);
                         });
  fabric->seal();
}

std::pair<sg4::Host*, sg4::Host*> Platform::aggregate(const std::vector<int>& gpus, LinkClass link) const {
  if (gpus.empty()) return {nullptr, nullptr};
  const auto node = static_cast<std::size_t>(node_of(gpus.front()));
  if (node >= aggregates_.size()) return {nullptr, nullptr};
  const auto it = aggregates_[node].find({link, gpus});
  if (it == aggregates_[node].end()) return {nullptr, nullptr};
  return it->second;
}

}  // namespace lcsim::sim
