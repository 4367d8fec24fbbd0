// The registered topologies: their shape (domains, nodes), the path each gives a collective, the cost model's
// collective times on them against published nccl-tests, and whole scenarios that plan and simulate on each.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/files.hpp"
#include "base/json_reader.hpp"
#include "flat_profile_fixtures.hpp"
#include "formats/scenario_loader.hpp"
#include "model/cost_model.hpp"
#include "model/topology.hpp"
#include "studies/evaluation.hpp"

namespace lcsim {
namespace topology_test {

using testing::flat_compute_profile;
using testing::flat_tiny_cluster;
using testing::flat_tiny_model;

/// The kind `name` read from a cluster object holding `keys`, as the scenario reader builds it.
std::shared_ptr<const TopologyKind> read_kind(const std::string& name,
                                              const nlohmann::json& keys = nlohmann::json::object()) {
  const TopologyEntry* entry = find_topology(name);
  EXPECT_NE(entry, nullptr) << name;
  JsonObjectReader reader(keys, "test.json", "cluster");
  auto kind = entry->read(reader);
  reader.finish();
  return kind;
}

ClusterSpec cluster_of(const std::string& kind, int nodes, int gpus_per_node,
                       const nlohmann::json& keys = nlohmann::json::object()) {
  ClusterSpec c = flat_tiny_cluster(nodes, gpus_per_node);
  c.nvlink_GBps = 360;
  c.ib_GBps = 48.8;
  c.topology_kind = read_kind(kind, keys);
  c.topology_kind->check(c.shape());
  return c;
}

/// GPUs `first..first+count-1` of every node in `nodes`, with `per_node` GPUs per node.
std::vector<int> members(std::vector<int> nodes, int per_node, int first, int count) {
  std::vector<int> group;
  for (int n : nodes)
    for (int g = first; g < first + count; ++g) group.push_back(n * per_node + g);
  return group;
}

TEST(Topology, RegistryNamesEveryKindOnce) {
  std::vector<std::string> names;
  for (const TopologyEntry& e : topology_kinds()) names.emplace_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"fat-tree", "rail-optimized", "nvlink-domain"}));
  EXPECT_EQ(find_topology("torus"), nullptr);
  const ClusterSpec by_default = flat_tiny_cluster(1, 8);
  EXPECT_EQ(by_default.topology().name(), "fat-tree");
}

TEST(Topology, FatTreeGivesEveryCollectiveOneNicPerGpu) {
  const Topology t = cluster_of("fat-tree", 4, 8).topology();
  for (CollectiveOp op : {CollectiveOp::AllReduce, CollectiveOp::AllGather, CollectiveOp::AllToAll}) {
    const CollectivePath path = t.collective_path(op, members({0, 1, 2, 3}, 8, 0, 8));
    EXPECT_EQ(path.link, LinkClass::InfiniBand);
    EXPECT_EQ(path.bandwidth_scale, 1.0);
  }
  EXPECT_EQ(t.collective_path(CollectiveOp::AllReduce, members({2}, 8, 0, 8)).link, LinkClass::NvLink);
}

TEST(Topology, AnOversubscribedFatTreeSharesANodesUplinkAmongItsMembers) {
  const Topology t = cluster_of("fat-tree", 4, 8, {{"oversubscription", 2}}).topology();
  EXPECT_EQ(t.kind().uplink_share(), 0.5);
  for (CollectiveOp op : {CollectiveOp::AllReduce, CollectiveOp::AllToAll}) {
    EXPECT_EQ(t.collective_path(op, members({0, 1}, 8, 0, 8)).bandwidth_scale, 0.5);  // 8 members, 4 NICs' worth
    EXPECT_EQ(t.collective_path(op, members({0, 1, 2}, 8, 0, 4)).bandwidth_scale, 1.0);
    EXPECT_EQ(t.collective_path(op, members({0, 3}, 8, 2, 1)).bandwidth_scale, 1.0);
    // The busiest node bounds it: 8 members on node 0, 1 on node 1.
    EXPECT_EQ(t.collective_path(op, std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8}).bandwidth_scale, 0.5);
  }
  EXPECT_EQ(t.collective_path(CollectiveOp::SendRecv, std::vector<int>{0, 8}).bandwidth_scale, 1.0);
  EXPECT_EQ(t.aligned_path(CollectiveOp::AllReduce, 32, LinkClass::InfiniBand).bandwidth_scale, 0.5);
  const Topology four = cluster_of("fat-tree", 4, 8, {{"oversubscription", 4}}).topology();
  EXPECT_EQ(four.collective_path(CollectiveOp::AllGather, members({0, 1}, 8, 0, 4)).bandwidth_scale, 0.5);
  EXPECT_EQ(cluster_of("fat-tree", 4, 8, {{"oversubscription", 1}}).topology_kind, FatTree::shared());
  EXPECT_THROW(read_kind("fat-tree", {{"oversubscription", 0.5}}), InputError);
  EXPECT_THROW(FatTree(0.9), std::invalid_argument);
}

TEST(Topology, RailOptimizedRingsSpreadOverTheNicsOfTheLeastPopulatedNode) {
  const Topology t = cluster_of("rail-optimized", 4, 8).topology();
  for (int k : {1, 2, 4, 8}) {
    const std::vector<int> group = members({0, 1, 2, 3}, 8, 0, k);
    EXPECT_EQ(t.collective_path(CollectiveOp::AllReduce, group).bandwidth_scale, k) << k << " per node";
    EXPECT_EQ(t.collective_path(CollectiveOp::ReduceScatter, group).bandwidth_scale, k);
    EXPECT_EQ(t.collective_path(CollectiveOp::AllToAll, group).bandwidth_scale, 1.0) << "no PXN: one NIC each";
    EXPECT_EQ(t.collective_path(CollectiveOp::SendRecv, group).bandwidth_scale, 1.0);
  }
  // 4 GPUs on node 0, 1 on node 1: every ring crosses node 1's one NIC.
  EXPECT_EQ(t.collective_path(CollectiveOp::AllGather, std::vector<int>{0, 1, 2, 3, 8}).bandwidth_scale, 1.0);
  // 3 and 2 per node, members unsorted.
  EXPECT_EQ(t.collective_path(CollectiveOp::AllGather, std::vector<int>{17, 2, 16, 0, 1}).bandwidth_scale, 2.0);
  // Within a node: NVLink, whatever the kind.
  const CollectivePath inside = t.collective_path(CollectiveOp::AllReduce, members({1}, 8, 0, 8));
  EXPECT_EQ(inside.link, LinkClass::NvLink);
  EXPECT_EQ(inside.bandwidth_scale, 1.0);
}

TEST(Topology, RailOptimizedPxnSpreadsAllToAllOverTheNodesNics) {
  const Topology t = cluster_of("rail-optimized", 4, 8, {{"pxn", true}}).topology();
  EXPECT_EQ(t.collective_path(CollectiveOp::AllToAll, members({0, 1, 2, 3}, 8, 0, 2)).bandwidth_scale, 4.0);
  EXPECT_EQ(t.collective_path(CollectiveOp::AllToAll, members({0, 1}, 8, 0, 8)).bandwidth_scale, 1.0);
  // The most populated node bounds it: 4 members share its 8 NICs.
  EXPECT_EQ(t.collective_path(CollectiveOp::AllToAll, std::vector<int>{0, 1, 2, 3, 8}).bandwidth_scale, 2.0);
}

TEST(Topology, AlignedPathsAreWholeNodesFromANodesStart) {
  const Topology t = cluster_of("rail-optimized", 4, 8).topology();
  EXPECT_EQ(t.aligned_path(CollectiveOp::AllReduce, 32, LinkClass::InfiniBand).bandwidth_scale, 8.0);
  EXPECT_EQ(t.aligned_path(CollectiveOp::AllReduce, 12, LinkClass::InfiniBand).bandwidth_scale, 4.0);
  EXPECT_EQ(t.aligned_path(CollectiveOp::AllReduce, 4, LinkClass::InfiniBand).bandwidth_scale, 1.0)
      << "a group no larger than a node on the network has one GPU per node";
  EXPECT_EQ(t.aligned_path(CollectiveOp::AllReduce, 32, LinkClass::NvLink).bandwidth_scale, 1.0);
  EXPECT_THROW(t.aligned_path(CollectiveOp::AllReduce, 0, LinkClass::InfiniBand), std::invalid_argument);
}

TEST(Topology, NvlinkDomainsSpanNodes) {
  const ClusterSpec c = cluster_of("nvlink-domain", 36, 4, {{"domain_gpus", 72}});
  const Topology t = c.topology();
  EXPECT_EQ(t.domain_size(), 72);
  EXPECT_EQ(t.domains(), 2);
  EXPECT_EQ(t.domain_of(71), 0);
  EXPECT_EQ(t.domain_of(72), 1);
  EXPECT_EQ(t.node_of(71), 17);
  EXPECT_EQ(t.link_class(std::vector<int>{0, 4, 40, 71}), LinkClass::NvLink);
  EXPECT_EQ(t.link_class(std::vector<int>{70, 72}), LinkClass::InfiniBand);
  const auto kind = read_kind("nvlink-domain", {{"domain_gpus", 72}});
  EXPECT_NO_THROW(kind->check({9, 8})) << "72 GPUs are 9 nodes of 8";
  EXPECT_THROW(kind->check({10, 4}), std::invalid_argument) << "40 GPUs are not whole domains of 72";
  EXPECT_THROW(kind->check({72, 5}), std::invalid_argument) << "72 GPUs are not whole nodes of 5";
  EXPECT_THROW(read_kind("nvlink-domain", {{"domain_gpus", 72}, {"pxn", true}}), InputError) << "another kind's key";
}

TEST(Topology, NvlinkDomainsSpreadRingsOverTheirMembersNics) {
  const Topology t = cluster_of("nvlink-domain", 8, 4, {{"domain_gpus", 8}}).topology();
  // Two domains of 8 (four nodes of 4 each side): 8 members per domain, over two nodes each.
  EXPECT_EQ(t.collective_path(CollectiveOp::AllReduce, members({0, 1, 2, 3}, 4, 0, 4)).bandwidth_scale, 8.0);
  EXPECT_EQ(t.collective_path(CollectiveOp::AllReduce, members({0, 2}, 4, 0, 2)).bandwidth_scale, 2.0);
  EXPECT_EQ(t.collective_path(CollectiveOp::AllToAll, members({0, 1, 2, 3}, 4, 0, 4)).bandwidth_scale, 1.0);
  EXPECT_EQ(t.aligned_path(CollectiveOp::AllGather, 16, LinkClass::InfiniBand).bandwidth_scale, 8.0);
  EXPECT_EQ(t.collective_path(CollectiveOp::AllReduce, members({0, 1}, 4, 0, 4)).link, LinkClass::NvLink);
}

/// A profile with one ring fit per class at nccl-tests' single-NIC (C5.1) and NVLink (C3) bus bandwidths.
Profile nccl_profile() {
  Profile p = flat_compute_profile();
  for (CollectiveOp op : {CollectiveOp::AllReduce, CollectiveOp::AllGather, CollectiveOp::AllToAll}) {
    p.collectives.push_back(single_segment(op, LinkClass::InfiniBand, 16, 0, 48.8));
    p.collectives.push_back(single_segment(op, LinkClass::NvLink, 8, 0, 360));
  }
  return p;
}

double bus_GBps(const CostModel& cost, CollectiveOp op, const std::vector<int>& group, double bytes) {
  const CollectiveCall call{op, static_cast<int>(group.size()), bytes, 1};
  const double seconds = cost.collective_time(std::span<const CollectiveCall>(&call, 1), group).seconds();
  return bytes / seconds * bus_factor(op, static_cast<int>(group.size())) / 1e9;
}

// docs/published-measurements C5: 10 nodes of 8 H100 with one 400 Gb/s NIC per GPU, 1 GiB messages. Ring
// collectives reach 97.7 / 195.2 / 344.9 GB/s busbw at 2 / 4 / 8 GPUs per node, all-to-all 47.4 / 48.7 / 50.1.
TEST(Topology, RailOptimizedBusBandwidthFollowsPublishedNcclTests) {
  const ClusterSpec rail = cluster_of("rail-optimized", 10, 8);
  const ClusterSpec fat = cluster_of("fat-tree", 10, 8);
  const CostModel on_rail(flat_tiny_model(), rail, nccl_profile());
  const CostModel on_fat(flat_tiny_model(), fat, nccl_profile());
  const std::vector<int> nodes{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  const double GiB = 1024.0 * 1024 * 1024;
  const struct {
    int per_node;
    double ring;
    double all_to_all;
  } published[] = {{2, 97.73, 47.44}, {4, 195.16, 48.65}, {8, 344.87, 50.11}};
  for (const auto& row : published) {
    const std::vector<int> group = members(nodes, 8, 0, row.per_node);
    EXPECT_NEAR(bus_GBps(on_rail, CollectiveOp::AllReduce, group, GiB), row.ring, 0.06 * row.ring) << row.per_node;
    EXPECT_NEAR(bus_GBps(on_rail, CollectiveOp::AllToAll, group, GiB), row.all_to_all, 0.06 * row.all_to_all);
    EXPECT_NEAR(bus_GBps(on_fat, CollectiveOp::AllReduce, group, GiB), 48.8, 0.01) << "fat-tree: one NIC per GPU";
  }
}

/// The default scenario (4 nodes of 8 H100, CP 8) on `topology`, planned by DeepSpeed and Skrull for 2 iterations.
RunResults plan_default(const nlohmann::json& cluster_changes) {
  const std::string file = std::string(LCSIM_SOURCE_DIR) + "/scenarios/default.json";
  nlohmann::json doc = nlohmann::json::parse(read_input_file(file, 1 << 20));
  doc["cluster"].update(cluster_changes);
  doc["training"]["iterations"] = 2;
  doc["policies"] = nlohmann::json::array({{{"kind", "deepspeed"}}, {{"kind", "skrull"}}});
  doc["baseline"] = "deepspeed";
  return evaluate_plans(load_and_prepare(doc, file), {});
}

TEST(Topology, CpAcrossNodesOfOneNvlinkDomainRunsAsWithinANode) {
  // CP 8 on nodes of 8 stays on NVLink; on nodes of 4 it crosses the network, unless the domain spans two nodes.
  // (Against rail-optimized nodes of 8: both spread the ZeRO sync's rings over a domain's 8 NICs.)
  const RunResults eight = plan_default({{"nodes", 4}, {"gpus_per_node", 8}, {"topology", "rail-optimized"}});
  const RunResults four = plan_default({{"nodes", 8}, {"gpus_per_node", 4}});
  const RunResults domain =
      plan_default({{"nodes", 8}, {"gpus_per_node", 4}, {"topology", "nvlink-domain"}, {"domain_gpus", 8}});
  ASSERT_EQ(domain.policies.size(), 2u);
  for (std::size_t p = 0; p < 2; ++p)
    EXPECT_DOUBLE_EQ(domain.policies[p].mean_iteration_s, eight.policies[p].mean_iteration_s) << p;
  // Skrull's long shards are bandwidth-bound: the network costs them. (DeepSpeed's many small all-to-alls are not a
  // check: the default profile's network latencies are below its NVLink ones, which carry Skrull's framework.)
  const RunResults eight_fat = plan_default({{"nodes", 4}, {"gpus_per_node", 8}});
  EXPECT_GT(four.policies[1].mean_iteration_s, 1.05 * eight_fat.policies[1].mean_iteration_s);
}

TEST(Topology, AnOversubscribedFabricSlowsTheSyncOfGroupsFillingTheirNodes) {
  // DP 4 x CP 8 on 4 nodes: ZeRO shards over all 32 GPUs, 8 per node, whose sync a 2:1 fabric halves; the CP
  // groups stay inside their nodes. Both policies lose the same time (their syncs are the same); simulated too.
  const RunResults fat = plan_default(nlohmann::json::object());
  const RunResults over = plan_default({{"oversubscription", 2}});
  const double lost = over.policies[0].mean_iteration_s - fat.policies[0].mean_iteration_s;
  EXPECT_GT(lost, 0.0);
  EXPECT_NEAR(over.policies[1].mean_iteration_s - fat.policies[1].mean_iteration_s, lost, 1e-9);
}

TEST(Topology, RailOptimizedSpeedsUpOnlyGroupsWithSeveralGpusPerNode) {
  // DP 4 x CP 8 on 4 nodes: each DP group has one GPU per node, but ZeRO shards over DP x CP, 8 GPUs per node,
  // whose reduce-scatter and all-gather spread over the NICs.
  const RunResults fat = plan_default(nlohmann::json::object());
  const RunResults rail = plan_default({{"topology", "rail-optimized"}});
  for (std::size_t p = 0; p < 2; ++p) {
    EXPECT_LT(rail.policies[p].mean_iteration_s, fat.policies[p].mean_iteration_s) << p;
    // Only the sync moves: the same gain for both policies, whose syncs are the same.
    EXPECT_NEAR(fat.policies[p].mean_iteration_s - rail.policies[p].mean_iteration_s,
                fat.policies[0].mean_iteration_s - rail.policies[0].mean_iteration_s, 1e-9);
  }
  // With one GPU per node (DP 4, CP 1 ... here: 4 nodes of 1 GPU) nothing spreads.
  const RunResults fat_one = plan_default({{"nodes", 32}, {"gpus_per_node", 1}});
  const RunResults rail_one = plan_default({{"nodes", 32}, {"gpus_per_node", 1}, {"topology", "rail-optimized"}});
  for (std::size_t p = 0; p < 2; ++p)
    EXPECT_DOUBLE_EQ(rail_one.policies[p].mean_iteration_s, fat_one.policies[p].mean_iteration_s) << p;
}

}  // namespace topology_test
}  // namespace lcsim
