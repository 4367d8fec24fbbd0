// The command line of `lcsim-gpu live` (live/live_options.hpp) and, where the build has the binary, its
// exits without a GPU: input errors before any GPU is touched, then the no-GPU error (CUDA_VISIBLE_DEVICES="").
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "base/errors.hpp"
#include "live/live_options.hpp"
#include "tests/command_run_support.hpp"

namespace lcsim {
namespace live_cli_test {

using GpuRun = testing::CommandRun;
using testing::kGpuBinary;

GpuRun run(const std::string& arguments) {
  return testing::run_lcsim_gpu(arguments);
}

std::string refusal(const std::vector<std::string>& args) {
  try {
    parse_live_options(args);
  } catch (const InputError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(LiveCli, ParsesEveryOption) {
  const LiveOptions o = parse_live_options(
      {"s.json", "--policy",    "a",        "--policy", "b",           "--iterations", "3", "--layers",
       "12",     "--predicted", "sim.json", "--mode",   "rank-serial", "--warmup",     "0", "--repetitions",
       "7",      "--trace",     "t.json",   "--json",   "r.json"});
  EXPECT_EQ(o.scenario, "s.json");
  EXPECT_EQ(o.policies, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(o.iterations, 3);
  EXPECT_EQ(o.layers, 12);
  EXPECT_EQ(o.predicted_file, "sim.json");
  EXPECT_EQ(o.mode, LiveMode::RankSerial);
  EXPECT_EQ(o.warmup, 0);
  EXPECT_EQ(o.repetitions, 7);
  EXPECT_EQ(o.trace_file, "t.json");
  EXPECT_EQ(o.json_file, "r.json");
  const LiveOptions d = parse_live_options({"s.json"});
  EXPECT_EQ(d.mode, LiveMode::Auto);
  EXPECT_EQ(d.warmup, 2);
  EXPECT_EQ(d.repetitions, 5);
  EXPECT_FALSE(d.layers);
  EXPECT_EQ(parse_live_options({"s.json", "--mode", "parallel"}).mode, LiveMode::Parallel);
}

TEST(LiveCli, RefusesBadArguments) {
  EXPECT_EQ(refusal({}), "live: missing SCENARIO file");
  EXPECT_EQ(refusal({"a.json", "b.json"}), "live: expected one SCENARIO file, got 2");
  EXPECT_EQ(refusal({"s.json", "--frobnicate"}), "live: unknown option '--frobnicate'");
  EXPECT_EQ(refusal({"s.json", "--layers"}), "live: missing value for --layers");
  EXPECT_EQ(refusal({"s.json", "--layers", "0"}), "live: --layers: must be at least 1, got 0");
  EXPECT_EQ(refusal({"s.json", "--iterations", "2x"}), "live: --iterations: not a valid integer: '2x'");
  EXPECT_EQ(refusal({"s.json", "--repetitions", "0"}), "live: --repetitions: must be at least 1, got 0");
  EXPECT_EQ(refusal({"s.json", "--warmup", "-1"}), "live: --warmup: must be at least 0, got -1");
  EXPECT_EQ(refusal({"s.json", "--mode", "fast"}), "live: --mode: expected auto, rank-serial or parallel, got 'fast'");
  EXPECT_NE(refusal({"s.json", "--mode", "parallel", "--warmup", "0"}).find("at least one untimed iteration"),
            std::string::npos);
  EXPECT_NO_THROW(parse_live_options({"s.json", "--mode", "rank-serial", "--warmup", "0"}));
}

const std::string kScenario = LCSIM_SOURCE_DIR "/scenarios/live/qwen2.5-0.5b-wikipedia-dp1-cp8.json";

class LiveBinary : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kGpuBinary)) GTEST_SKIP() << kGpuBinary << " not built (no CUDA toolkit)";
  }
};

TEST_F(LiveBinary, WithoutAGpuItPlansThenSaysWhatIsMissing) {
  const GpuRun r = run("live '" + kScenario + "' --iterations 1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no usable CUDA GPU"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("lcsim-gpu live needs an NVIDIA GPU"), std::string::npos) << r.output;
}

TEST_F(LiveBinary, InputErrorsComeBeforeTheGpu) {
  GpuRun r = run("live '" + kScenario + "' --layers 25");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--layers: must be between 1 and Qwen2.5-0.5B's 24 layers, got 25"), std::string::npos)
      << r.output;
  r = run("live '" + kScenario + "' --predicted /nonexistent/sim.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("/nonexistent/sim.json: cannot open file"), std::string::npos) << r.output;
  r = run("live");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("live: missing SCENARIO file"), std::string::npos) << r.output;
}

TEST_F(LiveBinary, HelpDescribesTheCommand) {
  for (const char* args : {"--help", "live --help"}) {
    const GpuRun r = run(args);
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_NE(r.output.find("live SCENARIO [--policy LABEL]"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("rank-serial"), std::string::npos);
  }
}

}  // namespace live_cli_test
}  // namespace lcsim
