// Collectives as flows that load each link as NCCL's schedule would, collapsed to one flow per rank or per node;
// exclusive groups timed in closed form. Derivation: docs/simulation.md, "Collectives as flows".
#include "engine/simgrid_collectives.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>

#include "base/check.hpp"

namespace lcsim::sim {
namespace {

std::uint64_t flow_bytes(const Platform& platform, LinkClass link, double transfer_s) {
  if (!(transfer_s > 0)) return 0;
  return static_cast<std::uint64_t>(std::llround(transfer_s * platform.bandwidth(link)));
}

/// The members split by NVLink domain (a node), in order of GPU index.
std::vector<std::vector<int>> node_parts(const Topology& topology, std::vector<int> gpus) {
  std::sort(gpus.begin(), gpus.end());
  std::vector<std::vector<int>> parts;
  for (int g : gpus) {
    if (parts.empty() || !topology.same_domain(parts.back().front(), g)) parts.emplace_back();
    parts.back().push_back(g);
  }
  return parts;
}

/// Ring attention spanning nodes: one flow per hop, over NVLink within a node and the NICs between nodes.
std::vector<FlowShape> ring_hops(const Topology& topology, const std::vector<int>& gpus) {
  std::vector<FlowShape> shapes;
  for (std::size_t k = 0; k < gpus.size(); ++k) {
    const int from = gpus[k];
    const int to = gpus[(k + 1) % gpus.size()];
    const LinkClass hop = topology.same_domain(from, to) ? LinkClass::NvLink : LinkClass::InfiniBand;
    shapes.push_back({hop, {from}, {to}});
  }
  return shapes;
}

/// One flow per node part when the parts are the same size: part i sends to part i + 1 (to itself on one node).
std::vector<FlowShape> part_flows(const Topology& topology, const std::vector<int>& gpus, LinkClass link) {
  const std::vector<std::vector<int>> parts = node_parts(topology, gpus);
  for (const auto& part : parts)
    if (part.size() != parts.front().size()) return {};
  std::vector<FlowShape> shapes;
  for (std::size_t i = 0; i < parts.size(); ++i) shapes.push_back({link, parts[i], parts[(i + 1) % parts.size()]});
  return shapes;
}

/// One flow per member to the member `shift` places on (header comment).
std::vector<FlowShape> member_flows(const Topology& topology, const std::vector<int>& gpus, LinkClass link) {
  const std::size_t n = gpus.size();
  std::size_t shift = 1;
  if (link == LinkClass::InfiniBand) {
    const auto same_node = static_cast<std::size_t>(
        std::count_if(gpus.begin(), gpus.end(), [&](int g) { return topology.same_domain(g, gpus.front()); }));
    if (same_node < n) shift = same_node;
  }
  std::vector<FlowShape> shapes;
  for (std::size_t k = 0; k < n; ++k) shapes.push_back({link, {gpus[k]}, {gpus[(k + shift) % n]}});
  return shapes;
}

bool is_transfer(program::WorkKind kind) {
  return kind == program::WorkKind::PpActivation || kind == program::WorkKind::PpGradient;
}

/// The host a flow end leaves from (`up`) or enters through: the GPU's endpoint, or the part's aggregate
/// (nullptr when the platform has none).
sg4::Host* end_host(const Platform& platform, const std::vector<int>& gpus, LinkClass link, bool up) {
  if (gpus.size() == 1) return platform.endpoint(gpus.front(), link);
  const auto agg = platform.aggregate(gpus, link);
  return up ? agg.first : agg.second;
}

}  // namespace

std::vector<FlowShape> flow_shapes(const Topology& topology, const std::vector<int>& gpus, LinkClass link,
                                   program::WorkKind kind, bool aggregate) {
  if (gpus.size() <= 1) return {};
  if (is_transfer(kind)) {
    LCSIM_CHECK(gpus.size() == 2, "a transfer is a pair (from, to)");
    return {{link, {gpus[0]}, {gpus[1]}}};
  }
  if (kind == program::WorkKind::CpRing && link == LinkClass::InfiniBand) return ring_hops(topology, gpus);
  // An aggregate loads a node's uplink once for all its members: right only while the uplink never binds.
  if (link == LinkClass::InfiniBand && topology.kind().uplink_share() < 1.0) aggregate = false;
  if (aggregate) {
    std::vector<FlowShape> shapes = part_flows(topology, gpus, link);
    if (!shapes.empty()) return shapes;
  }
  return member_flows(topology, gpus, link);
}

std::vector<LinkUse> link_uses(const ClusterSpec& cluster, const std::vector<int>& gpus, program::WorkKind kind) {
  std::vector<LinkUse> uses;
  const auto topology = cluster.topology();
  for (const FlowShape& shape : flow_shapes(topology, gpus, topology.link_class(gpus), kind, true)) {
    uses.push_back({shape.link, shape.from});
    uses.push_back({shape.link, shape.to});
  }
  return uses;
}

namespace {

/// The ends of the flows of a collective of `kind` over `gpus` on `link`.
std::vector<FlowPlan::Flow> flow_ends(const Platform& platform, const std::vector<int>& gpus, LinkClass link,
                                      program::WorkKind kind) {
  std::vector<FlowPlan::Flow> flows;
  const auto ends = [&](const std::vector<FlowShape>& shapes) {
    flows.clear();
    for (const FlowShape& shape : shapes) {
      FlowPlan::Flow flow{end_host(platform, shape.from, shape.link, true),
                          end_host(platform, shape.to, shape.link, false)};
      if (flow.from == nullptr || flow.to == nullptr) return false;
      flows.push_back(flow);
    }
    return true;
  };
  // Per-node flows need the parts' aggregates; a group the platform was not told of gets one flow per member.
  if (!ends(flow_shapes(platform.topology(), gpus, link, kind, true)))
    ends(flow_shapes(platform.topology(), gpus, link, kind, false));
  return flows;
}

std::uint64_t spec_bytes(const Platform& platform, const program::CollectiveSpec& spec) {
  return spec.gpus.size() > 1 ? flow_bytes(platform, spec.link, spec.time.transfer_s * spec.flow_scale) : 0;
}

}  // namespace

FlowPlan plan_flows(const Platform& platform, const program::CollectiveSpec& spec) {
  FlowPlan plan;
  plan.bytes = spec_bytes(platform, spec);
  plan.delay_s = spec.time.latency_s;
  if (plan.bytes > 0) plan.flows = flow_ends(platform, spec.gpus, spec.link, spec.kind);
  return plan;
}

std::set<std::vector<int>> exclusive_groups(const ClusterSpec& cluster, const std::vector<program::FlowGroup>& groups) {
  // Each distinct GPU set gets an id; each GPU's link of each class remembers the first set crossing it, and a
  // second set crossing it marks both shared. Linear in the groups' uses, however large the sets.
  std::map<std::vector<int>, int> ids;
  std::vector<char> shared;
  constexpr int kNone = -1;
  const auto world = static_cast<std::size_t>(cluster.world_size());
  std::map<LinkClass, std::vector<int>> first_set;  // by class, by GPU: the first set crossing its link
  for (LinkClass link : {LinkClass::NvLink, LinkClass::InfiniBand}) first_set[link].assign(world, kNone);
  // On an oversubscribed fabric a domain's uplink binds too: by domain, the first set crossing it.
  const Topology topology = cluster.topology();
  const bool uplinks_bind = topology.kind().uplink_share() < 1.0;
  std::vector<int> first_uplink(static_cast<std::size_t>(topology.domains()), kNone);
  const auto cross = [&](int& first, int id) {
    if (first == kNone) {
      first = id;
    } else if (first != id) {
      shared[static_cast<std::size_t>(first)] = 1;
      shared[static_cast<std::size_t>(id)] = 1;
    }
  };
  for (const program::FlowGroup& group : groups) {
    std::vector<int> set = group.gpus;
    std::sort(set.begin(), set.end());
    set.erase(std::unique(set.begin(), set.end()), set.end());
    if (set.size() < 2) continue;
    const auto [found, added] = ids.try_emplace(std::move(set), static_cast<int>(ids.size()));
    if (added) shared.push_back(0);
    const int id = found->second;
    for (const LinkUse& use : link_uses(cluster, group.gpus, group.kind))
      for (int g : use.gpus) {
        cross(first_set[use.link].at(static_cast<std::size_t>(g)), id);
        if (uplinks_bind && use.link == LinkClass::InfiniBand)
          cross(first_uplink.at(static_cast<std::size_t>(topology.domain_of(g))), id);
      }
  }
  std::set<std::vector<int>> exclusive;
  for (const auto& [set, id] : ids)
    if (!shared[static_cast<std::size_t>(id)]) exclusive.insert(set);
  return exclusive;
}

std::size_t FlowCache::KeyHash::operator()(const Key& key) const {
  std::size_t h = static_cast<std::size_t>(key.link) * 31 + static_cast<std::size_t>(key.kind);
  for (int g : key.gpus) h = h * 1000003 + static_cast<std::size_t>(g);
  return h;
}

FlowCache::FlowCache(const Platform& platform, const std::set<std::vector<int>>& exclusive) : platform_(platform) {
  for (const auto& set : exclusive) exclusive_.emplace(set, 0.0);
}

FlowCache::Group& FlowCache::group(const program::CollectiveSpec& spec) {
  key_.link = spec.link;
  key_.kind = spec.kind;
  key_.gpus.assign(spec.gpus.begin(), spec.gpus.end());
  const auto found = groups_.find(key_);
  if (found != groups_.end()) return found->second;
  std::vector<int> sorted = spec.gpus;
  std::sort(sorted.begin(), sorted.end());
  const auto set = exclusive_.find(sorted);
  Group group{flow_ends(platform_, spec.gpus, spec.link, spec.kind), set != exclusive_.end(),
              set != exclusive_.end() ? &set->second : nullptr};
  return groups_.emplace(key_, std::move(group)).first->second;
}

bool CollectiveRun::arrive(const program::CollectiveSpec& spec, int member, double ready, std::size_t gpus) {
  LCSIM_CHECK(arrived_ + gpus <= std::max<std::size_t>(1, spec.gpus.size()), "more arrivals than members");
  if (members_.empty()) members_.reserve(spec.gpus.size());
  members_.push_back(member);
  arrived_ += gpus;
  ready_ = members_.size() == 1 ? ready : std::max(ready_, ready);
  return arrived_ >= spec.gpus.size();
}

bool CollectiveRun::immediate(FlowCache& flows, const program::CollectiveSpec& spec) {
  return spec.gpus.size() <= 1 || spec_bytes(flows.platform(), spec) == 0 || group(flows, spec).exclusive;
}

CommInterval CollectiveRun::run(FlowCache& flows, const program::CollectiveSpec& spec) {
  // One GPU: nothing to exchange on the wire, but the cost model may still charge the time (a sharding group of
  // one GPU that the estimate sizes for more): a local delay, no link used.
  if (spec.gpus.size() <= 1) return {ready_, ready_ + spec.time.seconds()};
  run_flows(flows, spec);
  return interval_;
}

void CollectiveRun::run_flows(FlowCache& flows, const program::CollectiveSpec& spec) {
  interval_.start = std::max(ready_, sg4::Engine::get_clock());
  const std::uint64_t bytes = spec_bytes(flows.platform(), spec);
  const double delay_s = spec.time.latency_s;
  if (bytes == 0) {
    // Nothing on the wire: the collective is its latency (or a pure barrier); no need to wait for it here.
    interval_.end = interval_.start + delay_s;
    return;
  }
  FlowCache::Group& cached = group(flows, spec);
  if (cached.exclusive) {
    // Nothing else can use its links, so its flows run alone whatever else happens: each moves its bytes at the
    // link bandwidth. The time is known now; no flow to simulate, nothing to wait for.
    if (interval_.start < *cached.busy_until)
      throw std::logic_error("collectives: a collective over GPUs " + std::to_string(spec.gpus.front()) +
                             ".. starts at " + std::to_string(interval_.start) + " s, before the previous one over " +
                             "the same GPUs ends (" + std::to_string(*cached.busy_until) +
                             " s): they would share links, so it cannot be timed in closed form");
    interval_.end = interval_.start + delay_s +
                    static_cast<double>(bytes) / (flows.platform().bandwidth(spec.link) * spec.flow_scale);
    *cached.busy_until = interval_.end;
    return;
  }
  LCSIM_CHECK(std::isfinite(interval_.start + delay_s), "a collective's start is not finite");  // SimGrid would abort
  if (interval_.start + delay_s > sg4::Engine::get_clock()) sg4::this_actor::sleep_until(interval_.start + delay_s);
  const std::vector<FlowPlan::Flow>& ends = cached.flows;
  if (ends.size() == 1) {  // the common case with aggregates: no list of one
    start_flow(ends.front().from, ends.front().to, bytes)->wait();
  } else {
    std::vector<sg4::CommPtr> comms;
    comms.reserve(ends.size());
    for (const auto& flow : ends) comms.push_back(start_flow(flow.from, flow.to, bytes));
    wait_all(comms);
  }
  interval_.end = sg4::Engine::get_clock();
}

sg4::CommPtr TransferRun::start(const Platform& platform, const program::TransferSpec& spec) {
  start_ = sg4::Engine::get_clock();
  const std::uint64_t bytes = flow_bytes(platform, spec.link, spec.time.transfer_s);
  if (bytes == 0) return nullptr;
  return start_flow(platform.endpoint(spec.from, spec.link), platform.endpoint(spec.to, spec.link), bytes);
}

void TransferRun::send(const Platform& platform, const program::TransferSpec& spec) {
  if (receiver_waiting_) {
    comm_ = start(platform, spec);
    ready_->release();
  } else {
    sent_ = true;
  }
}

CommInterval TransferRun::receive(const Platform& platform, const program::TransferSpec& spec) {
  if (sent_) {
    comm_ = start(platform, spec);
  } else {
    receiver_waiting_ = true;
    ready_ = sg4::Semaphore::create(0);
    ready_->acquire();
  }
  // The latency is paid after the data, on the receiver: alone, the transfer takes L + T.
  if (comm_ != nullptr) comm_->wait();
  LCSIM_CHECK(std::isfinite(spec.time.latency_s), "a transfer's latency is not finite");  // SimGrid would abort
  if (spec.time.latency_s > 0) sg4::this_actor::sleep_for(spec.time.latency_s);
  return {start_, sg4::Engine::get_clock()};
}

}  // namespace lcsim::sim
