// Issue #53, "a terminal-sized default": every command's standard output, piped (not a terminal), fits 120
// columns unless --wide asks for every column; the progress a pipe gets is `lcsim-progress` lines or nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <sstream>
#include <string>

#include "base/terminal.hpp"
#include "cli/progress.hpp"
#include "tests/command_run_support.hpp"

namespace output_width_test {

using lcsim::testing::contains;
using lcsim::testing::run_command;

const std::string kSource = LCSIM_SOURCE_DIR;
const std::string kLcsim = "'" + std::string(LCSIM_BINARY) + "' ";
const std::string kFitTrace =
    "'" + (std::filesystem::path(LCSIM_BINARY).parent_path() / "lcsim-fit-trace").string() + "' ";

/// stdout of `command` alone (stderr dropped), with its exit status.
lcsim::testing::CommandRun stdout_of(const std::string& command) {
  return run_command("{ " + command + "; } 2>/dev/null");
}

std::size_t widest_line(const std::string& text, std::string* widest = nullptr) {
  std::istringstream lines(text);
  std::size_t most = 0;
  for (std::string line; std::getline(lines, line);)
    if (line.size() > most) {
      most = line.size();
      if (widest) *widest = line;
    }
  return most;
}

class OutputWidthTest : public lcsim::testing::FolderTest {
 protected:
  OutputWidthTest() : FolderTest("lcsim-output-width-") {}

  void expect_fits(const std::string& command, int exit_code = 0) {
    const auto run = stdout_of(command);
    EXPECT_EQ(run.exit_code, exit_code) << command << "\n" << run.output;
    std::string widest;
    EXPECT_LE(widest_line(run.output, &widest), 120u) << command << "\nwidest line:\n" << widest;
    EXPECT_GT(widest_line(run.output), 0u) << command << " printed nothing";
  }
};

TEST_F(OutputWidthTest, PlanAndSimulateFit120ColumnsAndWideShowsEveryColumn) {
  const std::string scenario = "'" + kSource + "/scenarios/default.json'";
  expect_fits(kLcsim + "plan " + scenario + " -n 2 --samples 4 --jobs 2");
  expect_fits(kLcsim + "plan " + scenario + " -n 2 --samples 1");
  expect_fits(kLcsim + "simulate " + scenario + " -n 1 --samples 2 --jobs 2");
  // --wide: every column, as the table always printed it.
  const auto wide = stdout_of(kLcsim + "plan " + scenario + " -n 2 --samples 4 --jobs 2 --wide");
  EXPECT_GT(widest_line(wide.output), 120u);
  EXPECT_TRUE(contains(wide.output, "ABRw"));
  const auto narrow = stdout_of(kLcsim + "plan " + scenario + " -n 2 --samples 4 --jobs 2");
  EXPECT_TRUE(contains(narrow.output, "not shown: DBR, PR, ABR, ABRw, CR"));
  EXPECT_TRUE(contains(narrow.output, "OOM iters"));
}

TEST_F(OutputWidthTest, TuneFits120ColumnsAndSaysWhyACandidateFailed) {
  const auto run = stdout_of(kLcsim + "tune '" + kSource + "/scenarios/default.json' --policy packing --jobs 2");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_LE(widest_line(run.output), 120u) << run.output;
  // `32768:failed` is followed by why.
  EXPECT_TRUE(contains(run.output, "32768:failed"));
  EXPECT_TRUE(contains(run.output, "32768 failed: packing_length_tokens: sequence"));
}

TEST_F(OutputWidthTest, ValidateListAndFitTraceFit120Columns) {
  expect_fits(kLcsim + "validate --samples 1 --jobs 2 --only skrull-table3-rr-vs-deepspeed");
  for (const char* subject : {"models", "gpus", "distributions", "policies", "finetuning", "topologies", "profiles"})
    expect_fits(kLcsim + "list " + subject);
  expect_fits(kFitTrace + "'" + kSource + "/measurements/torch/h200-2026-11-26/torch-qwen2.5-0.5b.trace.json.gz' " +
              "--model Qwen2.5-0.5B --out '" + path("fitted.json") + "'");
}

TEST_F(OutputWidthTest, ValidatePrintsASummaryByDefaultAndEveryEntryWithWide) {
  const std::string only = " --samples 1 --jobs 2 --only skrull-table3-rr-vs-deepspeed";
  const auto compact = stdout_of(kLcsim + "validate" + only);
  ASSERT_EQ(compact.exit_code, 0) << compact.output;
  EXPECT_TRUE(contains(compact.output, "within tolerance"));
  EXPECT_FALSE(contains(compact.output, "skrull-table3-rr-vs-deepspeed "));
  const auto wide = stdout_of(kLcsim + "validate" + only + " --wide");
  ASSERT_EQ(wide.exit_code, 0) << wide.output;
  EXPECT_TRUE(contains(wide.output, "skrull-table3-rr-vs-deepspeed "));

  // A trend with published values: its source's trend factors in the compact table, and its family's line.
  const std::string trend = " --samples 1 --jobs 2 --only torchtitan-t1-t3-8b-gpus-trend-fsdp";
  expect_fits(kLcsim + "validate" + trend);
  const auto factors = stdout_of(kLcsim + "validate" + trend);
  EXPECT_TRUE(contains(factors.output, "trend factors\n")) << factors.output;  // the compact table's last column
  EXPECT_TRUE(std::regex_search(factors.output, std::regex(R"(\n  framework trend factors within 25%: [01]/1 \()")))
      << factors.output;
  // --wide: its row's factor, published (5762 over 5605 tokens/s/GPU) and predicted, with the factor's error.
  const auto row = stdout_of(kLcsim + "validate" + trend + " --wide");
  EXPECT_TRUE(std::regex_search(row.output, std::regex(R"( x1\.03 / x[0-9]+\.[0-9]{2} \([-+][0-9]+\.[0-9]%\) +held )")))
      << row.output;
}

TEST(ProgressBar, FitsTheTerminalWidth) {
  const std::string what = "policies planned (now flexsp)";
  EXPECT_EQ(lcsim::progress_bar_line(10, 10, what, 0),
            "[########################################] 10/10 policies planned (now flexsp)");
  for (std::size_t columns : {20u, 40u, 60u, 80u, 200u}) {
    const std::string line = lcsim::progress_bar_line(3, 10, what, columns);
    EXPECT_LT(line.size(), columns) << line;  // the last column would wrap on some terminals
    EXPECT_EQ(line.front(), '[');
  }
  // The bar shrinks before the text is cut.
  EXPECT_TRUE(contains(lcsim::progress_bar_line(5, 10, what, 60), "5/10 policies planned (now flexsp)"));
}

TEST(WrapLines, BreaksAtSpacesAndIndentsTheRest) {
  EXPECT_EQ(lcsim::wrap_lines("aaa bbb ccc\n", 7), "aaa bbb\n  ccc\n");
  EXPECT_EQ(lcsim::wrap_lines("  aaa bbb ccc", 9), "  aaa bbb\n    ccc");
  EXPECT_EQ(lcsim::wrap_lines("unbreakable-word\n", 5), "unbreakable-word\n");
  EXPECT_EQ(lcsim::wrap_lines("aaa bbb ccc\n", 0), "aaa bbb ccc\n");
}

}  // namespace output_width_test
