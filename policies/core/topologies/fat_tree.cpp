// fat-tree: nodes of gpus_per_node GPUs on NVSwitch, one NIC per GPU, nodes on a non-blocking fat-tree. A
// collective across nodes runs at one NIC's bandwidth per GPU (the conservative reading of NCCL on such nodes:
// rail-optimized is the kind whose rings spread over the NICs). No keys of its own.
#include "policies/core/json_reader.hpp"
#include "policies/core/topology.hpp"

namespace lcsim {

std::shared_ptr<const TopologyKind> read_fat_tree(JsonObjectReader&) {
  return FatTree::shared();
}

}  // namespace lcsim
