// fat-tree: nodes of gpus_per_node GPUs on NVSwitch, one NIC per GPU, nodes on a fat-tree. A collective across
// nodes runs at one NIC's bandwidth per GPU (the conservative reading of NCCL on such nodes: rail-optimized is the
// kind whose rings spread over the NICs). `oversubscription` (default 1, non-blocking): the ratio of a node's NIC
// bandwidth to what the fabric above it carries, e.g. 2 for a 2:1 spine; every node is its own leaf.
#include "base/json_reader.hpp"
#include "model/topology.hpp"

namespace lcsim {

std::shared_ptr<const TopologyKind> read_fat_tree(JsonObjectReader& cluster) {
  if (!cluster.has("oversubscription")) return FatTree::shared();
  const double ratio = cluster.number_in("oversubscription", 1.0, 64.0);
  return ratio == 1.0 ? FatTree::shared() : std::make_shared<const FatTree>(ratio);
}

}  // namespace lcsim
