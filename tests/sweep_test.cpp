// Sweep files: strict parsing, cartesian expansion in axis order, each axis changing the right scenario field,
// and impossible points rejected before anything runs.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/errors.hpp"
#include "formats/scenario.hpp"
#include "studies/sweep.hpp"

namespace lcsim {
namespace sweep_test {

using Json = nlohmann::json;
const std::string kSourceDir = LCSIM_SOURCE_DIR;

Json sweep_doc(Json axes) {
  return Json{{"name", "t"}, {"base", kSourceDir + "/scenarios/default.json"}, {"mode", "plan"}, {"axes", axes}};
}

std::string error_of(const Json& doc) {
  try {
    expand_sweep(sweep_from_json(doc, "s.json"));
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError";
  return "";
}

TEST(Sweep, CartesianProductInAxisOrderLastAxisFastest) {
  const Sweep sweep = sweep_from_json(sweep_doc(Json::parse(R"([
      {"name": "gpus", "values": [8, 32]},
      {"name": "dataset", "values": ["wikipedia", "chatqa2-long-sft", "tulu3"]}])")),
                                      "s.json");
  const auto points = expand_sweep(sweep);
  ASSERT_EQ(points.size(), 6U);
  EXPECT_EQ(points[1].coordinates[0].second, 8);
  EXPECT_EQ(points[1].coordinates[1].second, "chatqa2-long-sft");
  EXPECT_EQ(points[3].coordinates[0].second, 32);
  EXPECT_EQ(points[3].coordinates[1].second, "wikipedia");
  // gpus=8 with cp=8: one node, dp=1; gpus=32: four nodes, dp=4.
  EXPECT_EQ(points[0].scenario["cluster"]["nodes"], 1);
  EXPECT_EQ(points[0].scenario["parallel"]["dp"], 1);
  EXPECT_EQ(points[4].scenario["cluster"]["nodes"], 4);
  EXPECT_EQ(points[4].scenario["parallel"]["dp"], 4);
  EXPECT_EQ(points[4].scenario["dataset"]["distribution"], "chatqa2-long-sft");
  // The base's relative profile path is made absolute, so the point parses from anywhere.
  const Scenario parsed = scenario_from_json(points[4].scenario, "/elsewhere/point.json");
  EXPECT_EQ(parsed.profile_path, kSourceDir + "/calibrate/profiles/h100-sxm-default.json");
  EXPECT_EQ(parsed.layout.dp, 4);
}

TEST(Sweep, BatchSizePerDpScalesWithTheGpuAxis) {
  const auto points = expand_sweep(sweep_from_json(
      sweep_doc(Json::parse(R"([{"name": "batch_size_per_dp", "values": [8]}, {"name": "gpus", "values": [16, 64]}])")),
      "s.json"));
  ASSERT_EQ(points.size(), 2U);
  EXPECT_EQ(points[0].scenario["training"]["global_batch_sequences"], 16);  // dp 2 x 8
  EXPECT_EQ(points[1].scenario["training"]["global_batch_sequences"], 64);  // dp 8 x 8
}

TEST(Sweep, TokensPerGpuScalesTheBudgetWithTheGpuAxis) {
  const auto points = expand_sweep(sweep_from_json(
      sweep_doc(Json::parse(R"([{"name": "tokens_per_gpu", "values": [1000]}, {"name": "gpus", "values": [16, 64]}])")),
      "s.json"));
  EXPECT_EQ(points[0].scenario["training"]["tokens_per_iteration"], 16000);
  EXPECT_EQ(points[1].scenario["training"]["tokens_per_iteration"], 64000);
  EXPECT_FALSE(points[1].scenario["training"].contains("global_batch_sequences"));
}

TEST(Sweep, ClusterAxisSetsItsKeysBeforeTheGpuCount) {
  // Listed after gpus, applied before it: 64 GPUs on nodes of 4 are 16 nodes, in NVLink domains of 8.
  const auto points = expand_sweep(sweep_from_json(sweep_doc(Json::parse(R"([
      {"name": "gpus", "values": [64]},
      {"name": "cluster", "values": [
          {"label": "fat-tree"},
          {"label": "domains of 8", "gpus_per_node": 4, "topology": "nvlink-domain", "domain_gpus": 8}]}])")),
                                                   "s.json"));
  ASSERT_EQ(points.size(), 2U);
  EXPECT_EQ(points[0].scenario["cluster"]["nodes"], 8);
  EXPECT_EQ(points[1].scenario["cluster"]["nodes"], 16);
  EXPECT_EQ(points[1].scenario["cluster"]["domain_gpus"], 8);
  EXPECT_FALSE(points[1].scenario["cluster"].contains("label"));
  EXPECT_EQ(scenario_from_json(points[1].scenario, "p.json").cluster.topology().domain_size(), 8);
  EXPECT_NE(points[1].scenario["name"].get<std::string>().find("cluster=domains of 8"), std::string::npos);
  // Null removes a key; a value without a label, or a key the topology does not take, names the point.
  EXPECT_NE(error_of(sweep_doc(Json::parse(R"([{"name": "cluster", "values": [{"topology": "rail-optimized"}]}])")))
                .find("axis cluster takes objects"),
            std::string::npos);
  EXPECT_NE(error_of(sweep_doc(Json::parse(R"([{"name": "cluster", "values": [{"label": "x", "pxn": true}]}])")))
                .find("cluster.pxn"),
            std::string::npos);
  const auto removed = expand_sweep(sweep_from_json(
      sweep_doc(Json::parse(R"([{"name": "cluster", "values": [{"label": "x", "ib_latency_us": null}]}])")), "s.json"));
  EXPECT_FALSE(removed[0].scenario["cluster"].contains("ib_latency_us"));
}

TEST(Sweep, TrainingAxesReplaceTheirFields) {
  const auto points = expand_sweep(sweep_from_json(sweep_doc(Json::parse(R"([
      {"name": "tokens_per_iteration", "values": [100000]},
      {"name": "bucket_size_tokens", "values": [8192]},
      {"name": "model", "values": ["Qwen2.5-7B"]}])")),
                                                   "s.json"));
  const Json& t = points[0].scenario["training"];
  EXPECT_EQ(t["tokens_per_iteration"], 100000);
  EXPECT_FALSE(t.contains("global_batch_sequences"));
  EXPECT_EQ(t["bucket_size_tokens"], 8192);
  EXPECT_EQ(points[0].scenario["model"], "Qwen2.5-7B");
}

TEST(Sweep, IterationsOverrideEveryPoint) {
  Json doc = sweep_doc(Json::parse(R"([{"name": "gpus", "values": [8]}])"));
  doc["iterations"] = 3;
  EXPECT_EQ(expand_sweep(sweep_from_json(doc, "s.json"))[0].scenario["training"]["iterations"], 3);
}

TEST(Sweep, IterationsAreBoundedAndDuplicateKeysRefused) {
  Json doc = sweep_doc(Json::parse(R"([{"name": "gpus", "values": [8]}])"));
  doc["iterations"] = 1000000;
  EXPECT_NE(error_of(doc).find("s.json: iterations: must be in [1, 10000], got 1000000"), std::string::npos);
  const auto file = std::filesystem::temp_directory_path() / ("lcsim-sweep-" + std::to_string(::getpid()));
  std::ofstream(file) << R"({"name": "t", "name": "u"})";
  try {
    load_sweep(file.string());
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), file.string() + ": name: duplicate key");
  }
  std::filesystem::remove(file);
}

TEST(Sweep, StrictFileAndImpossiblePoints) {
  EXPECT_NE(error_of(sweep_doc(Json::parse(R"([{"name": "gpu", "values": [8]}])"))).find("s.json: axes[0].name"),
            std::string::npos);
  Json extra = sweep_doc(Json::parse(R"([{"name": "gpus", "values": [8]}])"));
  extra["bogus"] = 1;
  EXPECT_NE(error_of(extra).find("s.json: bogus: unknown key"), std::string::npos);
  Json bad_mode = sweep_doc(Json::parse(R"([{"name": "gpus", "values": [8]}])"));
  bad_mode["mode"] = "fast";
  EXPECT_NE(error_of(bad_mode).find("mode"), std::string::npos);
  // 12 GPUs are not whole nodes of 8; 4 GPUs cannot hold the CP group of 8.
  EXPECT_NE(error_of(sweep_doc(Json::parse(R"([{"name": "gpus", "values": [12]}])"))).find("point 0 (gpus=12)"),
            std::string::npos);
  EXPECT_NE(error_of(sweep_doc(Json::parse(R"([{"name": "gpus", "values": [4]}])"))).find("cp x tp x pp"),
            std::string::npos);
  // A dataset name the scenario parser rejects names the point.
  const std::string message = error_of(sweep_doc(Json::parse(R"([{"name": "dataset", "values": ["nope"]}])")));
  EXPECT_NE(message.find("point 0 (dataset=\"nope\")"), std::string::npos) << message;
  EXPECT_NE(message.find("dataset.distribution"), std::string::npos) << message;
}

TEST(Sweep, TooManyPointsAreRefusedBeforeExpanding) {
  Json gpus = Json::array(), lengths = Json::array();
  for (int i = 1; i <= 400; ++i) {
    gpus.push_back(8 * i);
    lengths.push_back(1024 * i);
  }
  const Json axes = Json::array(
      {Json{{"name", "gpus"}, {"values", gpus}}, Json{{"name", "context_length_tokens"}, {"values", lengths}}});
  EXPECT_NE(error_of(sweep_doc(axes)).find("s.json: axes: more than 100000 points"), std::string::npos);
  EXPECT_EQ(sweep_point_count(sweep_from_json(sweep_doc(Json::array({axes[0]})), "s.json")), 400U);
}

// Every shipped sweep expands (each point passes the scenario parser), and the scaling sweeps reach from 8 to 1024
// GPUs with one node of the base per 8 GPUs and a batch that grows with the GPU count.
TEST(Sweep, ShippedSweepsExpandAndScalingSweepsSpan8To1024Gpus) {
  int scaling_sweeps = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kSourceDir + "/scenarios/sweeps")) {
    SCOPED_TRACE(entry.path().string());
    const Sweep sweep = load_sweep(entry.path().string());
    const auto points = expand_sweep(sweep);
    ASSERT_FALSE(points.empty());
    if (sweep.name.find("scaling") == std::string::npos) continue;
    ++scaling_sweeps;
    const Json& first = points.front().scenario;
    const Json& last = points.back().scenario;
    EXPECT_EQ(points.front().coordinates[0].second, 8);
    EXPECT_EQ(points.back().coordinates[0].second, 1024);
    EXPECT_EQ(last["cluster"]["nodes"].get<int>() * last["cluster"]["gpus_per_node"].get<int>(), 1024);
    const char* budget =
        first["training"].contains("tokens_per_iteration") ? "tokens_per_iteration" : "global_batch_sequences";
    EXPECT_DOUBLE_EQ(last["training"][budget].get<double>(), first["training"][budget].get<double>() * 128);
  }
  EXPECT_EQ(scaling_sweeps, 3);  // Skrull, Hydraulis, HBP
}

}  // namespace sweep_test
}  // namespace lcsim
