// `lcsim validate` with sampled worlds: coverage and width are printed and saved, and the shipped model-form file
// is what validate computes now (one source of truth for the model-form term plan and simulate apply).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tests/command_run_support.hpp"

namespace uncertainty_cli_test {

using lcsim::testing::contains;
using lcsim::testing::read_file;
using lcsim::testing::run_lcsim;

const std::string kShippedModelForm = std::string(LCSIM_SOURCE_DIR) + "/scenarios/validation/model-form.json";

class UncertaintyCliTest : public lcsim::testing::FolderTest {
 protected:
  UncertaintyCliTest() : FolderTest("lcsim-uncertainty-test-") {}
};

TEST_F(UncertaintyCliTest, ShippedModelFormIsWhatValidateComputesNow) {
  const auto shipped = nlohmann::json::parse(read_file(kShippedModelForm));
  const int samples = shipped.at("samples").get<int>();
  const auto run = run_lcsim("validate --jobs 2 --samples " + std::to_string(samples) + " --json '" + path("v.json") +
                             "' --write-model-form '" + path("mf.json") + "'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(read_file(path("mf.json")), read_file(kShippedModelForm))
      << "scenarios/validation/model-form.json is stale: rerun `lcsim validate --samples " << samples
      << " --write-model-form scenarios/validation/model-form.json`";
  EXPECT_TRUE(contains(run.output, "coverage: "));
  EXPECT_TRUE(contains(run.output, "median relative width"));
  const auto validation = nlohmann::json::parse(read_file(path("v.json")));
  const auto& intervals = validation.at("intervals");
  EXPECT_EQ(intervals.at("samples"), samples);
  EXPECT_GT(intervals.at("entries").get<int>(), 20);
  EXPECT_EQ(intervals.at("by_entry").size(), intervals.at("entries").get<std::size_t>());
  // Every interval holds its median: p10 <= p50 <= p90.
  for (const auto& entry : intervals.at("by_entry"))
    for (const auto& q : entry.at("p10_p50_p90")) {
      EXPECT_LE(q[0].get<double>(), q[1].get<double>()) << entry.at("id");
      EXPECT_LE(q[1].get<double>(), q[2].get<double>()) << entry.at("id");
    }
  // The plan command applies the shipped time family's sigma.
  const auto plan = run_lcsim("plan '" + std::string(LCSIM_SOURCE_DIR) + "/scenarios/default.json' -n 2 --samples 3 " +
                              "--quiet --json '" + path("p.json") + "'");
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  const auto results = nlohmann::json::parse(read_file(path("p.json")));
  EXPECT_EQ(results.at("uncertainty").at("model_form_log_sigma"), shipped.at("families").at("time").at("log_sigma"));
  EXPECT_EQ(results.at("uncertainty").at("model_form_file"), "scenarios/validation/model-form.json");
}

TEST_F(UncertaintyCliTest, OneSampleGivesNoIntervalsAndABadModelFormFileIsNamed) {
  const auto run = run_lcsim("validate --jobs 2 --samples 1 --only skrull-table3-rr-vs-deepspeed");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_FALSE(contains(run.output, "coverage: "));
  std::ofstream(path("bad.json")) << R"({"schema": "lcsim-model-form/1", "families": {}})";
  const auto bad = run_lcsim("plan '" + std::string(LCSIM_SOURCE_DIR) + "/scenarios/default.json' -n 1 --model-form '" +
                             path("bad.json") + "'");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_TRUE(contains(bad.output, path("bad.json") + ": families.time: missing"));
  std::ofstream(path("number.json")) << R"({"schema": 3})";
  const auto number = run_lcsim("plan '" + std::string(LCSIM_SOURCE_DIR) + "/scenarios/default.json' -n 1 " +
                                "--model-form '" + path("number.json") + "'");
  EXPECT_EQ(number.exit_code, 2) << number.output;
  EXPECT_TRUE(contains(number.output, path("number.json") + ": schema: expected \"lcsim-model-form/1\""));
}

}  // namespace uncertainty_cli_test
