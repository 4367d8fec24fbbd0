// Every scenario shipped under scenarios/ (sweeps aside: sweep_test.cpp) loads and plans with every policy it
// names, so a change to the scenario format or a policy's options cannot leave a shipped file behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "traces/evaluation.hpp"

namespace lcsim {
namespace {

std::vector<std::string> shipped_scenarios() {
  const std::filesystem::path root = std::filesystem::path(LCSIM_SOURCE_DIR) / "scenarios";
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".json") continue;
    if (entry.path().parent_path().filename() == "sweeps") continue;
    files.push_back(std::filesystem::relative(entry.path(), root).string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(ShippedScenarios, EveryFileLoadsAndPlansEveryPolicy) {
  const std::vector<std::string> files = shipped_scenarios();
  ASSERT_GE(files.size(), 25u);  // default, skrull, hbp, hydraulis, scale and live scenarios
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    const LoadedScenario loaded = load_and_prepare(std::string(LCSIM_SOURCE_DIR) + "/scenarios/" + file, 2);
    const RunResults results = evaluate_plans(loaded, {});
    ASSERT_EQ(results.policies.size(), loaded.scenario.policies.size());
    for (const PolicyResult& policy : results.policies) {
      EXPECT_FALSE(policy.iterations.empty()) << policy.label;
      EXPECT_GT(policy.tokens, 0) << policy.label;
    }
  }
}

}  // namespace
}  // namespace lcsim
