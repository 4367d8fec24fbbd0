#pragma once
// Cluster shape and link figures as the scenario gives them; the topology they describe answers the questions of
// shape (policies/core/topology.hpp).
#include <string>

#include "policies/core/model.hpp"
#include "policies/core/topology.hpp"

namespace lcsim {

struct ClusterSpec {
  GpuKind gpu;
  int nodes = 1;
  int gpus_per_node = 8;
  double nvlink_GBps = 0;  ///< per GPU per direction
  double nvlink_latency_us = 0;
  double ib_GBps = 0;  ///< per NIC (one NIC per GPU) per direction
  double ib_latency_us = 0;
  std::string topology_name = "fat-tree";  ///< the scenario's cluster.topology

  int world_size() const { return nodes * gpus_per_node; }
  /// The shape these fields describe. A value today (the fat-tree is two integers); callers write
  /// `cluster.topology().domain_of(g)`, which stays the same when a registered topology is held here instead.
  FatTree topology() const { return FatTree(nodes, gpus_per_node); }
};

}  // namespace lcsim
