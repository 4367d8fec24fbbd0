// The scenario's cluster decides how fast links are; the profile decides how collectives use them (its network
// reference): halving a link's bandwidth doubles every transfer on it, a slower wire adds latency per hop, and
// what does not cross the changed links does not move.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "model/cost_model.hpp"
#include "base/errors.hpp"
#include "base/json_reader.hpp"
#include "tests/command_run_support.hpp"

namespace lcsim {
namespace cluster_network_test {

using Json = nlohmann::json;

const std::string kSource = LCSIM_SOURCE_DIR;

Profile h100_default() {
  return load_profile(kSource + "/calibrate/profiles/h100-sxm-default.json");
}

ClusterSpec h100_cluster(double ib_GBps, double ib_latency_us = 5) {
  ClusterSpec c;
  c.gpu = named_gpu("H100-SXM");
  c.nodes = 4;
  c.gpus_per_node = 8;
  c.nvlink_GBps = 450;
  c.nvlink_latency_us = 2;
  c.ib_GBps = ib_GBps;
  c.ib_latency_us = ib_latency_us;
  return c;
}

CostModel cost_on(const ClusterSpec& cluster) {
  return CostModel(named_model("Qwen2.5-7B"), cluster, h100_default());
}

TEST(ClusterNetwork, HalvingInfiniBandDoublesACrossNodeGradientSyncAndLeavesNvlinkAlone) {
  const CostModel fast = cost_on(h100_cluster(50));
  const CostModel slow = cost_on(h100_cluster(25));
  const ParallelScheme scheme{1, 1, 8};
  const auto sync = fast.gradient_sync_calls(scheme, 32, 0);
  const CollectiveTime t_fast = fast.collective_time(sync, LinkClass::InfiniBand);
  const CollectiveTime t_slow = slow.collective_time(sync, LinkClass::InfiniBand);
  ASSERT_GT(t_fast.transfer_s, 0);
  EXPECT_NEAR(t_slow.transfer_s, 2 * t_fast.transfer_s, 1e-12 * t_fast.transfer_s);
  EXPECT_DOUBLE_EQ(t_slow.latency_s, t_fast.latency_s);
  // The cluster the profile describes gets the profile's own fits.
  EXPECT_DOUBLE_EQ(t_fast.transfer_s + t_fast.latency_s,
                   h100_default().collective_seconds(sync[0].op, LinkClass::InfiniBand, 32, sync[0].bytes) +
                       h100_default().collective_seconds(sync[1].op, LinkClass::InfiniBand, 32, sync[1].bytes));
  // The CP group's all-to-all inside a node does not cross InfiniBand.
  const auto a2a = fast.ulysses_calls(65536, 8, 28);
  EXPECT_DOUBLE_EQ(slow.collective_time(a2a, LinkClass::NvLink).seconds(),
                   fast.collective_time(a2a, LinkClass::NvLink).seconds());
}

TEST(ClusterNetwork, WireLatencyMovesACollectiveByItsHops) {
  const CostModel base = cost_on(h100_cluster(50, 5));
  const CostModel slow_wire = cost_on(h100_cluster(50, 15));
  const auto latency = [](const CostModel& cost, CollectiveOp op, int n) {
    const CollectiveCall call{op, n, 1 << 20, 1};
    return cost.collective_time(std::span<const CollectiveCall>(&call, 1), LinkClass::InfiniBand).latency_s;
  };
  // A ring all-gather over 16 GPUs crosses 15 wires in sequence, an all-reduce 30; an all-to-all posts all at once.
  EXPECT_NEAR(latency(slow_wire, CollectiveOp::AllGather, 16) - latency(base, CollectiveOp::AllGather, 16), 15 * 10e-6,
              1e-12);
  EXPECT_NEAR(latency(slow_wire, CollectiveOp::AllReduce, 16) - latency(base, CollectiveOp::AllReduce, 16), 30 * 10e-6,
              1e-12);
  EXPECT_NEAR(latency(slow_wire, CollectiveOp::AllToAll, 16) - latency(base, CollectiveOp::AllToAll, 16), 10e-6, 1e-12);
}

TEST(ClusterNetwork, ProfileFilesStateTheNetworkTheirCollectivesWereMeasuredOn) {
  Json doc = parse_json_file(kSource + "/calibrate/profiles/h100-sxm-default.json");
  EXPECT_NO_THROW(profile_from_json(doc, "p.json"));
  Json without = doc;
  without.erase("network");
  EXPECT_THROW(profile_from_json(without, "p.json"), InputError);
  Json old = without;
  old["format_version"] = 1;
  try {
    profile_from_json(old, "p.json");
    FAIL() << "a format_version 1 profile was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("network"), std::string::npos) << e.what();
  }
  Json zero = doc;
  zero["network"]["ib_GBps"] = 0;
  EXPECT_THROW(profile_from_json(zero, "p.json"), InputError);
}

/// `lcsim MODE scenario` with cluster.ib_GBps replaced; the policies' results, without the header.
Json policies_with_ib(const std::string& mode, const std::string& scenario, double ib_GBps) {
  const auto dir = std::filesystem::temp_directory_path() / ("lcsim-network-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ifstream in(kSource + "/scenarios/" + scenario);
  Json doc = Json::parse(in);
  doc["cluster"]["ib_GBps"] = ib_GBps;
  doc["profile"] = kSource + "/calibrate/profiles/h100-sxm-default.json";
  doc["training"]["iterations"] = 2;
  const auto file = dir / "scenario.json";
  std::ofstream(file) << doc.dump();
  const auto out = dir / "results.json";
  const auto run =
      testing::run_lcsim(mode + " '" + file.string() + "' --quiet --policy skrull --json '" + out.string() + "'");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  std::ifstream results(out);
  const Json policies = Json::parse(results)["policies"];
  std::filesystem::remove_all(dir);
  return policies;
}

TEST(ClusterNetwork, TheScenarioInfiniBandDrivesPlanAndSimulateAcrossNodesOnly) {
  for (const std::string mode : {"plan", "simulate"}) {
    SCOPED_TRACE(mode);
    // Four nodes: DeepSpeed's ZeRO-2 gradient sync crosses InfiniBand, so half the bandwidth costs time.
    const Json fast = policies_with_ib(mode, "skrull/qwen7b-wikipedia.json", 50);
    const Json slow = policies_with_ib(mode, "skrull/qwen7b-wikipedia.json", 25);
    ASSERT_EQ(fast[0]["name"], "deepspeed");
    EXPECT_GT(slow[0]["mean_iteration_s"].get<double>(), fast[0]["mean_iteration_s"].get<double>() * 1.001);
    // One node: nothing crosses InfiniBand.
    EXPECT_EQ(policies_with_ib(mode, "skrull/case-study-dp1.json", 25),
              policies_with_ib(mode, "skrull/case-study-dp1.json", 50));
  }
}

}  // namespace cluster_network_test
}  // namespace lcsim
