#include "policies/core/topology.hpp"

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

LinkClass Topology::link_class(std::span<const int> group) const {
  if (group.empty()) throw std::invalid_argument("link_class: empty GPU group");
  const int world = world_size();
  for (const int index : group)
    if (index < 0 || index >= world)
      throw std::out_of_range("link_class: GPU " + std::to_string(index) + " outside a cluster of " +
                              std::to_string(world) + " GPUs");
  const int domain = domain_of(group.front());
  for (const int index : group)
    if (domain_of(index) != domain) return LinkClass::InfiniBand;
  return LinkClass::NvLink;
}

}  // namespace lcsim
