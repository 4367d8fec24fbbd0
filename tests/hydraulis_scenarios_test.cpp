// The scenarios of scenarios/hydraulis/ load and plan: every policy valid (evaluate_plans checks each plan against
// its batch), Hydraulis and Megatron within memory, on the first iterations of each.
#include <gtest/gtest.h>

#include "traces/evaluation.hpp"
#include "traces/scenario_loader.hpp"

namespace lcsim {
namespace {

const std::string kSourceDir = LCSIM_SOURCE_DIR;

class HydraulisScenarios : public ::testing::TestWithParam<std::string> {};

TEST_P(HydraulisScenarios, PlanEveryPolicy) {
  const LoadedScenario loaded = load_and_prepare(kSourceDir + "/scenarios/hydraulis/" + GetParam() + ".json", 2);
  const RunResults results = evaluate_plans(loaded, {});
  ASSERT_EQ(results.policies.size(), 4u);
  EXPECT_EQ(results.baseline, "megatron");
  for (const auto& p : results.policies) {
    EXPECT_EQ(p.iterations.size(), 2u) << p.label;
    EXPECT_GT(p.tokens_per_s, 0) << p.label;
    if (p.kind == "hydraulis" || p.kind == "megatron") {
      EXPECT_EQ(p.oom_iterations, 0) << p.label;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Files, HydraulisScenarios,
                         ::testing::Values("llama2-7b-commoncrawl-8gpu", "llama2-7b-github-16gpu",
                                           "llama2-13b-github-16gpu-f1", "llama2-13b-commoncrawl-32gpu",
                                           "llama-32b-github-32gpu", "llama-32b-commoncrawl-64gpu"));

}  // namespace
}  // namespace lcsim
