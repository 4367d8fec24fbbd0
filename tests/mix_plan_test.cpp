// `lcsim-gpu bench-mix`'s host logic (live/mix_plan.hpp): the Skrull-shaped points, their predictions
// (the cost model's own), the report's mix-over-parts ratio and the results file, on the live scenario.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/errors.hpp"
#include "base/json_reader.hpp"
#include "live/mix_plan.hpp"

namespace lcsim {
namespace mix_plan_test {

const std::string kScenario = LCSIM_SOURCE_DIR "/scenarios/live/qwen2.5-0.5b-wikipedia-dp1-cp8-h200.json";

std::string refusal(const std::vector<std::string>& args) {
  try {
    parse_mix_options(args);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

MixPlan small_sweep() {
  MixBenchOptions o;
  o.scenario = kScenario;
  o.long_tokens = {8192};
  o.short_tokens = {256};
  o.shorts = {1, 4};
  return plan_mix_bench(o);
}

TEST(MixPlan, PointsAreTheShardedLongOneTheShortsAndBothTogether) {
  const MixPlan sweep = small_sweep();
  EXPECT_EQ(sweep.cp, 8);
  ASSERT_EQ(sweep.points.size(), 5u);  // sharded; local 1, mix 1; local 4, mix 4
  const MixPoint& sharded = sweep.points[0];
  EXPECT_EQ(sharded.role, "sharded");
  EXPECT_TRUE(sharded.job.shape.local.empty());
  EXPECT_EQ(sharded.job.shape.sharded, (std::vector<int>{8192}));
  EXPECT_EQ(sharded.job.shape.rows(), 1024);
  EXPECT_EQ(sharded.job.shape.sharded_heads, 2);  // 14 heads over 8 ranks, rounded up to whole KV groups of 2
  const MixPoint& mix = sweep.points[4];
  EXPECT_EQ(mix.role, "mix");
  EXPECT_EQ(mix.job.shape.local, (std::vector<int>{256, 256, 256, 256}));
  EXPECT_EQ(mix.job.shape.sharded, (std::vector<int>{8192}));
  EXPECT_EQ(mix.job.shape.rows(), 1024 + 1024);
  EXPECT_EQ(mix.job.shape.layers, 24);
  EXPECT_FALSE(mix.job.shape.lm_head);
  EXPECT_TRUE(mix.job.timed);
  EXPECT_EQ(mix.job.static_bytes, 0);

  // Predictions are the cost model's, for the same shares over the model's layers.
  const CostModel& cost = *sweep.loaded.cost;
  ParallelScheme scheme;
  scheme.cp = 8;
  scheme.recompute = Recompute::Selective;
  const std::vector<SequenceShare> shares{{256, 1}, {256, 1}, {256, 1}, {256, 1}, {8192, 8}};
  EXPECT_DOUBLE_EQ(mix.predicted_s, cost.compute_seconds(shares, scheme, 24, false));
  // One layer's fixed cost is paid once by the mix and once by each part: the mix is cheaper than its parts.
  const MixPoint& local = sweep.points[3];
  EXPECT_LT(mix.predicted_s, local.predicted_s + sharded.predicted_s);
  EXPECT_GT(mix.predicted_s, std::max(local.predicted_s, sharded.predicted_s));
}

TEST(MixPlan, ReportAndFileSayHowTheMixComparesWithItsParts) {
  const MixPlan sweep = small_sweep();
  // sharded 1 ms; local 2 ms (k 1), 3 ms (k 4); mix 3.3 ms (k 1, 1.1x its parts), 4 ms (k 4, 1.0x).
  const double nan = std::nan("");
  const std::vector<MixMeasurement> measured{{1e-3, 4e-4, 6e-4, false},
                                             {2e-3, 1e-3, 1e-3, false},
                                             {3.3e-3, 1e-3, 2.3e-3, false},
                                             {3e-3, 1e-3, 2e-3, false},
                                             {nan, nan, nan, true}};
  std::ostringstream out;
  print_mix_report(sweep, measured, "test device", out);
  EXPECT_NE(out.str().find("1.100"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("3.000"), std::string::npos) << out.str();  // k 1: parts 1 + 2 ms
  EXPECT_NE(out.str().find("test device"), std::string::npos);
  const nlohmann::ordered_json j = mix_results_json(sweep, measured, "test device");
  EXPECT_EQ(j["schema"], "lcsim-mix-sweep/1");
  EXPECT_EQ(j["cp"], 8);
  EXPECT_EQ(j["recompute"], "selective");
  ASSERT_EQ(j["points"].size(), 5u);
  EXPECT_EQ(j["points"][2]["role"], "mix");
  EXPECT_NEAR(j["points"][2]["measured_s"]["whole"].get<double>(), 3.3e-3, 1e-15);
  EXPECT_NEAR(j["points"][2]["predicted_s"].get<double>(), sweep.points[2].predicted_s,
              1e-8 * sweep.points[2].predicted_s);
  EXPECT_TRUE(j["points"][4]["oom"].get<bool>());
  EXPECT_TRUE(j["points"][4]["measured_s"]["whole"].is_null());
}

TEST(MixPlan, RefusesBadOptionsAndAnUnshardedScenario) {
  EXPECT_NE(refusal({}).find("expected one SCENARIO"), std::string::npos);
  EXPECT_NE(refusal({"s.json", "--long", "8192,x"}).find("--long: not an integer: '8192,x'"), std::string::npos);
  EXPECT_NE(refusal({"s.json", "--shorts", "0"}).find("at least 1"), std::string::npos);
  EXPECT_NE(refusal({"s.json", "--repetitions", "0"}).find("at least 1"), std::string::npos);
  EXPECT_NE(refusal({"s.json", "--speed"}).find("unknown option '--speed'"), std::string::npos);
  EXPECT_NE(refusal({"s.json", "--json"}).find("missing value for --json"), std::string::npos);
  EXPECT_EQ(parse_mix_options({"s.json", "--warmup", "0"}).warmup, 0);

  MixBenchOptions o;
  o.long_tokens = {4};
  EXPECT_THROW(plan_mix_bench(load_and_prepare(kScenario), o), InputError);  // 4 tokens cannot shard 8 ways
  nlohmann::json doc = parse_json_file(kScenario);
  doc["parallel"]["cp"] = 1;
  doc["parallel"]["dp"] = 8;
  try {
    plan_mix_bench(load_and_prepare(doc, kScenario), MixBenchOptions{});
    ADD_FAILURE() << "cp 1 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.cp"), std::string::npos) << e.what();
  }
  EXPECT_THROW(check_mix_outputs(parse_mix_options({"s.json", "--json", "s.json"}), {"s.json"}), InputError);
}

}  // namespace mix_plan_test
}  // namespace lcsim
