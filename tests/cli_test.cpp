// The built `lcsim` binary, end to end: exit codes, messages, table, results files.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "policies/core/policy.hpp"
#include "tests/command_run_support.hpp"

namespace cli_test {

using CliRun = lcsim::testing::CommandRun;
using lcsim::testing::contains;
using lcsim::testing::read_file;
using lcsim::testing::run_lcsim;
const std::string kDefaultScenario = std::string(LCSIM_SOURCE_DIR) + "/scenarios/default.json";

class CliTest : public lcsim::testing::FolderTest {
 protected:
  CliTest() : FolderTest("lcsim-cli-test-") {}
};

TEST_F(CliTest, PlanDefaultScenarioPrintsEveryPolicy) {
  const CliRun run = run_lcsim("plan '" + kDefaultScenario + "' --iterations 2 --samples 3");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto scenario = nlohmann::json::parse(read_file(kDefaultScenario));
  for (const auto& policy : scenario["policies"]) {
    const std::string label = (policy.contains("label") ? policy["label"] : policy["kind"]).get<std::string>();
    EXPECT_TRUE(contains(run.output, "\n" + label + " ")) << label;
  }
  EXPECT_TRUE(contains(run.output, "uncalibrated"));
  EXPECT_TRUE(contains(run.output, "synthetic chatqa2-long-sft"));
  EXPECT_TRUE(contains(run.output, "speedup"));
}

TEST_F(CliTest, JsonAndCsvFilesAreDeterministic) {
  const CliRun a = run_lcsim("plan '" + kDefaultScenario + "' -n 2 --samples 3 --quiet --json '" + path("a.json") +
                             "' --csv '" + path("a.csv") + "'");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(a.output, "");  // --quiet
  const CliRun b = run_lcsim("plan '" + kDefaultScenario + "' -n 2 --samples 3 --quiet --json '" + path("b.json") +
                             "' --csv '" + path("b.csv") + "'");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const std::string json = read_file(path("a.json"));
  EXPECT_EQ(json, read_file(path("b.json")));
  EXPECT_EQ(read_file(path("a.csv")), read_file(path("b.csv")));

  const auto results = nlohmann::json::parse(json);
  EXPECT_EQ(results["schema"], "lcsim-results/2");
  EXPECT_EQ(results["scenario_file"], kDefaultScenario);
  std::size_t rows = 0;
  for (const auto& p : results["policies"]) rows += p["iterations"].size();
  const std::string csv = read_file(path("a.csv"));
  EXPECT_EQ(static_cast<std::size_t>(std::count(csv.begin(), csv.end(), '\n')), rows + 1);
}

TEST_F(CliTest, PlanAndSimulateRefuseFewerThanOneJob) {
  for (const char* command : {"plan", "simulate"}) {
    const CliRun run = run_lcsim(std::string(command) + " '" + kDefaultScenario + "' -n 1 --samples 2 --jobs 0");
    EXPECT_EQ(run.exit_code, 2) << run.output;
    EXPECT_TRUE(contains(run.output, "--jobs: must be at least 1, got 0")) << run.output;
  }
}

TEST_F(CliTest, SampledWorldsAreDeterministicAndKeepTheNominalFigures) {
  const std::string base = "plan '" + kDefaultScenario + "' -n 2 --quiet ";
  for (const char* name : {"a", "b"}) {
    const CliRun run = run_lcsim(base + "--samples 6 --json '" + path(std::string(name) + ".json") + "' --csv '" +
                                 path(std::string(name) + ".csv") + "'");
    ASSERT_EQ(run.exit_code, 0) << run.output;
  }
  EXPECT_EQ(read_file(path("a.json")), read_file(path("b.json")));
  EXPECT_EQ(read_file(path("a.csv")), read_file(path("b.csv")));
  const CliRun one = run_lcsim(base + "--samples 1 --json '" + path("one.json") + "'");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const auto sampled = nlohmann::json::parse(read_file(path("a.json")));
  const auto nominal = nlohmann::json::parse(read_file(path("one.json")));
  EXPECT_EQ(sampled["uncertainty"]["samples"], 6);
  EXPECT_EQ(nominal["uncertainty"]["samples"], 1);
  ASSERT_EQ(sampled["policies"].size(), nominal["policies"].size());
  for (std::size_t p = 0; p < nominal["policies"].size(); ++p) {
    // World 0 is the run --samples 1 makes: every nominal figure and iteration is the same.
    auto a = sampled["policies"][p];
    auto b = nominal["policies"][p];
    EXPECT_EQ(a["interval"]["world_iteration_s"][0], b["mean_iteration_s"]);
    a.erase("interval");
    b.erase("interval");
    EXPECT_EQ(a, b);
    const auto& speedup = sampled["policies"][p]["interval"]["speedup"];
    EXPECT_LE(speedup["p10"].get<double>(), speedup["p50"].get<double>());
    EXPECT_LE(speedup["p50"].get<double>(), speedup["p90"].get<double>());
  }
  const CliRun bad = run_lcsim(base + "--samples 0");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_TRUE(contains(bad.output, "--samples: must be in [1, 1000], got 0"));
}

TEST_F(CliTest, PolicyFilterKeepsTheBaseline) {
  const auto scenario = nlohmann::json::parse(read_file(kDefaultScenario));
  const auto& last = scenario["policies"].back();
  const std::string label = (last.contains("label") ? last["label"] : last["kind"]).get<std::string>();
  const CliRun run =
      run_lcsim("plan '" + kDefaultScenario + "' -n 1 --policy " + label + " --json '" + path("r.json") + "' --quiet");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto results = nlohmann::json::parse(read_file(path("r.json")));
  ASSERT_EQ(results["policies"].size(), 2u);
  EXPECT_EQ(results["policies"][0]["name"], scenario["baseline"]);
  EXPECT_EQ(results["policies"][1]["name"], label);

  const CliRun unknown = run_lcsim("plan '" + kDefaultScenario + "' -n 1 --policy no-such-policy");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_TRUE(contains(unknown.output, "lcsim: error: --policy no-such-policy"));
}

TEST_F(CliTest, BadScenarioExitsTwoNamingTheFile) {
  auto doc = nlohmann::json::parse(read_file(kDefaultScenario));
  doc["training"]["itterations"] = 3;
  std::ofstream(path("bad.json")) << doc.dump();
  const CliRun run = run_lcsim("plan '" + path("bad.json") + "'");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, "lcsim: error: " + path("bad.json") + ": training.itterations: unknown key"));

  const CliRun missing = run_lcsim("plan '" + path("missing.json") + "'");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_TRUE(contains(missing.output, path("missing.json")));
}

TEST_F(CliTest, PlanningFailureExitsThree) {
  // Skrull schedules DP x CP layouts only: a TP layout is a planning failure, not bad input.
  const auto kinds = lcsim::policy_kinds();
  if (std::find(kinds.begin(), kinds.end(), "skrull") == kinds.end()) GTEST_SKIP() << "no skrull policy registered";
  auto doc = nlohmann::json::parse(read_file(kDefaultScenario));
  doc["profile"] = std::string(LCSIM_SOURCE_DIR) + "/calibrate/profiles/h100-sxm-default.json";
  doc["parallel"] = {{"dp", 2}, {"cp", 8}, {"tp", 2}, {"pp", 1}};
  doc["training"]["iterations"] = 1;
  doc["policies"] = nlohmann::json::array({{{"kind", "deepspeed"}}, {{"kind", "skrull"}}});
  doc["baseline"] = "deepspeed";
  std::ofstream(path("tp.json")) << doc.dump();
  const CliRun run = run_lcsim("plan '" + path("tp.json") + "'");
  EXPECT_EQ(run.exit_code, 3) << run.output;
  EXPECT_TRUE(contains(run.output, "lcsim: error: policy skrull: "));
}

TEST_F(CliTest, UsageErrorsExitTwoWithUsage) {
  const CliRun none = run_lcsim("");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_TRUE(contains(none.output, "Usage:"));
  const CliRun unknown = run_lcsim("simulat scenarios/default.json");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_TRUE(contains(unknown.output, "lcsim: error: unknown command \"simulat\""));
  EXPECT_TRUE(contains(unknown.output, "Usage:"));
  const CliRun bad_option = run_lcsim("plan '" + kDefaultScenario + "' --iteration 2x");
  EXPECT_EQ(bad_option.exit_code, 2);
  EXPECT_TRUE(contains(bad_option.output, "lcsim: error: plan:"));
  const CliRun no_scenario = run_lcsim("plan");
  EXPECT_EQ(no_scenario.exit_code, 2);
  EXPECT_TRUE(contains(no_scenario.output, "missing SCENARIO"));
  const CliRun zero = run_lcsim("plan '" + kDefaultScenario + "' --iterations 0");
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_TRUE(contains(zero.output, "--iterations: must be in [1, 10000], got 0"));
}

TEST_F(CliTest, HelpAndVersion) {
  const CliRun help = run_lcsim("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(contains(help.output, "lcsim plan SCENARIO"));
  const CliRun plan_help = run_lcsim("plan --help");
  EXPECT_EQ(plan_help.exit_code, 0);
  EXPECT_TRUE(contains(plan_help.output, "--iterations"));
  EXPECT_TRUE(contains(plan_help.output, "--json"));
  const CliRun version = run_lcsim("--version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.output, std::string("lcsim ") + LCSIM_VERSION + "\n");
}

TEST_F(CliTest, ListsBuiltInNames) {
  const CliRun models = run_lcsim("list models");
  EXPECT_EQ(models.exit_code, 0);
  EXPECT_TRUE(contains(models.output, "Qwen2.5-0.5B"));
  EXPECT_TRUE(contains(models.output, "LLaMA3.1-70B"));
  const CliRun gpus = run_lcsim("list gpus");
  EXPECT_EQ(gpus.exit_code, 0);
  EXPECT_TRUE(contains(gpus.output, "H100-SXM"));
  const CliRun distributions = run_lcsim("list distributions");
  EXPECT_EQ(distributions.exit_code, 0);
  EXPECT_TRUE(contains(distributions.output, "chatqa2-long-sft"));
  const CliRun policies = run_lcsim("list policies");
  EXPECT_EQ(policies.exit_code, 0);
  EXPECT_TRUE(contains(policies.output, "deepspeed"));
  EXPECT_TRUE(contains(policies.output, "wlb-llm           WLB-LLM: variable-length packing"));
  EXPECT_TRUE(contains(policies.output, "flexsp            FlexSP: per micro-batch, SP groups"));
  for (const auto& kind : lcsim::policy_kinds()) {  // every built-in kind says what it is
    const auto at = policies.output.find("  " + kind + " ");
    ASSERT_NE(at, std::string::npos) << kind;
    const auto line = policies.output.substr(at, policies.output.find('\n', at) - at);
    EXPECT_GT(line.size(), 20 + kind.size()) << line;
  }
  const CliRun finetuning = run_lcsim("list finetuning");
  EXPECT_EQ(finetuning.exit_code, 0);
  EXPECT_TRUE(contains(finetuning.output, "  full "));
  EXPECT_TRUE(contains(finetuning.output, "  lora "));
  EXPECT_TRUE(contains(finetuning.output, "q k v o gate up down"));
  const CliRun topologies = run_lcsim("list topologies");
  EXPECT_EQ(topologies.exit_code, 0);
  for (const char* kind : {"fat-tree ", "rail-optimized ", "nvlink-domain ", "oversubscription", "pxn", "domain_gpus"})
    EXPECT_TRUE(contains(topologies.output, kind)) << kind;
  const CliRun bad = run_lcsim("list colours");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(contains(bad.output, "models|gpus|distributions|policies|finetuning|topologies"));
}

TEST_F(CliTest, SweepRunsEveryPointAndIsIndependentOfJobs) {
  {
    std::ofstream sweep(path("sweep.json"));
    sweep << R"({"name": "t", "base": ")" << kDefaultScenario << R"(", "mode": "plan", "iterations": 2,
      "axes": [{"name": "gpus", "values": [8, 16]}, {"name": "dataset", "values": ["wikipedia", "tulu3"]}]})";
  }
  const CliRun one = run_lcsim("sweep '" + path("sweep.json") + "' --out '" + path("one") + "' --jobs 1");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_TRUE(contains(one.output, "uncalibrated"));
  const CliRun two = run_lcsim("sweep '" + path("sweep.json") + "' --out '" + path("two") + "' -j 2 --quiet");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  const std::string csv = read_file(path("one/sweep.csv"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 4 * 10);  // header + 4 points x 10 policies
  EXPECT_TRUE(contains(csv, "point,gpus,dataset,gpus,policy"));
  EXPECT_TRUE(contains(csv, "\n3,16,tulu3,16,skrull,skrull,"));
  const auto merged = nlohmann::json::parse(read_file(path("one/sweep.json")));
  EXPECT_EQ(merged["schema"], "lcsim-sweep/1");
  ASSERT_EQ(merged["points"].size(), 4U);
  EXPECT_EQ(merged["points"][3]["results"]["scenario"], "skrull-qwen0.5b-chatqa2-32gpu [gpus=16, dataset=\"tulu3\"]");
  // Same points, same results, whatever the parallelism (the scenario_file paths differ by folder).
  auto a = merged, b = nlohmann::json::parse(read_file(path("two/sweep.json")));
  for (auto* doc : {&a, &b})
    for (auto& point : (*doc)["points"]) {
      point.erase("scenario_file");
      point["results"].erase("scenario_file");
    }
  EXPECT_EQ(a.dump(), b.dump());
}

TEST_F(CliTest, SweepPointFailuresNameTheirLogs) {
  // The scenario parses (so the sweep expands) but its profile is missing: every point's process fails.
  auto base = nlohmann::json::parse(read_file(kDefaultScenario));
  base["profile"] = path("missing-profile.json");
  std::ofstream(path("base.json")) << base.dump();
  std::ofstream(path("sweep.json")) << R"({"name": "t", "base": "base.json", "mode": "plan",
      "axes": [{"name": "gpus", "values": [8]}]})";
  const CliRun run = run_lcsim("sweep '" + path("sweep.json") + "' --out '" + path("out") + "'");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_TRUE(contains(run.output, "point 0: exit"));
  EXPECT_TRUE(contains(run.output, path("out") + "/point-0000.log"));
  EXPECT_TRUE(contains(read_file(path("out/point-0000.log")), "missing-profile.json"));
}

}  // namespace cli_test
