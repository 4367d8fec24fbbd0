// Chrome trace timelines: valid JSON that Perfetto reads, one track group per GPU, idle gaps filled.
#include "formats/timeline.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "base/errors.hpp"
#include "formats/chrome_trace.hpp"
#include "tests/policy_test_fixtures.hpp"

namespace lcsim {
namespace sim_timeline_test {

std::filesystem::path temp_file(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("lcsim-timeline-" + std::to_string(::getpid()) + "-" + name + ".json");
}

nlohmann::json read_json(const std::filesystem::path& file) {
  std::ifstream in(file);
  return nlohmann::json::parse(in);
}

TEST(SimTimeline, ChromeTraceWriterEscapesAndCloses) {
  const auto file = temp_file("writer");
  {
    ChromeTraceWriter writer(file.string());
    writer.name_process(3, "GPU \"2\"", 3);
    TraceSpan span{3, 1, 0.5, 0.75, "a \"quoted\" name", "compute", {}};
    span.args.emplace_back("micro_batch", 4);
    writer.add(span);
    writer.close();
  }
  const nlohmann::json trace = read_json(file);
  const auto& events = trace.at("traceEvents");
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0]["args"]["name"], "GPU \"2\"");
  EXPECT_EQ(events[2]["name"], "a \"quoted\" name");
  EXPECT_EQ(events[2]["ph"], "X");
  EXPECT_DOUBLE_EQ(events[2]["ts"].get<double>(), 500000.0);  // microseconds
  EXPECT_DOUBLE_EQ(events[2]["dur"].get<double>(), 250000.0);
  EXPECT_EQ(events[2]["args"]["micro_batch"], 4);
  std::filesystem::remove(file);
}

TEST(SimTimeline, AnUnclosedTraceLeavesThePreviousFile) {
  const auto file = temp_file("previous");
  std::ofstream(file) << "previous run";
  {
    ChromeTraceWriter writer(file.string());
    writer.add(TraceSpan{1, 0, 0, 1, "compute", "compute", {}});
    // The run fails here: close() is never called.
  }
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "previous run");
  // No temporary file is left beside it.
  for (const auto& entry : std::filesystem::directory_iterator(file.parent_path()))
    EXPECT_EQ(entry.path().filename().string().find("." + file.filename().string() + ".tmp"), std::string::npos);
  std::filesystem::remove(file);
}

TEST(SimTimeline, UnwritableFileIsAnInputError) {
  EXPECT_THROW(ChromeTraceWriter("/nonexistent-dir/trace.json"), InputError);
}

TEST(SimTimeline, SpansAreNamedBySequencesAndGapsBecomeIdle) {
  ClusterSpec cluster = testing::tiny_cluster(1, 2);
  IterationPlan plan;
  plan.label = "batch 0";
  plan.replicas = {testing::replica(
      testing::scheme(1, 1, 2), {0, 1},
      {testing::micro_batch({testing::on_rank(11, 10, 0), testing::on_rank(12, 5, 1), testing::sharded(13, 20)})})};
  program::IterationOutcome outcome;
  outcome.start_s = 10;
  outcome.seconds = 5;
  outcome.busy_seconds = {4, 2};
  // GPU 0: compute [10, 12] and the all-to-all [12, 14]; GPU 1: compute [10, 11], then waits, all-to-all.
  outcome.spans = {{0, 10, 12, program::WorkKind::Compute, 0, 0},
                   {0, 12, 14, program::WorkKind::CpAllToAll, 0, 0},
                   {1, 10, 11, program::WorkKind::Compute, 0, 0},
                   {1, 12, 14, program::WorkKind::CpAllToAll, 0, 0}};
  const auto file = temp_file("outcome");
  {
    TimelineWriter writer(file.string(), cluster);
    writer.add_iteration("skrull", 0, plan, outcome);
    writer.close();
  }
  const nlohmann::json trace = read_json(file);
  std::map<std::string, nlohmann::json> by_name;
  std::vector<nlohmann::json> idle;
  for (const auto& e : trace.at("traceEvents")) {
    if (e["ph"] != "X") continue;
    if (e["cat"] == "idle")
      idle.push_back(e);
    else
      by_name[e["name"].get<std::string>() + "@" + std::to_string(e["pid"].get<int>())] = e;
  }
  // GPU 0 (pid 1) works on sequence 11 (its CP rank's) and the sharded 13; GPU 1 on 12 and 13.
  ASSERT_TRUE(by_name.count("compute mb 0 [seq 11, 13]@1"));
  ASSERT_TRUE(by_name.count("compute mb 0 [seq 12, 13]@2"));
  EXPECT_EQ(by_name["compute mb 0 [seq 11, 13]@1"]["tid"], 0);
  EXPECT_EQ(by_name["CP all-to-all mb 0 [seq 11, 13]@1"]["tid"], 1);
  EXPECT_EQ(by_name["compute mb 0 [seq 11, 13]@1"]["args"]["sequences"], nlohmann::json({11, 13}));
  ASSERT_TRUE(by_name.count("skrull iteration 0@0"));
  EXPECT_DOUBLE_EQ(by_name["skrull iteration 0@0"]["dur"].get<double>(), 5e6);
  // Idle: GPU 0 after 14 s (1 s); GPU 1 between 11 and 12 s and after 14 s.
  ASSERT_EQ(idle.size(), 3u);
  double idle_us = 0;
  for (const auto& e : idle) idle_us += e["dur"].get<double>();
  EXPECT_DOUBLE_EQ(idle_us, 3e6);
  std::filesystem::remove(file);
}

}  // namespace sim_timeline_test
}  // namespace lcsim
