#pragma once
// Cluster shape and link figures as the scenario gives them; the topology they describe answers the questions of
// shape (model/topology.hpp).
#include <memory>
#include <string>

#include "model/model.hpp"
#include "model/topology.hpp"

namespace lcsim {

struct ClusterSpec {
  GpuKind gpu;
  int nodes = 1;
  int gpus_per_node = 8;
  double nvlink_GBps = 0;  ///< per GPU per direction
  double nvlink_latency_us = 0;
  double ib_GBps = 0;  ///< per NIC (one NIC per GPU) per direction
  double ib_latency_us = 0;
  /// The parts' dense tensor-core peak over their kind's datasheet peak (scenario cluster.peak_tflops): below 1 where
  /// a power limit holds the SM clock down. GEMMs and attention run at the profile's rates times it.
  double tensor_peak_share = 1.0;
  /// The scenario's cluster.topology with its parameters; copies share it.
  std::shared_ptr<const TopologyKind> topology_kind = FatTree::shared();

  int world_size() const { return nodes * gpus_per_node; }
  ClusterShape shape() const { return {nodes, gpus_per_node}; }
  /// The kind over this spec's nodes.
  Topology topology() const { return Topology(topology_kind, shape()); }
};

}  // namespace lcsim
