// nvlink-domain: NVLink domains larger than a node, e.g. GB200 NVL72 (18 trays of 4 GPUs, 72 GPUs on one NVLink
// switch fabric). GPUs of a domain talk over NVLink at the cluster's nvlink_GBps whatever their node; domains are
// joined by one NIC per GPU. NCCL spreads a ring over the NICs of a domain's members as on rail-optimized nodes (the
// domain's NVLink reaches every NIC), and an all-to-all stays at one NIC per GPU. `domain_gpus` (required) is a whole
// number of nodes and the cluster a whole number of domains. The NVLink figure stays the cluster's nvlink_GBps: one
// number per link.
#include <string>

#include "base/json_reader.hpp"
#include "model/topology.hpp"
#include "model/topology_error.hpp"

namespace lcsim {
namespace {

class NvlinkDomain final : public TopologyKind {
 public:
  explicit NvlinkDomain(int domain_gpus) : domain_gpus_(domain_gpus) {}
  std::string_view name() const override { return "nvlink-domain"; }
  int domain_size(const ClusterShape&) const override { return domain_gpus_; }
  bool shapes_collectives() const override { return true; }
  CollectivePath network_path(const ClusterShape&, CollectiveOp op, const GroupLayout& group) const override {
    return spread_over_nics(op, group, false, domain_gpus_);
  }

  void check(const ClusterShape& shape) const override {
    TopologyKind::check(shape);
    if (domain_gpus_ % shape.gpus_per_node != 0)
      throw TopologyKeyError("domain_gpus", "domain_gpus (" + std::to_string(domain_gpus_) +
                                                ") is not a whole number of nodes of " +
                                                std::to_string(shape.gpus_per_node) + " GPUs");
    if (shape.world_size() % domain_gpus_ != 0)
      throw TopologyKeyError("domain_gpus", "the cluster's " + std::to_string(shape.world_size()) +
                                                " GPUs are not a whole number of domains of " +
                                                std::to_string(domain_gpus_));
  }

  std::vector<std::string> describe() const override { return {"domain_gpus = " + std::to_string(domain_gpus_)}; }

 private:
  int domain_gpus_;
};

}  // namespace

std::shared_ptr<const TopologyKind> read_nvlink_domain(JsonObjectReader& cluster) {
  return std::make_shared<const NvlinkDomain>(static_cast<int>(cluster.integer_in("domain_gpus", 1, 1 << 20)));
}

}  // namespace lcsim
