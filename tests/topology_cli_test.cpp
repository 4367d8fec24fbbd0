// Each topology end to end through the command line: with every flow simulated (--all-flows), the simulator gives
// the closed-form estimate's iteration times wherever no two groups share a link, as on the default scenario, so the
// flows' bytes match what each topology prices (spread rings: each NIC's share; an oversubscribed uplink: the
// priced rate).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/command_run_support.hpp"
#include "tests/scenario_test_support.hpp"

namespace lcsim {
namespace topology_cli_test {

using Json = nlohmann::json;

Json results_of(const std::string& command, const std::filesystem::path& scenario, const std::filesystem::path& out,
                const std::string& extra) {
  const auto run = testing::run_lcsim(command + " '" + scenario.string() + "' --samples 1 -q --json '" + out.string() +
                                      "' " + extra);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  return Json::parse(testing::read_file(out));
}

TEST(TopologyCli, EveryFlowSimulatedGivesTheClosedFormOnEachTopology) {
  const testing::ScratchDir dir;
  const std::string source = LCSIM_SOURCE_DIR;
  const Json variants = Json::parse(R"([
      {},
      {"topology": "rail-optimized", "pxn": true},
      {"nodes": 8, "gpus_per_node": 4, "topology": "nvlink-domain", "domain_gpus": 8},
      {"oversubscription": 2}])");
  for (const Json& variant : variants) {
    Json doc = Json::parse(testing::read_file(source + "/scenarios/default.json"));
    doc["profile"] = source + "/calibrate/profiles/h100-sxm-default.json";
    doc["training"]["iterations"] = 2;
    doc["cluster"].update(variant);
    const auto scenario = dir.path / "s.json";
    std::ofstream(scenario) << doc.dump();
    const Json plan = results_of("plan", scenario, dir.path / "p.json", "");
    const Json simulated = results_of("simulate", scenario, dir.path / "s-out.json", "--all-flows");
    ASSERT_EQ(plan["policies"].size(), simulated["policies"].size());
    for (std::size_t p = 0; p < plan["policies"].size(); ++p) {
      const double estimate = plan["policies"][p]["mean_iteration_s"].get<double>();
      EXPECT_NEAR(simulated["policies"][p]["mean_iteration_s"].get<double>(), estimate, 1e-6 * estimate)
          << variant.dump() << " " << plan["policies"][p]["name"];
    }
  }
}

}  // namespace topology_cli_test
}  // namespace lcsim
