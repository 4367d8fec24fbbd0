// The Runner behind validate, tune, sweep and the Python package: where each run runs, and what comes back.
#include <gtest/gtest.h>

#include <unistd.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/errors.hpp"
#include "base/json_reader.hpp"
#include "policies/core/policy.hpp"
#include "studies/runner.hpp"
#include "studies/sweep.hpp"

namespace runner_test {

using namespace lcsim;
using Json = nlohmann::json;

const std::string kDefault = std::string(LCSIM_SOURCE_DIR) + "/scenarios/default.json";

/// A policy that refuses to plan, saying which process it was asked in.
class SaysItsProcess : public Policy {
 public:
  std::string kind() const override { return "says-its-process"; }
  std::vector<IterationPlan> plan(const PlanningContext&, std::span<const GlobalBatch>) override {
    throw PlanningError("planned in process " + std::to_string(::getpid()));
  }
};

/// The default scenario with one or two iterations and `policies` beside its baseline.
RunRequest request(RunMode mode, const std::vector<std::string>& kinds) {
  Json doc = scenario_with_absolute_paths(parse_json_file(kDefault), kDefault);
  doc["training"]["iterations"] = mode == RunMode::Simulate ? 1 : 2;
  Json policies = Json::array({{{"kind", "deepspeed"}}});
  for (const auto& kind : kinds) policies.push_back({{"kind", kind}});
  doc["policies"] = policies;
  doc["baseline"] = "deepspeed";
  RunRequest r;
  r.mode = mode;
  r.scenario = doc;
  r.file = "scenario.json";
  return r;
}

TEST(Runner, APolicyThatNeedsItsOwnProcessIsPlannedInAChildTheOthersHere) {
  const auto make = [](const PolicySpec&) -> std::unique_ptr<Policy> { return std::make_unique<SaysItsProcess>(); };
  PolicyDescriptor own;
  own.make = make;
  own.needs_own_process = [](const PolicySpec&) { return true; };
  register_policy("says-its-process-alone", own);
  register_policy("says-its-process-here", make);

  LocalRunner runner(ModelForm{});
  const auto outcomes = runner.run(
      {request(RunMode::Plan, {"says-its-process-alone"}), request(RunMode::Plan, {"says-its-process-here"})}, 2, {});
  ASSERT_EQ(outcomes.size(), 2u);
  const std::string here = "planned in process " + std::to_string(::getpid());
  EXPECT_EQ(outcomes[0].status, kExitPlanning) << outcomes[0].error;
  EXPECT_NE(outcomes[0].error.find("planned in process "), std::string::npos) << outcomes[0].error;
  EXPECT_EQ(outcomes[0].error.find(here), std::string::npos) << "planned in this process: " << outcomes[0].error;
  EXPECT_EQ(outcomes[1].status, kExitPlanning) << outcomes[1].error;
  EXPECT_NE(outcomes[1].error.find(here), std::string::npos) << outcomes[1].error;
}

TEST(Runner, OutcomesFollowTheRequestsWhateverTheJobsAndAFailureIsItsRunsAlone) {
  RunRequest bad = request(RunMode::Plan, {});
  bad.scenario["training"]["context_length"] = 1;  // not a key of the scenario format
  const std::vector<RunRequest> requests{request(RunMode::Simulate, {"skrull"}), bad, request(RunMode::Plan, {"hbp"})};
  LocalRunner runner(ModelForm{});
  std::vector<std::size_t> seen;
  const auto one = runner.run(requests, 1, [&](std::size_t done, std::size_t) { seen.push_back(done); });
  const auto two = runner.run(requests, 2, {});
  ASSERT_EQ(one.size(), 3u);
  EXPECT_EQ(seen, (std::vector<std::size_t>{0, 1, 2, 3}));
  EXPECT_EQ(one[0].status, kExitOk) << one[0].error;
  EXPECT_EQ(one[0].results.at("mode"), "simulate");  // run in a child, its document back through the pipe
  EXPECT_EQ(one[1].status, kExitBadInput);
  EXPECT_NE(one[1].error.find("context_length"), std::string::npos) << one[1].error;
  EXPECT_EQ(one[2].status, kExitOk) << one[2].error;
  EXPECT_EQ(one[2].results.at("mode"), "plan");
  for (std::size_t i = 0; i < requests.size(); ++i)  // (tables differ: they show wall times)
    EXPECT_EQ(one[i].results.dump(), two[i].results.dump()) << "request " << i;
}

}  // namespace runner_test
