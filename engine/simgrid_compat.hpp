#pragma once
// Every SimGrid call whose spelling changed across releases goes through this header, so a SimGrid upgrade edits
// one file. Written against SimGrid 3.32 (Debian 12): zones are created free-standing and then attached with
// set_parent(); star-zone routes are add_route(netpoint, nullptr, gateway, nullptr, links); there is no
// ActivitySet yet, so waiting on several communications is Comm::wait_all.
// s4u.hpp first: version.h and log.h rely on the macros it defines (sorting would break them).
#include <simgrid/s4u.hpp>
//
#include <simgrid/version.h>
#include <xbt/log.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#if SIMGRID_VERSION < 33200
#error "lcsim needs SimGrid 3.32 or newer"
#endif

namespace lcsim::sim {

namespace sg4 = simgrid::s4u;

/// Silences SimGrid's informational log lines ("Configuration change: ..."); warnings and errors still print.
inline void quiet_simgrid_logs() {
  xbt_log_control_set("root.thresh:warning");
}

/// The network model lcsim's timings assume: CM02 max-min sharing with every calibration factor 1 (the TCP
/// defaults, 0.97 on bandwidth and 13.01 on latency, would distort links that the profile already calibrates), no
/// cross-traffic (acknowledgement flows: 14x slower at 1024 GPUs, and GPU fabrics have none), no TCP window bound
/// (TCP-gamma 0) and no RTT-dependent weights (weight-S 0: flows of a link share it equally).
inline void set_network_model() {
  sg4::Engine::set_config("network/model:CM02");
  sg4::Engine::set_config("network/bandwidth-factor:1");
  sg4::Engine::set_config("network/latency-factor:1");
  sg4::Engine::set_config("network/crosstraffic:0");
  sg4::Engine::set_config("network/TCP-gamma:0");
  sg4::Engine::set_config("network/weight-S:0");
}

/// Actor stacks: lcsim's actors are shallow loops, so `kib` KiB instead of 8 MiB, and no guard page: with one
/// protected page per stack, switching among 1024 actors thrashes the TLB (measured: a barrier-and-switch round
/// cost 0.63 us per actor at 1024 actors with guard pages, 0.35 us without; 0.37 and 0.26 us at 256). The cost of
/// that choice is that a stack overflow would corrupt memory instead of faulting, hence a size well above the
/// measured need (engine/executor.cpp). SimGrid allocates stacks zeroed, so a larger size also costs time up front.
inline void set_actor_stacks(int kib) {
  sg4::Engine::set_config("contexts/stack-size:" + std::to_string(kib));
  sg4::Engine::set_config("contexts/guard-size:0");
}

inline sg4::NetZone* make_star_zone(const std::string& name, const sg4::NetZone* parent) {
  sg4::NetZone* zone = sg4::create_star_zone(name);
  if (parent != nullptr) zone->set_parent(parent);
  return zone;
}

/// A star-zone route used by every communication leaving `point` (and, symmetrically, entering it): through
/// `links` in the UP direction, then through `gateway` when it leaves the zone.
inline void add_star_route(sg4::NetZone* zone, simgrid::kernel::routing::NetPoint* point,
                           simgrid::kernel::routing::NetPoint* gateway, const std::vector<sg4::Link*>& links) {
  std::vector<sg4::LinkInRoute> route;
  for (sg4::Link* link : links) route.emplace_back(link, sg4::LinkInRoute::Direction::UP);
  zone->add_route(point, nullptr, gateway, nullptr, route, true);
}

/// A one-way star-zone route: from `source` to everyone through `links` (UP direction), or, with `source` null,
/// from everyone to `destination` through `links` (DOWN direction).
inline void add_star_one_way(sg4::NetZone* zone, simgrid::kernel::routing::NetPoint* source,
                             simgrid::kernel::routing::NetPoint* destination, const std::vector<sg4::Link*>& links) {
  const auto direction = source != nullptr ? sg4::LinkInRoute::Direction::UP : sg4::LinkInRoute::Direction::DOWN;
  std::vector<sg4::LinkInRoute> route;
  for (sg4::Link* link : links) route.emplace_back(link, direction);
  zone->add_route(source, destination, nullptr, nullptr, route, false);
}

inline sg4::CommPtr start_flow(sg4::Host* from, sg4::Host* to, std::uint64_t bytes) {
  return sg4::Comm::sendto_async(from, to, bytes);
}

inline void wait_all(const std::vector<sg4::CommPtr>& comms) {
  // 3.32's Comm::wait_all waits on each in turn; so does this, one wait per flow.
  for (const auto& comm : comms) comm->wait();
}

}  // namespace lcsim::sim
