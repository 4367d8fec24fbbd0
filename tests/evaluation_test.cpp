// The plan evaluation loop: policy selection, plan checking (a policy bug is a PlanningError naming the policy and
// iteration), and the per-iteration results.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/errors.hpp"
#include "formats/scenario_loader.hpp"
#include "studies/evaluation.hpp"

namespace lcsim {
namespace evaluation_test {

const std::string kDefaultScenario = std::string(LCSIM_SOURCE_DIR) + "/scenarios/default.json";

::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << part << "\" not found in: " << text;
}

/// A DeepSpeed-like test policy: each sequence sharded over the CP group of replica (position % dp), one
/// micro-batch per sequence. `corrupt` breaks the plans in the way a test asks for.
class FakePolicy : public Policy {
 public:
  enum class Corrupt { None, DuplicateInSecondPlan, DropPlan, MergeAll, MergeAllDropOne, MergeAllDuplicate, Throw };
  explicit FakePolicy(Corrupt corrupt) : corrupt_(corrupt) {}

  std::string kind() const override { return "fake"; }
  bool keeps_global_batches() const override {
    return corrupt_ != Corrupt::MergeAll && corrupt_ != Corrupt::MergeAllDropOne &&
           corrupt_ != Corrupt::MergeAllDuplicate;
  }

  std::vector<IterationPlan> plan(const PlanningContext& context, std::span<const GlobalBatch> batches) override {
    if (corrupt_ == Corrupt::Throw) throw PlanningError("sequence 3 does not fit");
    std::vector<IterationPlan> plans;
    ParallelScheme scheme;
    scheme.cp = context.layout.cp;
    for (std::size_t b = 0; b < batches.size(); ++b) {
      IterationPlan plan;
      plan.index = static_cast<int>(b);
      plan.replicas = make_homogeneous_replicas(scheme, context.layout.dp);
      std::size_t position = 0;
      for (const auto& s : batches[b]) {
        MicroBatch mb;
        mb.placements.push_back({s.id, s.tokens, Placement::kSharded});
        plan.replicas[position++ % plan.replicas.size()].micro_batches.push_back(mb);
      }
      plans.push_back(std::move(plan));
    }
    switch (corrupt_) {
      case Corrupt::DuplicateInSecondPlan:
        plans[1].replicas[0].micro_batches.push_back(plans[1].replicas[1].micro_batches[0]);
        break;
      case Corrupt::DropPlan:
        plans.pop_back();
        break;
      case Corrupt::MergeAll:
      case Corrupt::MergeAllDropOne:
      case Corrupt::MergeAllDuplicate: {
        // Re-batching: the second plan's replicas take the first plan's micro-batches too.
        for (std::size_t r = 0; r < plans[0].replicas.size(); ++r)
          for (const auto& mb : plans[0].replicas[r].micro_batches) plans[1].replicas[r].micro_batches.push_back(mb);
        if (corrupt_ == Corrupt::MergeAllDropOne) plans[1].replicas[2].micro_batches.pop_back();
        if (corrupt_ != Corrupt::MergeAllDuplicate) plans.erase(plans.begin());
        break;
      }
      default:
        break;
    }
    return plans;
  }

 private:
  Corrupt corrupt_;
};

class EvaluationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { loaded_ = new LoadedScenario(load_and_prepare(kDefaultScenario, 2)); }
  static void TearDownTestSuite() {
    delete loaded_;
    loaded_ = nullptr;
  }

  /// The PlanningError message of running `corrupt` plans (fails the test when there is none).
  static std::string planning_error(FakePolicy::Corrupt corrupt) {
    FakePolicy policy(corrupt);
    try {
      plan_policy(*loaded_, spec_, policy);
    } catch (const PlanningError& e) {
      return e.what();
    }
    ADD_FAILURE() << "no PlanningError";
    return "";
  }

  static LoadedScenario* loaded_;
  static inline const PolicySpec spec_{"fake", "fake-label", nlohmann::json::object(), "f.json", "policies[0]"};
};

LoadedScenario* EvaluationTest::loaded_ = nullptr;

TEST_F(EvaluationTest, ValidPlansAreEstimatedPerIteration) {
  FakePolicy policy(FakePolicy::Corrupt::None);
  const PolicyPlans planned = plan_policy(*loaded_, spec_, policy);
  ASSERT_EQ(planned.plans.size(), 2u);
  EXPECT_EQ(planned.kind, "fake");
  EXPECT_GE(planned.planning_ms, 0.0);
  const PolicyResult result = estimate_plans(*loaded_, planned);
  EXPECT_EQ(result.label, "fake-label");
  ASSERT_EQ(result.iterations.size(), 2u);
  Tokens tokens = 0;
  for (std::size_t i = 0; i < 2; ++i) {
    const IterationResult& it = result.iterations[i];
    EXPECT_EQ(it.index, static_cast<int>(i));
    EXPECT_EQ(it.sequences, 256u);
    Tokens batch_tokens = 0;
    for (const auto& s : loaded_->batches[i]) batch_tokens += s.tokens;
    EXPECT_EQ(it.tokens, batch_tokens);
    EXPECT_GT(it.seconds, 0);
    EXPECT_GT(it.peak_bytes, 0);
    EXPECT_EQ(it.busy_seconds.size(), 32u);
    // Every sequence sharded over all 8 GPUs of its group: CR (sharded tokens / all tokens) is 1.
    EXPECT_DOUBLE_EQ(it.metrics.cr, 1.0);
    tokens += batch_tokens;
  }
  EXPECT_EQ(result.tokens, tokens);
  EXPECT_DOUBLE_EQ(result.total_s, result.iterations[0].seconds + result.iterations[1].seconds);
}

TEST_F(EvaluationTest, DuplicatePlacementNamesPolicyAndIteration) {
  EXPECT_TRUE(contains(planning_error(FakePolicy::Corrupt::DuplicateInSecondPlan),
                       "policy fake-label produced an invalid plan for iteration 1: "));
}

TEST_F(EvaluationTest, PlanCountMustMatchBatchesForBatchKeepingPolicies) {
  EXPECT_TRUE(contains(planning_error(FakePolicy::Corrupt::DropPlan), "produced 1 plans for 2 batches"));
}

TEST_F(EvaluationTest, RebatchingPoliciesMustCoverTheWindowExactly) {
  FakePolicy merged(FakePolicy::Corrupt::MergeAll);
  const PolicyPlans planned = plan_policy(*loaded_, spec_, merged);
  ASSERT_EQ(planned.plans.size(), 1u);
  EXPECT_EQ(estimate_plans(*loaded_, planned).iterations[0].sequences, 512u);

  EXPECT_TRUE(contains(planning_error(FakePolicy::Corrupt::MergeAllDropOne), "is in no plan of the window"));
  const std::string duplicate = planning_error(FakePolicy::Corrupt::MergeAllDuplicate);
  EXPECT_TRUE(contains(duplicate, "do not cover the data window exactly"));
  EXPECT_TRUE(contains(duplicate, "is placed more than once in the window"));
}

TEST_F(EvaluationTest, PolicyPlanningErrorsNameThePolicy) {
  EXPECT_EQ(planning_error(FakePolicy::Corrupt::Throw), "policy fake-label: sequence 3 does not fit");
}

TEST_F(EvaluationTest, SelectionKeepsTheBaselineAndScenarioOrder) {
  const Scenario& s = loaded_->scenario;
  EXPECT_EQ(select_policies(s, {}).size(), s.policies.size());
  const auto selected = select_policies(s, {s.policies.back().label});
  ASSERT_EQ(selected.size(), 2u);
  EXPECT_EQ(selected[0]->label, s.baseline);
  EXPECT_EQ(selected[1]->label, s.policies.back().label);
  try {
    select_policies(s, {"nope"});
    ADD_FAILURE() << "unknown label accepted";
  } catch (const InputError& e) {
    EXPECT_TRUE(contains(e.what(), "--policy nope: " + s.file + " has no policy with that label"));
  }
}

TEST_F(EvaluationTest, EvaluatePlansReportsSpeedupAgainstBaseline) {
  const RunResults results = evaluate_plans(*loaded_, {});
  EXPECT_EQ(results.mode, "plan");
  EXPECT_EQ(results.seed, 42u);
  EXPECT_FALSE(results.calibrated);
  EXPECT_EQ(results.profile_label, loaded_->profile.label());
  ASSERT_EQ(results.policies.size(), loaded_->scenario.policies.size());
  const PolicyResult& base = results.policies.front();
  EXPECT_EQ(base.label, "deepspeed");
  EXPECT_DOUBLE_EQ(base.speedup_vs_baseline, 1.0);
  for (const auto& p : results.policies) {
    EXPECT_EQ(p.tokens, base.tokens) << p.label;  // the same data window
    EXPECT_NEAR(p.speedup_vs_baseline, p.tokens_per_s / base.tokens_per_s, 1e-12) << p.label;
  }
  EXPECT_EQ(out_of_memory_warning(results, *loaded_), "");
}

TEST_F(EvaluationTest, ProgressIsReportedBeforeEachPolicyAndAtTheEnd) {
  std::vector<std::string> calls;
  evaluate_plans(*loaded_, {"sorted"}, [&](std::size_t done, std::size_t total, const std::string& label) {
    calls.push_back(std::to_string(done) + "/" + std::to_string(total) + " " + label);
  });
  EXPECT_EQ(calls, (std::vector<std::string>{"0/2 deepspeed", "1/2 sorted", "2/2 "}));
}

TEST_F(EvaluationTest, ARunWhereNothingFitsInMemorySaysSo) {
  RunResults results = evaluate_plans(*loaded_, {"sorted"});
  std::size_t iterations = 0;
  for (auto& policy : results.policies) {
    for (auto& it : policy.iterations) it.oom = true;
    iterations += policy.iterations.size();
  }
  const std::string warning = out_of_memory_warning(results, *loaded_);
  EXPECT_TRUE(contains(warning, "no iteration of any policy fits in GPU memory: all " + std::to_string(iterations) +
                                    " planned iterations are OOM"));
  EXPECT_TRUE(contains(warning, "memory.reserve_GiB"));
  // Then by how much each policy's first iteration misses.
  results.policies[0].iterations[0].peak_bytes = 90.0 * (1 << 30);
  results.policies[0].iterations[0].static_bytes = 20.0 * (1 << 30);
  const std::vector<std::string> warnings = out_of_memory_warnings(results, *loaded_);
  ASSERT_EQ(warnings.size(), 1 + results.policies.size());
  EXPECT_EQ(warnings[0], warning);
  EXPECT_TRUE(contains(warnings[1], results.policies[0].label + ": iteration 0 peaks at 90.0 GiB per GPU of "));
  EXPECT_TRUE(contains(warnings[1], "activation memory (70.0 GiB of activations on 20.0 GiB of parameters"));
  results.policies[1].iterations[0].oom = false;
  EXPECT_EQ(out_of_memory_warning(results, *loaded_), "");
}

}  // namespace evaluation_test
}  // namespace lcsim
