// `lcsim simulate` end to end (the built binary, so the SimGrid engine runs in its own process).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

const std::string kBinary = LCSIM_BINARY;
const std::string kDefaultScenario = std::string(LCSIM_SOURCE_DIR) + "/scenarios/default.json";

struct CliRun {
  int exit_code = -1;
  std::string output;
};

CliRun run_lcsim(const std::string& arguments) {
  CliRun run;
  FILE* pipe = ::popen(("'" + kBinary + "' " + arguments + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  for (std::size_t n = 0; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) run.output.append(buffer, n);
  const int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

class SimCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("lcsim-sim-cli-" + std::to_string(::getpid()) + "-" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

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
  EXPECT_EQ(results["schema"], "lcsim-results/1");
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

}  // namespace
