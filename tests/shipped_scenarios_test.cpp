// Every scenario shipped under scenarios/ (sweeps aside: sweep_test.cpp) loads and plans with every policy it
// names, so a change to the scenario format or a policy's options cannot leave a shipped file behind.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "studies/evaluation.hpp"
#include "tests/scenario_test_support.hpp"

namespace lcsim {
namespace shipped_scenarios_test {

using testing::shipped_scenarios;

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

}  // namespace shipped_scenarios_test
}  // namespace lcsim
