// rail-optimized: one NIC per GPU, NIC i of every node on rail switch i (DGX H100 and most H100/H200 clusters).
// NCCL builds one ring (channel) per NIC and moves data between a node's GPUs over NVLink, so a ring collective
// over k GPUs per node crosses the network on k NICs at once: its bus bandwidth is k NICs', not one. Published
// nccl-tests on such nodes (docs/published-measurements/SOURCES.md) read about 98, 196 and 324-364 GB/s busbw at
// 2, 4 and 8 GPUs per node on 400 Gb/s NICs. An all-to-all has no ring to spread: each GPU sends through its own
// NIC, unless PXN routes a message over NVLink to the GPU on the destination's rail first, which spreads a node's
// all-to-all over all its NICs (`pxn`, default false). Derivation and checks: docs/topology.md.
#include <string>

#include "base/json_reader.hpp"
#include "model/topology.hpp"

namespace lcsim {
namespace {

class RailOptimized final : public TopologyKind {
 public:
  explicit RailOptimized(bool pxn) : pxn_(pxn) {}
  std::string_view name() const override { return "rail-optimized"; }
  bool shapes_collectives() const override { return true; }

  CollectivePath network_path(const ClusterShape& shape, CollectiveOp op, const GroupLayout& group) const override {
    return spread_over_nics(op, group, pxn_, shape.gpus_per_node);  // a node is a domain
  }

  std::vector<std::string> describe() const override { return {std::string("pxn = ") + (pxn_ ? "true" : "false")}; }

 private:
  bool pxn_;
};

}  // namespace

std::shared_ptr<const TopologyKind> read_rail_optimized(JsonObjectReader& cluster) {
  return std::make_shared<const RailOptimized>(cluster.optional<bool>("pxn", false));
}

}  // namespace lcsim
