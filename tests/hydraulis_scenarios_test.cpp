// The scenarios of scenarios/hydraulis/ load and plan: every policy valid (evaluate_plans checks each plan against
// its batch), Hydraulis and Megatron within memory, on the first iterations of each.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "formats/scenario_loader.hpp"
#include "studies/evaluation.hpp"

namespace lcsim {
namespace hydraulis_scenarios_test {

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

// Problem 1 proposes a strategy for every length up to the longest: no iteration may fall back for want of a
// candidate that holds its longest sequence. On the 7B CommonCrawl 8-GPU data, batch 7 holds a 25K sequence that
// only a relaxed 0.1 x <4,1> beside 3.8 x <1,2> covered, which no floor / ceil rounding fits into 8 GPUs.
TEST(HydraulisScenarioOptions, EveryIterationHasACandidateHoldingItsLongestSequence) {
  const LoadedScenario loaded =
      load_and_prepare(kSourceDir + "/scenarios/hydraulis/llama2-7b-commoncrawl-8gpu.json", 8);
  const RunResults results = evaluate_plans(loaded, {"hydraulis"});
  for (const auto& p : results.policies) {
    if (p.kind != "hydraulis") continue;
    ASSERT_EQ(p.iterations.size(), 8u);
    for (const auto& it : p.iterations) EXPECT_EQ(it.label.find("no candidate"), std::string::npos) << it.label;
  }
}

// "optimization_phase": "serial" (the default) plans for the gradient sync and optimizer step that lcsim's
// iteration runs after propagation; "hidden" is the paper's propagation-only planning. On a scenario where
// hiding it misleads the selection (the 32 GPUs of 13B, where a <1,1> pipeline synchronises the whole model), the
// estimate of the serial plans is the smaller: 2.49 s against 3.99 s per iteration over 20 iterations.
TEST(HydraulisScenarioOptions, SerialOptimizationPhaseBeatsHiddenOn13BCommoncrawl) {
  const std::string file = kSourceDir + "/scenarios/hydraulis/llama2-13b-commoncrawl-32gpu.json";
  nlohmann::json document = nlohmann::json::parse(std::ifstream(file));
  nlohmann::json policies = nlohmann::json::array();
  for (const auto& p : document.at("policies"))
    if (p.at("kind") == "hydraulis" || p.at("kind") == "megatron") policies.push_back(p);
  nlohmann::json hidden = {{"kind", "hydraulis"}, {"label", "hydraulis-hidden"}};
  hidden["options"]["optimization_phase"] = "hidden";
  policies.push_back(hidden);
  document["policies"] = policies;
  const RunResults results = evaluate_plans(load_and_prepare(document, file, 4), {});
  double serial_s = 0, hidden_s = 0;
  for (const auto& p : results.policies) {
    if (p.label == "hydraulis") serial_s = p.mean_iteration_s;
    if (p.label == "hydraulis-hidden") hidden_s = p.mean_iteration_s;
  }
  ASSERT_GT(serial_s, 0);
  EXPECT_LT(serial_s, hidden_s);
}

}  // namespace hydraulis_scenarios_test
}  // namespace lcsim
