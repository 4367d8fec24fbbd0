#include "policies/core/cluster.hpp"

#include <stdexcept>
#include <string>

namespace lcsim {

std::string_view to_string(LinkClass link) {
  switch (link) {
    case LinkClass::NvLink:
      return "nvlink";
    case LinkClass::InfiniBand:
      return "infiniband";
  }
  throw std::invalid_argument("to_string: invalid LinkClass value");
}

LinkClass ClusterSpec::link_class(std::span<const int> group) const {
  // An empty group or a GPU outside the cluster is a caller bug (plans are validated before they are costed).
  if (group.empty()) throw std::invalid_argument("link_class: empty GPU group");
  for (const int index : group)
    if (index < 0 || index >= world_size())
      throw std::out_of_range("link_class: GPU " + std::to_string(index) + " outside a cluster of " +
                              std::to_string(world_size()) + " GPUs");
  const int node = node_of(group.front());
  for (const int index : group)
    if (node_of(index) != node) return LinkClass::InfiniBand;
  return LinkClass::NvLink;
}

}  // namespace lcsim
