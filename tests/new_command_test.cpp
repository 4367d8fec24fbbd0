// Issue #53, "your own case in three commands": `lcsim new` writes a scenario that plan, tune and simulate run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/command_run_support.hpp"

namespace new_command_test {

using lcsim::testing::contains;
using lcsim::testing::run_command;

const std::string kLcsim = "'" + std::string(LCSIM_BINARY) + "' ";

class NewCommandTest : public lcsim::testing::FolderTest {
 protected:
  NewCommandTest() : FolderTest("lcsim-new-test-") {}
};

TEST_F(NewCommandTest, YourOwnCaseInThreeCommandsNewTuneSimulate) {
  {
    std::ofstream trace(path("lengths.txt"));
    for (int i = 0; i < 1400; ++i) trace << 1000 + (i * 7919) % 60000 << "\n";
  }
  const std::string file = path("mine.json");
  const auto made = run_command(kLcsim + "new '" + file + "' --model Llama-3.1-8B --nodes 2 --trace '" +
                                path("lengths.txt") + "' --context 65536 --policies deepspeed,skrull,flexsp 2>&1");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  EXPECT_TRUE(contains(made.output, "LLaMA3.1-8B on 16 H100-SXM (DP 2 x CP 8)")) << made.output;
  const nlohmann::json doc = nlohmann::json::parse(std::ifstream(file));
  EXPECT_EQ(doc["dataset"]["trace"], "lengths.txt");  // relative to the scenario's folder
  EXPECT_EQ(doc["baseline"], "deepspeed");
  EXPECT_EQ(doc["training"]["global_batch_sequences"], 128);
  // The scaffold's next steps, as it prints them and docs/commands.md gives them.
  EXPECT_TRUE(contains(made.output, "next: lcsim tune")) << made.output;
  const std::string tuned = path("tuned.json");
  const auto tune = run_command(kLcsim + "tune '" + file + "' --write-scenario '" + tuned + "' --jobs 2 2>&1");
  ASSERT_EQ(tune.exit_code, 0) << tune.output;
  const auto simulated = run_command(kLcsim + "simulate '" + tuned + "' --samples 1 2>&1");
  ASSERT_EQ(simulated.exit_code, 0) << simulated.output;
  EXPECT_TRUE(contains(simulated.output, "flexsp")) << simulated.output;
  // A trace too short for the batches asked for is refused when the scaffold is written, not at the first run.
  EXPECT_EQ(run_command(kLcsim + "new '" + path("short.json") + "' --trace '" + path("lengths.txt") +
                        "' --iterations 100 2>&1")
                .exit_code,
            2);
  // An existing file is never replaced without --force; a bad name exits 2 naming it.
  EXPECT_EQ(run_command(kLcsim + "new '" + file + "' 2>&1").exit_code, 2);
  const auto bad = run_command(kLcsim + "new '" + path("x.json") + "' --gpu Z100 2>&1");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(contains(bad.output, "Z100")) << bad.output;
  EXPECT_FALSE(std::filesystem::exists(path("x.json")));
  const auto help = run_command(kLcsim + "new --help 2>&1");
  EXPECT_EQ(help.exit_code, 0) << help.output;
  EXPECT_TRUE(contains(help.output, "Usage: lcsim new FILE")) << help.output;
}

TEST(ReadmeFrontPage, IsAtMost130LinesAndOpensYourOwnCaseWithTheThreeCommandsTestedAbove) {
  std::ifstream readme(std::string(LCSIM_SOURCE_DIR) + "/README.md");
  std::string text, line;
  int lines = 0;
  for (; std::getline(readme, line); ++lines) text += line + "\n";
  EXPECT_LE(lines, 130);
  for (const char* command :
       {"lcsim new mine.json", "lcsim tune mine.json --write-scenario tuned.json", "lcsim simulate tuned.json"})
    EXPECT_TRUE(contains(text, command)) << command;
}

}  // namespace new_command_test
