// The built `lcsim` binary on hostile input and outputs (docs/robustness.md): every refusal exits 2 naming the file
// and key or option, nothing is read without bound, and no output replaces an input or a file of a failed run.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/command_run_support.hpp"

namespace robustness_cli_test {

using lcsim::testing::CommandRun;
using lcsim::testing::contains;
using lcsim::testing::read_file;
using lcsim::testing::run_lcsim;
using Json = nlohmann::json;
const std::string kSourceDir = LCSIM_SOURCE_DIR;
const std::string kProfile = kSourceDir + "/calibrate/profiles/h100-sxm-default.json";

class RobustnessCli : public lcsim::testing::FolderTest {
 protected:
  RobustnessCli() : FolderTest("lcsim-robust-") {}

  /// A quick scenario (default.json's setting, one iteration of 32 sequences, deepspeed alone) with `change`
  /// applied, written as `name`; returns its path.
  template <class Change>
  std::string scenario(const std::string& name, Change change) const {
    Json doc = Json::parse(read_file(kSourceDir + "/scenarios/default.json"));
    doc["profile"] = kProfile;
    doc["training"]["iterations"] = 1;
    doc["training"]["global_batch_sequences"] = 32;
    doc["policies"] = Json::array({{{"kind", "deepspeed"}}});
    change(doc);
    std::ofstream(path(name)) << doc.dump(2);
    return path(name);
  }
  std::string scenario(const std::string& name) const {
    return scenario(name, [](Json&) {});
  }
  /// The shipped H100 profile with `change` applied, written as `name`.
  template <class Change>
  std::string profile(const std::string& name, Change change) const {
    Json doc = Json::parse(read_file(kProfile));
    change(doc);
    std::ofstream(path(name)) << doc.dump(2);
    return path(name);
  }
};

TEST_F(RobustnessCli, NonRegularInputsExitTwoNamingTheFile) {
  CommandRun run = run_lcsim("plan /dev/zero");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(contains(run.output, "lcsim: error: /dev/zero: is a device, not a regular file"));
  run = run_lcsim("plan '" + dir_.string() + "'");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, "lcsim: error: " + dir_.string() + ": is a directory, not a regular file"));
  // A directory as the profile or the sweep's base.
  const std::string s = scenario("s.json", [&](Json& doc) { doc["profile"] = dir_.string(); });
  run = run_lcsim("plan '" + s + "'");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, "lcsim: error: " + dir_.string() + ": is a directory"));
  std::ofstream(path("sweep.json")) << R"({"name": "t", "base": ")" << dir_.string()
                                    << R"(", "axes": [{"name": "gpus", "values": [8]}]})";
  run = run_lcsim("sweep '" + path("sweep.json") + "' --out '" + path("out") + "'");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, "lcsim: error: " + dir_.string() + ": is a directory"));
}

TEST_F(RobustnessCli, RunsBeyondTheLimitsExitTwoNamingTheOptionOrKey) {
  CommandRun run = run_lcsim("plan '" + kSourceDir + "/scenarios/default.json' --iterations 1000000");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(contains(run.output, "lcsim: error: --iterations: must be in [1, 10000], got 1000000"));
  const std::string s = scenario("s.json", [](Json& doc) { doc["training"]["global_batch_sequences"] = 10000000; });
  run = run_lcsim("plan '" + s + "'");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(contains(run.output, "lcsim: error: " + s + ": training.global_batch_sequences: 10000000 sequences"));
}

TEST_F(RobustnessCli, LayoutErrorsExitTwoNamingTheKey) {
  // Qwen2.5-0.5B: 14 heads, 24 layers; nodes of 8 GPUs.
  const std::string tp = scenario("tp.json", [](Json& doc) {
    doc["cluster"]["nodes"] = 3;
    doc["parallel"] = {{"dp", 1}, {"cp", 8}, {"tp", 3}, {"pp", 1}};
  });
  CommandRun run = run_lcsim("plan '" + tp + "'");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(contains(run.output, "lcsim: error: " + tp + ": parallel.tp: "));
  const std::string pp = scenario("pp.json", [](Json& doc) {
    doc["cluster"]["nodes"] = 5;
    doc["parallel"] = {{"dp", 1}, {"cp", 8}, {"tp", 1}, {"pp", 5}};
  });
  run = run_lcsim("plan '" + pp + "'");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(contains(run.output, "lcsim: error: " + pp + ": parallel.pp: "));
}

TEST_F(RobustnessCli, NumbersBeyondADoubleExitTwoNamingTheKey) {
  std::string text = read_file(scenario("s.json"));
  const std::string ib = "\"ib_GBps\": 50";
  ASSERT_NE(text.find(ib), std::string::npos);
  text.replace(text.find(ib), ib.size(), "\"ib_GBps\": 1e309");
  std::ofstream(path("s.json")) << text;
  const CommandRun run = run_lcsim("plan '" + path("s.json") + "'");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(contains(run.output, "lcsim: error: " + path("s.json") + ": cluster.ib_GBps: number out of range"));
  EXPECT_FALSE(contains(run.output, "json.exception"));
}

TEST_F(RobustnessCli, AProfileWithoutTheNeededCollectivesNamesItsFileAndKey) {
  const std::string p = profile("p.json", [](Json& doc) { doc["collectives"] = Json::array(); });
  const std::string s = scenario("s.json", [&](Json& doc) { doc["profile"] = p; });
  const CommandRun run = run_lcsim("plan '" + s + "'");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(contains(run.output, "lcsim: error: " + p + ": collectives: no "));
}

TEST_F(RobustnessCli, ARunWhereNothingFitsInMemoryWarns) {
  const std::string p = profile("p.json", [](Json& doc) { doc["memory"]["reserve_GiB"] = 1e6; });
  const std::string s = scenario("s.json", [&](Json& doc) { doc["profile"] = p; });
  CommandRun run = run_lcsim("plan '" + s + "' --quiet");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "lcsim: warning: no iteration of any policy fits in GPU memory"));
  run = run_lcsim("plan '" + scenario("fits.json") + "' --quiet");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output, "");
}

TEST_F(RobustnessCli, AnOutputThatIsAnInputOrAnotherOutputExitsTwo) {
  const std::string s = scenario("s.json");
  const std::string before = read_file(s);
  CommandRun run = run_lcsim("plan '" + s + "' --quiet --json '" + s + "'");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(contains(run.output, "lcsim: error: --json " + s + ": is the input " + s));
  EXPECT_EQ(read_file(s), before);
  // The same file spelled another way, as an output of simulate.
  run = run_lcsim("simulate '" + s + "' --quiet --trace '" + dir_.string() + "/./s.json'");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(contains(run.output, ": is the input "));
  EXPECT_EQ(read_file(s), before);
  run = run_lcsim("plan '" + s + "' --quiet --json '" + path("out") + "' --csv '" + path("out") + "'");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(contains(run.output, "is also the file of --json"));
  EXPECT_FALSE(std::filesystem::exists(path("out")));
}

TEST_F(RobustnessCli, AFailedOutputSaysWhichFilesWereWritten) {
  const CommandRun run =
      run_lcsim("plan '" + scenario("s.json") + "' --quiet --json '" + path("r.json") + "' --csv /dev/full");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(contains(run.output, "lcsim: error: /dev/full: write failed (already written: " + path("r.json") + ")"));
}

TEST_F(RobustnessCli, SweepOutputsOnAFullDiskExitTwo) {
  std::ofstream(path("sweep.json")) << R"({"name": "t", "base": ")" << scenario("s.json")
                                    << R"(", "mode": "plan", "axes": [{"name": "gpus", "values": [8]}]})";
  const CommandRun run =
      run_lcsim("sweep '" + path("sweep.json") + "' --quiet --out '" + path("out") + "' --csv /dev/full");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_TRUE(contains(run.output, "lcsim: error: /dev/full: write failed"));
}

}  // namespace robustness_cli_test
