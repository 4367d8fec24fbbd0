// `lcsim simulate` end to end (the built binary, so the SimGrid engine runs in its own process).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "formats/scenario.hpp"
#include "tests/command_run_support.hpp"
#include "tests/scenario_test_support.hpp"

namespace sim_cli_test {

using CliRun = lcsim::testing::CommandRun;
using lcsim::testing::run_lcsim;
const std::string kDefaultScenario = std::string(LCSIM_SOURCE_DIR) + "/scenarios/default.json";

class SimCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '-');  // a parameterized test's name holds its instance's
    dir_ = std::filesystem::temp_directory_path() / ("lcsim-sim-cli-" + std::to_string(::getpid()) + "-" + name);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

std::string file_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST_F(SimCliTest, SimulatesTheDefaultScenarioAndWritesResultsAndTimeline) {
  const auto json = dir_ / "r.json";
  const auto csv = dir_ / "r.csv";
  const auto trace = dir_ / "t.json";
  const CliRun run = run_lcsim("simulate '" + kDefaultScenario + "' -n 1 --policy packing --json '" + json.string() +
                               "' --csv '" + csv.string() + "' --trace '" + trace.string() + "'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("simulate (SimGrid: 32 GPUs"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("deepspeed"), std::string::npos) << "the baseline is always simulated";

  std::ifstream in(json);
  const nlohmann::json results = nlohmann::json::parse(in);
  EXPECT_EQ(results["schema"], "lcsim-results/2");
  EXPECT_EQ(results["mode"], "simulate");
  ASSERT_EQ(results["policies"].size(), 2u);
  for (const auto& policy : results["policies"]) {
    for (const auto& it : policy["iterations"]) {
      ASSERT_EQ(it["busy_s"].size(), 32u);
      ASSERT_EQ(it["idle_s"].size(), 32u);
      for (std::size_t g = 0; g < 32; ++g)
        EXPECT_NEAR(it["busy_s"][g].get<double>() + it["idle_s"][g].get<double>(), it["seconds"].get<double>(),
                    1e-6 * it["seconds"].get<double>());
    }
  }
  std::ifstream trace_in(trace);
  const nlohmann::json timeline = nlohmann::json::parse(trace_in);
  EXPECT_GT(timeline["traceEvents"].size(), 32u);
  EXPECT_TRUE(std::filesystem::file_size(csv) > 0);
}

TEST_F(SimCliTest, SampledWorldsScaleTheEstimateToTheSimulatedNominalWorld) {
  const auto a = dir_ / "a.json";
  const auto b = dir_ / "b.json";
  const auto one = dir_ / "one.json";
  const auto plan = dir_ / "plan.json";
  const std::string base = "'" + kDefaultScenario + "' -n 2 --policy skrull --quiet ";
  ASSERT_EQ(run_lcsim("simulate " + base + "--samples 5 --json '" + a.string() + "'").exit_code, 0);
  ASSERT_EQ(run_lcsim("simulate " + base + "--samples 5 --json '" + b.string() + "'").exit_code, 0);
  ASSERT_EQ(run_lcsim("simulate " + base + "--samples 1 --json '" + one.string() + "'").exit_code, 0);
  ASSERT_EQ(run_lcsim("plan " + base + "--samples 5 --json '" + plan.string() + "'").exit_code, 0);
  EXPECT_EQ(file_bytes(a), file_bytes(b));
  const auto sampled = nlohmann::json::parse(file_bytes(a));
  const auto nominal = nlohmann::json::parse(file_bytes(one));
  const auto estimated = nlohmann::json::parse(file_bytes(plan));
  for (std::size_t p = 0; p < 2; ++p) {
    const auto& sim = sampled["policies"][p];
    EXPECT_EQ(sim["mean_iteration_s"], nominal["policies"][p]["mean_iteration_s"]);
    // World w: t_sim(0) t_est(w) / t_est(0).
    const auto& est = estimated["policies"][p]["interval"]["world_iteration_s"];
    for (std::size_t w = 1; w < 5; ++w)
      EXPECT_NEAR(sim["interval"]["world_iteration_s"][w].get<double>(),
                  sim["mean_iteration_s"].get<double>() * est[w].get<double>() / est[0].get<double>(),
                  1e-7 * sim["mean_iteration_s"].get<double>());
  }
}

TEST_F(SimCliTest, AllFlowsGivesTheSameResultsAsClosedForm) {
  // scale/sim-64gpu: every CP group fills a node and every ZeRO group has its NICs to itself, so by default every
  // collective is timed in closed form; --all-flows simulates them all as flows.
  const std::string scenario = std::string(LCSIM_SOURCE_DIR) + "/scenarios/scale/sim-64gpu.json";
  std::string results[2];
  for (int k = 0; k < 2; ++k) {
    const auto json = dir_ / ("r" + std::to_string(k) + ".json");
    const auto trace = dir_ / ("t" + std::to_string(k) + ".json");
    const CliRun run = run_lcsim("simulate '" + scenario + "' -n 2 --samples 3 --quiet --json '" + json.string() +
                                 "' --trace '" + trace.string() + "'" + (k == 1 ? " --all-flows" : ""));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    results[k] = file_bytes(json) + file_bytes(trace);
  }
  EXPECT_FALSE(results[0].empty());
  EXPECT_EQ(results[0], results[1]);
}

// One test per shipped scenario, so that ctest runs them side by side, each under its own time limit.
class ShippedScenario : public SimCliTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(ShippedScenario, Simulates) {
  // Whole runs of up to kMostIterations, every iteration: the executor's interleavings (a woken actor running a
  // whole iteration of collectives timed in closed form before its waker resumes, for one) show on real plans. The
  // cap keeps the 40-batch WLB-LLM windows (docs/policies.md) to half their length under the sanitizers.
  constexpr int kMostIterations = 20;
  const std::string file = std::string(LCSIM_SOURCE_DIR) + "/scenarios/" + GetParam();
  const lcsim::Scenario scenario = lcsim::load_scenario(file);
#ifdef LCSIM_UNDER_SANITIZERS
  // ASan's shadow and quarantine multiply the 65,536-GPU memory benchmark's 1.3 GiB past what CI's two parallel
  // tests can map (ENOMEM); the 16,384-GPU scenario walks the same code, and the Release suite runs them all.
  constexpr int kMostGpusUnderSanitizers = 16384;
  if (scenario.cluster.world_size() > kMostGpusUnderSanitizers) GTEST_SKIP() << "too large for the sanitizer build";
  // DGX Cloud's scaling columns repeat each layout with more data-parallel replicas: here they run up to 128 GPUs,
  // the Release suite runs them up to 512 (5-15 s each there).
  constexpr int kMostScalingColumnGpus = 128;
#else
  constexpr int kMostScalingColumnGpus = 512;
#endif
  // The framework family's rows beyond 512 GPUs (DGX Cloud's 70B and 405B scaling columns) repeat the layouts of
  // their smaller columns with more data-parallel replicas: a minute and up to 3.6 GiB each here, where `lcsim
  // validate` plans them all; their layouts are simulated at 512 GPUs and below.
  constexpr int kMostFrameworkGpus = 512;
  const int gpus = scenario.cluster.world_size();
  if ((GetParam().rfind("framework/", 0) == 0 && gpus > kMostFrameworkGpus) ||
      (GetParam().rfind("framework/dgxc-", 0) == 0 && gpus > kMostScalingColumnGpus))
    GTEST_SKIP() << "a framework row whose layout is simulated at fewer GPUs";
  const int iterations = scenario.training.iterations;
  const auto json = dir_ / "r.json";
  const CliRun run =
      run_lcsim("simulate '" + file + "' --quiet --samples 1 --json '" + json.string() + "'" +
                (iterations > kMostIterations ? " --iterations " + std::to_string(kMostIterations) : std::string()));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::ifstream in(json);
  const nlohmann::json results = nlohmann::json::parse(in);
  for (const auto& policy : results["policies"]) {
    ASSERT_FALSE(policy["iterations"].empty()) << policy["label"];
    for (const auto& it : policy["iterations"]) EXPECT_GT(it["seconds"].get<double>(), 0.0) << policy["label"];
  }
}

INSTANTIATE_TEST_SUITE_P(Every, ShippedScenario, ::testing::ValuesIn(lcsim::testing::shipped_scenarios()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           std::string name =
                               param_info.param.substr(0, param_info.param.size() - 5);  // without ".json"
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

TEST_F(SimCliTest, SameScenarioGivesByteIdenticalResultsAndTimelines) {
  // Every policy of the default scenario (Skrull's overlap, contention across 4 nodes) and a pipelined Hydraulis
  // scenario, twice each.
  for (const std::string& scenario :
       {kDefaultScenario, std::string(LCSIM_SOURCE_DIR) + "/scenarios/hydraulis/llama-32b-github-32gpu.json"}) {
    std::string first_json, first_trace;
    for (int run = 0; run < 2; ++run) {
      const auto json = dir_ / ("r" + std::to_string(run) + ".json");
      const auto trace = dir_ / ("t" + std::to_string(run) + ".json");
      const CliRun r = run_lcsim("simulate '" + scenario + "' -n 2 --samples 3 --quiet --json '" + json.string() +
                                 "' --trace '" + trace.string() + "'");
      ASSERT_EQ(r.exit_code, 0) << r.output;
      if (run == 0) {
        first_json = file_bytes(json);
        first_trace = file_bytes(trace);
        EXPECT_GT(first_json.size(), 1000u);
      } else {
        EXPECT_EQ(file_bytes(json), first_json) << scenario;
        EXPECT_EQ(file_bytes(trace), first_trace) << scenario;
      }
    }
  }
}

TEST_F(SimCliTest, APlainRingScenarioIsToldWhatRingMeansAndAZigzagOneIsNot) {
  const std::string source = std::string(LCSIM_SOURCE_DIR) + "/scenarios/skrull/qwen0.5b-chatqa2-ring.json";
  nlohmann::json doc = nlohmann::json::parse(file_bytes(source));
  doc["profile"] = std::string(LCSIM_SOURCE_DIR) + "/calibrate/profiles/h100-sxm-default.json";
  doc["training"]["iterations"] = 1;
  const auto write = [&](const std::string& mode) {
    doc["parallel"]["cp_attention"] = mode;
    const std::filesystem::path file = dir_ / (mode + ".json");
    std::ofstream(file) << doc.dump(2);
    return file.string();
  };
  for (const std::string command : {"plan", "simulate"}) {
    const CliRun ring = run_lcsim(command + " '" + write("ring") + "' --samples 1 --policy rr --quiet");
    ASSERT_EQ(ring.exit_code, 0) << ring.output;
    // The warning is wrapped to the terminal's width: compare with every run of white space as one space.
    std::string said;
    for (char c : ring.output)
      if (!std::isspace(static_cast<unsigned char>(c)) || (!said.empty() && said.back() != ' '))
        said += std::isspace(static_cast<unsigned char>(c)) ? ' ' : c;
    EXPECT_NE(said.find("ring.json: parallel.cp_attention \"ring\" is the plain ring"), std::string::npos) << said;
    EXPECT_NE(said.find("load-balanced ring is \"zigzag\""), std::string::npos) << said;
    const CliRun zigzag = run_lcsim(command + " '" + write("zigzag") + "' --samples 1 --policy rr --quiet");
    ASSERT_EQ(zigzag.exit_code, 0) << zigzag.output;
    EXPECT_EQ(zigzag.output.find("plain ring"), std::string::npos) << zigzag.output;
  }
}

TEST_F(SimCliTest, TrainingAttentionPricesTheChosenKernelAndRefusesOneTheProfileLacks) {
  // A stack preset lists the kernels (tools/stack_presets.py); the default profile prices its own only.
  nlohmann::json doc = nlohmann::json::parse(file_bytes(kDefaultScenario));
  doc["profile"] = std::string(LCSIM_SOURCE_DIR) + "/calibrate/profiles/h100-sxm-deepspeed.json";
  doc["training"]["iterations"] = 1;
  const auto seconds = [&](const std::string& kernel) {
    doc["training"]["attention"] = kernel;
    const std::filesystem::path file = dir_ / (kernel + ".json");
    const std::filesystem::path json = dir_ / (kernel + ".results.json");
    std::ofstream(file) << doc.dump(2);
    const CliRun run =
        run_lcsim("plan '" + file.string() + "' --samples 1 --policy deepspeed --quiet --json '" + json.string() + "'");
    EXPECT_EQ(run.exit_code, 0) << run.output;
    const nlohmann::json results = nlohmann::json::parse(file_bytes(json));
    EXPECT_NE(results["profile"]["label"].get<std::string>().find(kernel + " attention"), std::string::npos);
    return results["policies"][0]["mean_iteration_s"].get<double>();
  };
  // FlashAttention-2 runs causal attention at about 55% of FlashAttention-3's rate (the FA3 paper's Fig. 5).
  EXPECT_GT(seconds("fa2"), seconds("fa3") * 1.05);
  doc["training"]["attention"] = "fa4";
  const std::filesystem::path bad = dir_ / "fa4.json";
  std::ofstream(bad) << doc.dump(2);
  const CliRun run = run_lcsim("plan '" + bad.string() + "' --samples 1");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("fa4.json: training.attention: the profile prices no \"fa4\" attention"), std::string::npos)
      << run.output;
}

TEST_F(SimCliTest, BadOptionsExitTwo) {
  CliRun run = run_lcsim("simulate '" + kDefaultScenario + "' --layer-granularity -1");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("--layer-granularity"), std::string::npos) << run.output;
  run = run_lcsim("simulate '" + kDefaultScenario + "' --policy nosuch -n 1");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  run = run_lcsim("simulate");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  run = run_lcsim("simulate --help");
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_NE(run.output.find("--trace"), std::string::npos) << run.output;
}

}  // namespace sim_cli_test
