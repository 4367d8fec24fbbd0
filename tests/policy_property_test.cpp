// Every registered policy, on random batches from every named length distribution and several cluster shapes,
// must produce structurally valid plans (each sequence exactly once, ranks, GPUs and schemes valid); running out
// of memory is allowed here (it is a property of a plan, reported as an OOM iteration).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "base/errors.hpp"
#include "model/metrics.hpp"
#include "policies/core/policy.hpp"
#include "model/validator.hpp"
#include "program/estimate.hpp"
#include "tests/policy_test_fixtures.hpp"

namespace lcsim {
namespace policy_property_test {

struct Shape {
  int dp;
  int cp;
};

constexpr Tokens kContextLength = 128 * kKiloTokens;
constexpr int kDefaultBatches = 10000;  // CI's size; LCSIM_PROPERTY_BATCHES=1000000 for the long run

/// The number of batches to plan: LCSIM_PROPERTY_BATCHES when set (a positive integer), else CI's size.
int total_batches() {
  const char* text = std::getenv("LCSIM_PROPERTY_BATCHES");
  if (text == nullptr) return kDefaultBatches;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 1 || value > 100000000) {
    throw std::invalid_argument(std::string("LCSIM_PROPERTY_BATCHES must be an integer in 1..1e8, got '") + text +
                                "'");
  }
  return static_cast<int>(value);
}

TEST(PolicyProperty, EveryPolicyPlansStructurallyValidIterations) {
  const Shape shapes[] = {{1, 8}, {4, 8}, {2, 16}, {8, 4}};
  const auto& distributions = named_distributions();
  const auto kinds = policy_kinds();
  const int combos = static_cast<int>(std::size(shapes) * distributions.size());
  const int total = total_batches();
  const int batches_per_combo = total / combos + 1;
  const ModelConfig& model = named_model("Qwen2.5-0.5B");
  const auto start = std::chrono::steady_clock::now();

  int batches_done = 0;
  std::uint64_t combo_seed = 1;
  for (const auto& shape : shapes) {
    const CostModel cost = testing::plausible_cost(model, shape.dp * shape.cp / 8);
    for (const auto& distribution : distributions) {
      ++combo_seed;
      Rng rng(combo_seed);
      const std::size_t pool_size = static_cast<std::size_t>(batches_per_combo) * 4 * shape.dp;
      const Dataset data = sample_dataset(distribution.name, {MixComponent{&distribution, 1.0}}, pool_size, combo_seed);
      // Sequences over the training context length are not admitted (a scenario's loader rejects them).
      std::vector<Sequence> pool;
      for (const auto& s : data.sequences())
        if (s.tokens <= kContextLength) pool.push_back(s);

      std::size_t next = 0;
      for (int done = 0; done < batches_per_combo && next < pool.size();) {
        // A window of one to three batches, each of 1 .. 4 dp sequences.
        std::vector<GlobalBatch> window(1 + rng.below(3));
        for (auto& batch : window) {
          const std::size_t size = 1 + rng.below(static_cast<std::uint64_t>(4 * shape.dp));
          for (std::size_t i = 0; i < size && next < pool.size(); ++i) batch.push_back(pool[next++]);
        }
        std::erase_if(window, [](const GlobalBatch& b) { return b.empty(); });
        done += static_cast<int>(window.size());
        batches_done += static_cast<int>(window.size());

        PlanningContext context;
        context.cost = &cost;
        context.layout.dp = shape.dp;
        context.layout.cp = shape.cp;
        context.training.global_batch_sequences = 4 * shape.dp;
        context.training.context_length = kContextLength;
        context.seed = rng.next();
        for (const auto& kind : kinds) {
          PolicySpec spec;
          spec.kind = kind;
          spec.label = kind;
          spec.file = "property";
          spec.path = "policies[0]";
          auto policy = make_policy(spec);
          std::vector<IterationPlan> plans;
          try {
            plans = policy->plan(context, window);
          } catch (const std::exception& e) {
            FAIL() << kind << " on " << distribution.name << " dp " << shape.dp << " cp " << shape.cp << ": "
                   << e.what();
          }
          const std::string where = kind + " on " + distribution.name + ", dp " + std::to_string(shape.dp) + " x cp " +
                                    std::to_string(shape.cp);
          if (policy->keeps_global_batches()) {
            ASSERT_EQ(plans.size(), window.size()) << where;
            for (std::size_t i = 0; i < plans.size(); ++i) {
              const auto report = validate_plan(plans[i], window[i], cost);
              ASSERT_TRUE(report.structurally_valid()) << where << "\n" << report.summary();
            }
          } else {
            for (const auto& plan : plans) {
              const auto report = validate_plan(plan, plan_sequences(plan), cost);
              ASSERT_TRUE(report.structurally_valid()) << where << "\n" << report.summary();
            }
            const auto issues = validate_window(plans, window);
            ASSERT_TRUE(issues.empty()) << where << ": " << issues.front().message;
          }
          // The estimate and the metrics take every valid plan.
          for (const auto& plan : plans) {
            const IterationEstimate e = program::estimate_iteration(plan, cost);
            ASSERT_TRUE(e.seconds > 0 && std::isfinite(e.seconds)) << where;
            const BalanceMetrics m = compute_metrics(plan, e, cost.cluster().world_size());
            for (double ratio : {m.dbr, m.pr, m.abr, m.cr}) ASSERT_TRUE(ratio >= 0 && ratio <= 1) << where;
          }
        }
      }
    }
  }
  EXPECT_GE(batches_done, total);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("seconds", std::to_string(seconds));
}

}  // namespace policy_property_test
}  // namespace lcsim
