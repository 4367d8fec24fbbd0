// `lcsim-gpu live`'s reports (live/live_report.hpp) from a made-up measurement: the results file (schema
// lcsim-results/2, mode live, predicted figures beside the measured ones, null for what was not measured), the
// table (saying how the run was executed and where the prediction comes from) and the Chrome trace.
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>

#include <unistd.h>

#include "base/json_reader.hpp"
#include "live/live_report.hpp"

namespace lcsim {
namespace live_report_test {

const std::string kScenario = LCSIM_SOURCE_DIR "/scenarios/live/qwen2.5-0.5b-wikipedia-dp1-cp8.json";

struct Fixture {
  LivePlans live;
  Prediction prediction;
  LiveExecution execution;
};

/// Two iterations per policy, measured 10% slower than the replay; skrull's second one out of memory on GPU 3.
Fixture fixture() {
  Fixture f{plan_live(load_and_prepare(kScenario, 2), {}), {}, {}};
  f.prediction = predict_by_replay(f.live);
  f.execution.execution = "rank-serial: the compute of all 8 GPUs in turn on GPU 0";
  f.execution.device = "test device";
  f.execution.collectives = "from the profile (rank-serial)";
  f.execution.notes = {"a note"};
  for (const LivePolicyPlans& p : f.live.policies) {
    f.execution.iterations.emplace_back();
    for (const auto& replay : p.model_replay) {
      MeasuredIteration m;
      m.seconds = replay.seconds * 1.1;
      m.busy_seconds = replay.busy_seconds;
      m.peak_bytes = replay.peak_bytes;
      m.spans = {{0, 0.0, m.seconds / 2, program::WorkKind::Compute, 0, 0}};
      f.execution.iterations.back().push_back(m);
    }
  }
  MeasuredIteration& oom = f.execution.iterations[1][1];
  oom.seconds = std::numeric_limits<double>::quiet_NaN();
  oom.oom_gpus = {3};
  oom.oom_error = "GPU 3: cudaMalloc failed";
  oom.spans.clear();
  return f;
}

TEST(LiveReport, ResultsFileHoldsMeasuredAndPredictedFigures) {
  const Fixture f = fixture();
  const nlohmann::ordered_json j = live_results_json(f.live, f.prediction, f.execution);
  EXPECT_EQ(j["schema"], "lcsim-results/2");
  EXPECT_EQ(j["mode"], "live");
  EXPECT_EQ(j["live"]["execution"], f.execution.execution);
  EXPECT_EQ(j["live"]["collectives"], "from the profile (rank-serial)");
  EXPECT_EQ(j["live"]["prediction"], f.prediction.label);
  const auto& base = j["policies"][0];
  EXPECT_EQ(base["name"], "deepspeed");
  const double predicted = f.prediction.seconds[0][0];
  EXPECT_NEAR(base["iterations"][0]["seconds"].get<double>(), predicted * 1.1, 1e-8 * predicted);
  EXPECT_NEAR(base["iterations"][0]["predicted_s"].get<double>(), predicted, 1e-8 * predicted);
  EXPECT_NEAR(base["iterations"][0]["error"].get<double>(), 1 / 1.1 - 1, 1e-8);
  EXPECT_NEAR(base["mape"].get<double>(), 1 - 1 / 1.1, 1e-8);
  EXPECT_NEAR(base["speedup_vs_baseline"].get<double>(), 1.0, 1e-12);
  EXPECT_GT(base["iterations"][0]["predicted_peak_GiB"].get<double>(), 0);
  // The out-of-memory iteration: no time, no error, no time summary or measured speedup for its policy.
  const auto& skrull = j["policies"][1];
  EXPECT_TRUE(skrull["iterations"][1]["seconds"].is_null());
  EXPECT_TRUE(skrull["iterations"][1]["oom"].get<bool>());
  EXPECT_EQ(skrull["iterations"][1]["oom_gpus"], nlohmann::ordered_json::array({3}));
  EXPECT_EQ(skrull["iterations"][1]["oom_error"], "GPU 3: cudaMalloc failed");
  EXPECT_TRUE(skrull["iterations"][1]["error"].is_null());
  EXPECT_TRUE(skrull["mean_iteration_s"].is_null());
  EXPECT_TRUE(skrull["speedup_vs_baseline"].is_null());
  EXPECT_EQ(skrull["oom_iterations"], 1);
  EXPECT_GT(skrull["predicted_speedup"].get<double>(), 1);
  EXPECT_NEAR(skrull["mape"].get<double>(), 1 - 1 / 1.1, 1e-8);  // over the measured iteration
}

TEST(LiveReport, ResultsFileListsEveryJobWithItsPredictedAndMeasuredSeconds) {
  Fixture f = fixture();
  EXPECT_FALSE(live_results_json(f.live, f.prediction, f.execution).contains("jobs"));  // parallel runs: no jobs
  JobTable table;
  for (std::size_t p = 0; p < f.live.policies.size(); ++p)
    for (const auto& program : f.live.policies[p].programs)
      table.add(program, f.live.loaded.scenario.model, static_cast<int>(p));
  for (std::size_t k = 0; k < table.jobs().size(); ++k)
    f.execution.jobs.push_back(
        {table.jobs()[k], table.uses()[k], 0.001, 0.002, 0.003 + 1e-6 * static_cast<double>(k), 1e9, false});
  const nlohmann::ordered_json j = live_results_json(f.live, f.prediction, f.execution);
  ASSERT_EQ(j["jobs"].size(), table.jobs().size());
  bool saw_skrull_job = false, saw_sharded_deepspeed_job = false;
  for (std::size_t k = 0; k < table.jobs().size(); ++k) {
    const auto& job = j["jobs"][k];
    const JobUse& use = table.uses()[k];
    EXPECT_NEAR(job["measured_s"]["whole"].get<double>(), 0.003 + 1e-6 * static_cast<double>(k), 1e-12);
    if (!table.jobs()[k].timed) {
      EXPECT_EQ(job["steps"], 0);  // a memory probe: no step runs it
      continue;
    }
    if (table.jobs()[k].kind != DeviceJob::Kind::Layers) continue;
    EXPECT_GT(job["steps"].get<int>(), 0);
    EXPECT_NEAR(job["predicted_s"]["whole"].get<double>(), use.predicted_whole_s, 1e-8 * use.predicted_whole_s);
    EXPECT_EQ(job["predicted_spread"].get<double>(), 0.0);  // equal shapes cost the same
    EXPECT_EQ(job["rows"].get<std::int64_t>(), table.jobs()[k].shape.rows());
    const auto& owners = job["policies"];
    const auto owned_by = [&](const char* p) { return std::find(owners.begin(), owners.end(), p) != owners.end(); };
    saw_skrull_job = saw_skrull_job || owned_by("skrull");
    // DeepSpeed's static Ulysses CP shards every sequence.
    saw_sharded_deepspeed_job = saw_sharded_deepspeed_job || (owned_by("deepspeed") && !job["sharded_tokens"].empty());
  }
  EXPECT_TRUE(saw_skrull_job);
  EXPECT_TRUE(saw_sharded_deepspeed_job);
}

TEST(LiveReport, TableSaysHowItRanAndWhereThePredictionComesFrom) {
  const Fixture f = fixture();
  std::ostringstream out;
  print_live_report(f.live, f.prediction, f.execution, out);
  const std::string text = out.str();
  for (const std::string& part :
       {std::string("mode       live, rank-serial"), std::string("collectives from the profile"),
        "predicted  " + f.prediction.label, std::string("Qwen2.5-0.5B, 24 layers"), std::string("note       a note"),
        std::string("-9.1%"), std::string("OOM: skrull iteration 1, GPU(s) 3: the plan predicts a peak of"),
        std::string("GPU 3: cudaMalloc failed"), std::string("speedup meas")})
    EXPECT_NE(text.find(part), std::string::npos) << part << "\n" << text;
}

TEST(LiveReport, TraceUsesTheSimulatorsTrackLayout) {
  const Fixture f = fixture();
  const std::string file =
      (std::filesystem::temp_directory_path() / ("live-trace-" + std::to_string(::getpid()) + ".json")).string();
  write_live_trace(f.live, f.execution, file);
  const nlohmann::json trace = parse_json_file(file);
  std::filesystem::remove(file);
  int markers = 0, gpu_groups = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"] == "GPU 7 (node 0)") ++gpu_groups;
    if (e["ph"] == "X" && e["cat"] == "iteration") ++markers;
  }
  EXPECT_EQ(gpu_groups, 1);
  EXPECT_EQ(markers, 3);  // four iterations, one out of memory
}

}  // namespace live_report_test
}  // namespace lcsim
