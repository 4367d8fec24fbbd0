#pragma once
// Cluster shape: nodes of GPUs joined by NVSwitch, nodes joined by an InfiniBand fat-tree (one NIC per GPU).
#include <span>
#include <string>

#include "policies/core/model.hpp"

namespace lcsim {

enum class LinkClass { NvLink, InfiniBand };
std::string_view to_string(LinkClass link);

struct ClusterSpec {
  GpuKind gpu;
  int nodes = 1;
  int gpus_per_node = 8;
  double nvlink_GBps = 0;        ///< per GPU per direction
  double nvlink_latency_us = 0;
  double ib_GBps = 0;            ///< per NIC (one NIC per GPU) per direction
  double ib_latency_us = 0;
  std::string topology = "fat-tree";

  int world_size() const { return nodes * gpus_per_node; }
  int node_of(int gpu_index) const { return gpu_index / gpus_per_node; }
  /// NvLink when every GPU of the group is on one node, else InfiniBand.
  LinkClass link_class(std::span<const int> group) const;
};

}  // namespace lcsim
