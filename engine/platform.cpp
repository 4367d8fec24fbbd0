#include "engine/platform.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

namespace lcsim::sim {
namespace {

struct LinkFigures {
  double nvlink_Bps;
  double ib_Bps;
};

/// One node's declared uses: aggregates (two GPUs or more) and, by link class, the sets of the node's GPUs that
/// share one link (header comment). Every GPU of the node is in exactly one set per class.
struct NodeUses {
  std::vector<LinkUse> aggregates;
  std::map<LinkClass, std::vector<std::vector<int>>> link_sets;
};

std::vector<NodeUses> node_uses(const ClusterSpec& cluster, const std::vector<LinkUse>& declared, bool merge_links) {
  std::set<LinkUse> distinct;  // sorted GPUs, each use once: an aggregate is made once
  for (LinkUse use : declared) {
    std::sort(use.gpus.begin(), use.gpus.end());
    use.gpus.erase(std::unique(use.gpus.begin(), use.gpus.end()), use.gpus.end());
    distinct.insert(std::move(use));
  }
  const std::vector<LinkUse> uses(distinct.begin(), distinct.end());
  const Topology topology = cluster.topology();
  std::vector<NodeUses> nodes(static_cast<std::size_t>(topology.domains()));
  // Per node and class: for each GPU, the uses that cross its link (its signature).
  std::vector<std::map<LinkClass, std::map<int, std::vector<std::size_t>>>> signatures(nodes.size());
  for (std::size_t u = 0; u < uses.size(); ++u) {
    const LinkUse& use = uses[u];
    if (use.gpus.empty()) throw std::invalid_argument("platform: a link use names no GPU");
    for (int g : use.gpus)
      if (g < 0 || g >= cluster.world_size()) throw std::invalid_argument("platform: use of a GPU outside the cluster");
    const auto node = static_cast<std::size_t>(topology.domain_of(use.gpus.front()));
    for (int g : use.gpus)
      if (!topology.same_domain(g, use.gpus.front()))
        throw std::invalid_argument("platform: a link use spans NVLink domains");
    if (use.gpus.size() >= 2) nodes[node].aggregates.push_back(use);
    for (int g : use.gpus) signatures[node][use.link][g].push_back(u);
  }
  for (std::size_t n = 0; n < nodes.size(); ++n)
    for (LinkClass link : {LinkClass::NvLink, LinkClass::InfiniBand}) {
      std::map<std::vector<std::size_t>, std::size_t> set_of_signature;
      auto& sets = nodes[n].link_sets[link];
      for (int local = 0; local < topology.domain_size(); ++local) {
        const int g = static_cast<int>(n) * topology.domain_size() + local;
        const auto& by_gpu = signatures[n][link];
        const auto it = by_gpu.find(g);
        if (!merge_links || it == by_gpu.end()) {  // no use names it: its own link, as if never merged
          sets.push_back({g});
          continue;
        }
        const auto [found, added] = set_of_signature.try_emplace(it->second, sets.size());
        if (added) sets.emplace_back();
        sets[found->second].push_back(g);
      }
    }
  return nodes;
}

std::string link_name(const char* prefix, const std::vector<int>& gpus) {
  std::string name = prefix;
  for (std::size_t i = 0; i < gpus.size(); ++i) name += (i == 0 ? "" : "+") + std::to_string(gpus[i]);
  return name;
}

/// Builds each node's hosts and links in the cluster's one star zone. One zone for the whole cluster, not one per
/// node under a fat-tree zone: SimGrid 3.32 checks a new host's name by walking every zone, and a zone's seal lists
/// every host of the engine, so per-node zones made construction quadratic in nodes (5.4 s of 8 s at 16,384 GPUs).
class NodeBuilder {
 public:
  NodeBuilder(sg4::NetZone* zone, const ClusterSpec& cluster, const LinkFigures& figures, std::vector<sg4::Host*>& gpus,
              std::vector<sg4::Host*>& nics, std::vector<Platform::AggregateMap>& aggregates)
      : zone_(zone), cluster_(cluster), f_(figures), gpus_(gpus), nics_(nics), aggregates_(aggregates) {}

  /// One node: its GPU and NIC hosts, links and aggregates. `leaf` (null on a one-node cluster) is the node's link
  /// to the non-blocking switch, split duplex at its GPUs x ib: every route through a NIC crosses it, so a
  /// flow between nodes crosses the source's leaf up and the destination's leaf down, as on a one-level fat-tree.
  void make(int node, const NodeUses& uses, sg4::Link* leaf) {
    const std::string n = std::to_string(node);
    std::map<LinkClass, std::map<int, sg4::Link*>> links;  // by class and GPU: the link it crosses
    for (const auto& [link, sets] : uses.link_sets) {
      const bool nvlink = link == LinkClass::NvLink;
      for (const auto& set : sets) {
        sg4::Link* shared = zone_
                                ->create_split_duplex_link(link_name(nvlink ? "nvlink-" : "ib-", set),
                                                           nvlink ? f_.nvlink_Bps : f_.ib_Bps)
                                ->set_latency(0)
                                ->seal();
        for (int g : set) links[link][g] = shared;
      }
    }
    auto route = [leaf](LinkClass link, std::vector<sg4::Link*> crossed) {
      if (link == LinkClass::InfiniBand && leaf != nullptr) crossed.push_back(leaf);
      return crossed;
    };
    const int domain_size = cluster_.topology().domain_size();
    for (int local = 0; local < domain_size; ++local) {
      const int rank = node * domain_size + local;
      const std::string r = std::to_string(rank);
      sg4::Host* gpu = zone_->create_host("gpu-" + r, Platform::kHostSpeed)->seal();
      add_star_route(zone_, gpu->get_netpoint(), nullptr, {links.at(LinkClass::NvLink).at(rank)});
      sg4::Host* nic = zone_->create_host("nic-" + r, Platform::kHostSpeed)->seal();
      add_star_route(zone_, nic->get_netpoint(), nullptr,
                     route(LinkClass::InfiniBand, {links.at(LinkClass::InfiniBand).at(rank)}));
      gpus_[static_cast<std::size_t>(rank)] = gpu;
      nics_[static_cast<std::size_t>(rank)] = nic;
    }
    int k = 0;
    for (const LinkUse& use : uses.aggregates) {
      std::vector<sg4::Link*> part_links;  // each merged link once, in GPU order (pointer order would vary by run)
      for (int g : use.gpus) {
        sg4::Link* link = links.at(use.link).at(g);
        if (std::find(part_links.begin(), part_links.end(), link) == part_links.end()) part_links.push_back(link);
      }
      const std::string name =
          std::string(use.link == LinkClass::NvLink ? "agg-nv-" : "agg-ib-") + n + "-" + std::to_string(k++);
      sg4::Host* up = zone_->create_host(name + "-up", Platform::kHostSpeed)->seal();
      sg4::Host* down = zone_->create_host(name + "-down", Platform::kHostSpeed)->seal();
      add_star_one_way(zone_, up->get_netpoint(), nullptr, route(use.link, part_links));
      add_star_one_way(zone_, nullptr, down->get_netpoint(), route(use.link, part_links));
      aggregates_[static_cast<std::size_t>(node)][{use.link, use.gpus}] = {up, down};
    }
  }

 private:
  sg4::NetZone* zone_;
  const ClusterSpec& cluster_;
  const LinkFigures& f_;
  std::vector<sg4::Host*>& gpus_;
  std::vector<sg4::Host*>& nics_;
  std::vector<Platform::AggregateMap>& aggregates_;
};

const ClusterSpec& checked(const ClusterSpec& cluster) {
  if (cluster.nodes < 1 || cluster.gpus_per_node < 1) throw std::invalid_argument("platform: empty cluster");
  cluster.topology_kind->check(cluster.shape());
  return cluster;
}

}  // namespace

Platform::Platform(const ClusterSpec& cluster, const std::vector<LinkUse>& uses, bool merge_links)
    : cluster_(checked(cluster)) {
  if (!(cluster.nvlink_GBps > 0) || !(cluster.ib_GBps > 0))
    throw std::invalid_argument("platform: link bandwidths must be positive");
  nvlink_Bps_ = cluster.nvlink_GBps * 1e9;
  ib_Bps_ = cluster.ib_GBps * 1e9;
  const LinkFigures figures{nvlink_Bps_, ib_Bps_};

  const auto world = static_cast<std::size_t>(cluster.world_size());
  gpus_.assign(world, nullptr);
  nics_.assign(world, nullptr);
  const Topology topology = cluster.topology();
  aggregates_.resize(static_cast<std::size_t>(topology.domains()));
  const std::vector<NodeUses> nodes_uses = node_uses(cluster, uses, merge_links);
  nvlink_sharers_.assign(world, 1);
  ib_sharers_.assign(world, 1);
  for (const NodeUses& node : nodes_uses)
    for (const auto& [link, sets] : node.link_sets)
      for (const auto& set : sets)
        for (int g : set)
          (link == LinkClass::NvLink ? nvlink_sharers_ : ib_sharers_)[static_cast<std::size_t>(g)] =
              static_cast<int>(set.size());

  sg4::NetZone* zone = make_star_zone("cluster", nullptr);
  NodeBuilder nodes(zone, cluster, figures, gpus_, nics_, aggregates_);
  for (int node = 0; node < topology.domains(); ++node) {
    sg4::Link* leaf = nullptr;
    if (topology.domains() > 1)
      leaf = zone->create_split_duplex_link("leaf-" + std::to_string(node),
                                            topology.domain_size() * ib_Bps_ * topology.kind().uplink_share())
                 ->set_latency(0)
                 ->seal();
    nodes.make(node, nodes_uses[static_cast<std::size_t>(node)], leaf);
  }
  zone->seal();
}

int Platform::link_sharers(int rank, LinkClass link) const {
  return (link == LinkClass::NvLink ? nvlink_sharers_ : ib_sharers_).at(static_cast<std::size_t>(rank));
}

sg4::Host* Platform::endpoint(int rank, LinkClass link) const {
  if (link_sharers(rank, link) != 1)
    throw std::logic_error("platform: a flow uses GPU " + std::to_string(rank) + "'s " + std::string(to_string(link)) +
                           " link alone, but it is merged with others: the flow was not declared (LinkUse)");
  return link == LinkClass::NvLink ? gpu(rank) : nic(rank);
}

std::pair<sg4::Host*, sg4::Host*> Platform::aggregate(const std::vector<int>& gpus, LinkClass link) const {
  if (gpus.empty()) return {nullptr, nullptr};
  const auto node = static_cast<std::size_t>(cluster_.topology().domain_of(gpus.front()));
  if (node >= aggregates_.size()) return {nullptr, nullptr};
  const auto it = aggregates_[node].find({link, gpus});
  if (it == aggregates_[node].end()) return {nullptr, nullptr};
  return it->second;
}

}  // namespace lcsim::sim
