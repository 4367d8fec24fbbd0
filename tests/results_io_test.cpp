// Results JSON/CSV and the comparison table: schema, key order, number formatting, determinism.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "base/errors.hpp"
#include "formats/results_io.hpp"
#include "formats/scenario_loader.hpp"
#include "studies/evaluation.hpp"

namespace lcsim {
namespace results_io_test {

const std::string kSourceDir = LCSIM_SOURCE_DIR;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << part << "\" not found in:\n" << text;
}

std::vector<std::string> keys_of(const nlohmann::ordered_json& object) {
  std::vector<std::string> keys;
  for (const auto& [key, _] : object.items()) keys.push_back(key);
  return keys;
}

RunResults sample_results() {
  RunResults r;
  r.mode = "plan";
  r.scenario = "demo";
  r.scenario_file = "scenarios/demo.json";
  r.seed = 42;
  r.profile_label = "uncalibrated (derived from public figures)";
  r.calibrated = false;
  r.dataset_label = "synthetic tulu3 (sampled, seed 42)";
  r.baseline = "base";
  PolicyResult base;
  base.label = "base";
  base.kind = "deepspeed";
  base.mean_iteration_s = 0.1 + 0.2;  // 0.30000000000000004 in binary: written as 0.3
  base.p50_iteration_s = 0.25;
  base.p99_iteration_s = 0.35;
  base.total_s = 0.6;
  base.tokens = 3000;
  base.tokens_per_s = 5000;
  base.speedup_vs_baseline = 1;
  base.oom_iterations = 1;
  base.metrics = {0.5, 0.25, 0.125, 0.0, std::numeric_limits<double>::infinity()};
  base.planning_ms = 12.5;
  IterationResult it;
  it.index = 0;
  it.label = "group, a";
  it.seconds = 0.25;
  it.tokens = 1000;
  it.sequences = 3;
  it.oom = true;
  it.peak_bytes = 3 * kGiB;
  it.metrics = {0.5, 0.25, 0.125, 0.0, 2.0};
  it.busy_seconds = {0.25, 0.125};
  base.iterations.push_back(it);
  it.index = 1;
  it.label = "";
  it.oom = false;
  it.peak_bytes = 1.5 * kGiB;
  base.iterations.push_back(it);
  r.policies.push_back(base);
  PolicyResult fast = base;
  fast.label = "fast";
  fast.kind = "sorted";
  fast.speedup_vs_baseline = 2.0 / 3.0;  // rounded to 9 significant digits
  fast.oom_iterations = 0;
  r.policies.push_back(fast);
  return r;
}

TEST(ResultsIoJson, SchemaKeysInFixedOrder) {
  const auto j = results_to_json(sample_results());
  EXPECT_EQ(keys_of(j), (std::vector<std::string>{"schema", "mode", "scenario", "scenario_file", "seed", "profile",
                                                  "dataset", "baseline", "paper_figures", "policies", "uncertainty"}));
  EXPECT_EQ(j["schema"], "lcsim-results/2");
  EXPECT_EQ(keys_of(j["uncertainty"]), (std::vector<std::string>{"samples", "sources", "model_form_log_sigma",
                                                                 "model_form_file", "winner", "p_winner"}));
  EXPECT_EQ(j["paper_figures"], nlohmann::ordered_json::array());
  EXPECT_EQ(j["seed"], 42);
  EXPECT_EQ(keys_of(j["profile"]), (std::vector<std::string>{"label", "calibrated"}));
  EXPECT_EQ(j["profile"]["calibrated"], false);
  ASSERT_EQ(j["policies"].size(), 2u);
  const auto& p = j["policies"][0];
  EXPECT_EQ(keys_of(p),
            (std::vector<std::string>{"name", "kind", "mean_iteration_s", "p50_iteration_s", "p99_iteration_s",
                                      "total_s", "tokens", "tokens_per_s", "speedup_vs_baseline", "oom_iterations",
                                      "metrics", "iterations", "interval"}));
  EXPECT_EQ(keys_of(p["interval"]),
            (std::vector<std::string>{"samples", "iteration_s", "speedup", "tokens_per_s", "p_beats_baseline",
                                      "world_iteration_s", "world_speedup", "world_peak_GiB", "world_metrics"}));
  EXPECT_EQ(keys_of(p["metrics"]),
            (std::vector<std::string>{"dbr", "pr", "abr", "abr_work", "cr", "max_min_time_ratio", "pipeline_gap"}));
  const auto& it = p["iterations"][0];
  EXPECT_EQ(keys_of(it["metrics"]),
            (std::vector<std::string>{"dbr", "pr", "abr", "cr", "max_min_time_ratio", "pipeline_gap"}));
  EXPECT_EQ(keys_of(it), (std::vector<std::string>{"index", "label", "seconds", "tokens", "sequences", "oom",
                                                   "peak_GiB", "metrics", "busy_s"}));
  EXPECT_EQ(it["oom"], true);
  EXPECT_EQ(it["peak_GiB"], 3.0);
  EXPECT_EQ(p["iterations"][1]["peak_GiB"], 1.5);
  EXPECT_EQ(it["busy_s"], nlohmann::ordered_json::parse("[0.25, 0.125]"));
  EXPECT_EQ(p["name"], "base");
  EXPECT_EQ(j["policies"][1]["kind"], "sorted");
}

TEST(ResultsIoJson, PaperFiguresAreCarried) {
  RunResults results = sample_results();
  results.paper_figures.push_back({"sorted", 3.76, "Skrull Sec. 5"});
  const auto j = results_to_json(results);
  EXPECT_EQ(j["paper_figures"].dump(), R"([{"policy":"sorted","speedup":3.76,"source":"Skrull Sec. 5"}])");
}

TEST(ResultsIoJson, NumbersRoundedAndNonFiniteAsNull) {
  const std::string text = results_to_json(sample_results()).dump();
  EXPECT_TRUE(contains(text, "\"mean_iteration_s\":0.3,"));
  EXPECT_TRUE(contains(text, "\"speedup_vs_baseline\":0.666666667,"));
  EXPECT_TRUE(contains(text, "\"max_min_time_ratio\":null,"));
  // Wall time varies between runs: it is printed, never written.
  EXPECT_FALSE(contains(text, "planning"));
  EXPECT_FALSE(contains(text, "12.5"));
}

TEST(ResultsIoJson, WriteReadBackAndUnwritablePath) {
  const auto file = std::filesystem::temp_directory_path() / ("lcsim-results-" + std::to_string(::getpid()) + ".json");
  write_results_json(sample_results(), file.string());
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove(file);
  EXPECT_EQ(text.str(), results_to_json(sample_results()).dump(2) + "\n");
  EXPECT_THROW(write_results_json(sample_results(), "/nonexistent-dir/x/results.json"), InputError);
}

TEST(ResultsIoCsv, OneRowPerPolicyAndIterationWithQuoting) {
  const std::string csv = results_to_csv(sample_results());
  std::vector<std::string> lines;
  std::stringstream in(csv);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 5u);  // header + 2 policies x 2 iterations
  EXPECT_EQ(lines[0],
            "policy,kind,iteration,label,seconds,tokens,sequences,oom,peak_GiB,dbr,pr,abr,cr,"
            "max_min_time_ratio,pipeline_gap,samples,iteration_s_p10,iteration_s_p50,iteration_s_p90,speedup_p10,"
            "speedup_p50,speedup_p90,p_beats_baseline");
  EXPECT_EQ(lines[1], "base,deepspeed,0,\"group, a\",0.25,1000,3,1,3,0.5,0.25,0.125,0,2,0,1,0,0,0,0,0,0,0");
  EXPECT_EQ(lines[2], "base,deepspeed,1,,0.25,1000,3,0,1.5,0.5,0.25,0.125,0,2,0,1,0,0,0,0,0,0,0");
  EXPECT_EQ(lines[4].substr(0, 13), "fast,sorted,1");
}

TEST(ResultsIoTable, HeaderProfileLineThenAlignedRows) {
  std::ostringstream out;
  print_results_table(sample_results(), out);
  std::vector<std::string> lines;
  std::stringstream in(out.str());
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  // 5 header lines, column header, 2 policies, 3 legend lines, the line naming the policies that do not fit
  ASSERT_EQ(lines.size(), 12u);
  EXPECT_TRUE(contains(lines[0], "demo (scenarios/demo.json)"));
  EXPECT_TRUE(contains(lines[1], "plan"));
  EXPECT_TRUE(contains(lines[2], "synthetic tulu3"));
  EXPECT_TRUE(contains(lines[3], "base"));
  // The profile's label sits right above the table, so an uncalibrated prediction is never read without it.
  EXPECT_EQ(lines[4], "profile   uncalibrated (derived from public figures)");
  EXPECT_EQ(lines[5].substr(0, 6), "policy");
  EXPECT_EQ(lines[5].size(), lines[6].size());
  EXPECT_EQ(lines[6].size(), lines[7].size());
  EXPECT_TRUE(contains(lines[6], "0.3000"));
  EXPECT_TRUE(contains(lines[6], "1.00x"));
  EXPECT_TRUE(contains(lines[6], "OOM 1/2"));  // an OOM iteration marks the row
  EXPECT_TRUE(contains(lines[11], "OOM: base runs out of GPU memory"));
  EXPECT_TRUE(contains(lines[6], "12.5"));
  EXPECT_TRUE(contains(lines[7], "0.67x"));
  EXPECT_TRUE(contains(lines[7], "0/2"));
  // Right-aligned numbers: every row ends with the plan ms column.
  EXPECT_EQ(lines[6].substr(lines[6].size() - 4), "12.5");
}

// ---- the whole pipeline: same scenario, same bytes ----

TEST(ResultsIoPipeline, TwoEvaluationsGiveByteIdenticalJson) {
  const std::string file = kSourceDir + "/scenarios/default.json";
  const LoadedScenario first = load_and_prepare(file, 2);
  const RunResults a = evaluate_plans(first, {});
  const LoadedScenario second = load_and_prepare(file, 2);
  const RunResults b = evaluate_plans(second, {});
  const std::string text = results_to_json(a).dump(2);
  EXPECT_EQ(text, results_to_json(b).dump(2));
  EXPECT_EQ(results_to_csv(a), results_to_csv(b));

  const auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["mode"], "plan");
  EXPECT_EQ(j["baseline"], "deepspeed");
  EXPECT_EQ(j["profile"]["calibrated"], false);
  EXPECT_TRUE(contains(j["dataset"].get<std::string>(), "synthetic"));
  ASSERT_EQ(j["policies"].size(), first.scenario.policies.size());
  Tokens window = 0;
  for (const auto& batch : first.batches)
    for (const auto& s : batch) window += s.tokens;
  for (const auto& p : j["policies"]) {
    // Every policy processes exactly the window's tokens.
    EXPECT_EQ(p["tokens"].get<Tokens>(), window) << p["name"];
    EXPECT_GT(p["mean_iteration_s"].get<double>(), 0) << p["name"];
    for (const auto& it : p["iterations"]) EXPECT_EQ(it["busy_s"].size(), 32u);
  }
  EXPECT_EQ(j["policies"][0]["speedup_vs_baseline"], 1.0);
}

TEST(ResultsIoIntervals, SampledRunsAddIntervalColumnsTheWinnerAndTheSources) {
  RunResults r = sample_results();
  r.policies[1].interval.samples = 8;
  r.policies[1].interval.iteration_s = {0.25, 0.5, 0.75};
  r.policies[1].interval.speedup = {0.5, 0.7, 1.25};
  r.policies[1].interval.p_beats_baseline = 0.375;
  r.policies[1].interval.world_speedup = {0.666666666666, 1.1};
  r.uncertainty = {8, {"dataset: resampled"}, 0.2, "mf.json", "base", 0.625};
  std::ostringstream out;
  print_results_table(r, out);
  const std::string text = out.str();
  EXPECT_TRUE(contains(text, "speedup p10-p90  P(>base)"));
  EXPECT_TRUE(contains(text, "0.67x  0.2500-0.7500       0.50-1.25x      0.38  0.500"));
  EXPECT_TRUE(contains(text, "1.00x  0.0000-0.0000       0.00-0.00x         -  0.500"));  // the baseline's P: -
  EXPECT_TRUE(contains(text,
                       "winner: base, the highest tokens/s of the policies that fit in memory in 62% of 8 "
                       "sampled worlds (P(winner) = 0.62)"));
  EXPECT_TRUE(contains(text, "  dataset: resampled\n"));
  const auto j = results_to_json(r);
  EXPECT_EQ(j["policies"][1]["interval"]["speedup"].dump(), R"({"p10":0.5,"p50":0.7,"p90":1.25})");
  EXPECT_EQ(j["policies"][1]["interval"]["world_speedup"].dump(), "[0.666666667,1.1]");
  EXPECT_EQ(j["uncertainty"]["p_winner"], 0.625);
  EXPECT_EQ(j["uncertainty"]["model_form_log_sigma"], 0.2);
  // One world: today's table, no interval columns.
  r.uncertainty.samples = 1;
  std::ostringstream one;
  print_results_table(r, one);
  EXPECT_FALSE(contains(one.str(), "P(>base)"));
  EXPECT_FALSE(contains(one.str(), "winner:"));
}

TEST(ResultsIoTable, FitsTheWidthItIsGivenAndSaysWhatItLeftOut) {
  RunResults r = sample_results();
  std::ostringstream wide, narrow;
  print_results_table(r, wide);
  print_results_table(r, narrow, 80);
  std::stringstream in(narrow.str());
  for (std::string line; std::getline(in, line);) EXPECT_LE(line.size(), 80u) << line;
  EXPECT_TRUE(contains(narrow.str(), "not shown: DBR, PR, ABR, ABRw, CR, plan ms (--wide shows every column)"));
  EXPECT_TRUE(contains(narrow.str(), "OOM iters"));
  EXPECT_FALSE(contains(wide.str(), "not shown"));
  EXPECT_TRUE(contains(wide.str(), "ABRw"));
}

TEST(ResultsIoJson, TheSpeedupReferenceIsWrittenOnlyWhenItIsNotTheBaseline) {
  RunResults r = sample_results();
  EXPECT_FALSE(results_to_json(r).contains("speedup_reference"));
  r.speedup_reference = "fast";
  EXPECT_EQ(results_to_json(r)["speedup_reference"], "fast");
  r.uncertainty.winner = "";
  EXPECT_TRUE(results_to_json(r)["uncertainty"]["winner"].is_null());
  std::ostringstream out;
  print_results_table(r, out);
  EXPECT_TRUE(contains(out.str(), "baseline  base (does not fit in GPU memory: speedups are over fast"));
  EXPECT_TRUE(contains(out.str(), "speedup: tokens/s over fast's, the fastest policy that fits"));
}

TEST(ResultsIoIntervals, LiveResultsCarryNoSampledWorlds) {
  RunResults r = sample_results();
  r.mode = "live";
  const auto j = results_to_json(r);
  EXPECT_FALSE(j.contains("uncertainty"));
  EXPECT_FALSE(j["policies"][0].contains("interval"));
}

}  // namespace results_io_test
}  // namespace lcsim
