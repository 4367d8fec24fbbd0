// The shipped HBP scenarios (scenarios/hbp/) load, plan without running out of memory, and show the qualitative
// result of HBP Table 6: ABR (over the run, weighted by attention work) and CR fall from ISF 128K to hierarchical
// packing to hierarchical + balance packing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>

#include "studies/evaluation.hpp"

namespace lcsim {
namespace hbp_scenarios_test {

const std::string kSourceDir = LCSIM_SOURCE_DIR;

const PolicyResult& by_label(const RunResults& results, const std::string& label) {
  const auto it = std::find_if(results.policies.begin(), results.policies.end(),
                               [&](const PolicyResult& p) { return p.label == label; });
  if (it == results.policies.end()) throw std::runtime_error("no policy " + label);
  return *it;
}

class HbpScenarios : public ::testing::TestWithParam<std::string> {};

TEST_P(HbpScenarios, PlanAndShowTableSixsOrdering) {
  const LoadedScenario loaded = load_and_prepare(kSourceDir + "/scenarios/hbp/" + GetParam(), 40);
  EXPECT_EQ(loaded.scenario.baseline, "isf-128k");
  const RunResults results = evaluate_plans(loaded, {});
  for (const auto& p : results.policies) EXPECT_EQ(p.oom_iterations, 0) << p.label;

  const BalanceMetrics& isf = by_label(results, "isf-128k").metrics;
  const BalanceMetrics& flat = by_label(results, "hbp-isf-128k").metrics;
  const BalanceMetrics& hierarchical = by_label(results, "hbp-hierarchical").metrics;
  const BalanceMetrics& hbp = by_label(results, "hbp").metrics;
  // Every 128K pack is sharded over an SP group, short samples included.
  EXPECT_DOUBLE_EQ(isf.cr, 1.0);
  EXPECT_DOUBLE_EQ(flat.cr, 1.0);
  // Published: 0.173 (8B and 70B). On 70B HBP's selection is a near tie (1% of tokens/s) between 8K packs at SP 1
  // with 72 of 80 layers checkpointed (CR 0.16) and at SP 4 with 20 (CR 0.52, chosen): docs/validation.md, "The
  // element-wise floor".
  EXPECT_LT(hierarchical.cr, 0.6);
  EXPECT_DOUBLE_EQ(hbp.cr, hierarchical.cr);
  EXPECT_LT(hierarchical.cr, isf.cr);
  EXPECT_LT(hierarchical.abr_work, isf.abr_work);
  EXPECT_LT(hbp.abr_work, hierarchical.abr_work);
  EXPECT_LT(hbp.abr, hierarchical.abr);
  EXPECT_LT(hbp.abr, isf.abr);
  EXPECT_LT(hbp.abr, 0.05);
}

INSTANTIATE_TEST_SUITE_P(Shipped, HbpScenarios,
                         ::testing::Values("llama3.1-8b-tulu3-longcite.json", "llama3.1-70b-tulu3-longcite.json",
                                           "qwen2.5-32b-tulu3-longcite.json"),
                         [](const auto& param_info) {
                           std::string name = param_info.param.substr(0, param_info.param.find("-tulu3"));
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

}  // namespace hbp_scenarios_test
}  // namespace lcsim
