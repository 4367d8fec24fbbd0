// parallel.cp_attention: parsed strictly, carried into the cost model, and refused for a profile that cannot time
// the ring.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "base/errors.hpp"
#include "formats/scenario.hpp"
#include "formats/scenario_loader.hpp"
#include "tests/scenario_test_support.hpp"

namespace lcsim {
namespace scenario_cp_attention_test {

using Json = nlohmann::json;

using testing::contains;
using testing::ScratchDir;
const std::string& kFile = testing::kScenarioFile;

/// One iteration of deepspeed: enough to load.
Json minimal() {
  Json doc = testing::minimal_scenario();
  doc["training"]["iterations"] = 1;
  doc["policies"] = Json::array({{{"kind", "deepspeed"}}});
  return doc;
}

std::string error_of(const Json& doc) {
  return testing::scenario_error(doc);
}

const std::string kSourceDir = LCSIM_SOURCE_DIR;

TEST(ScenarioCpAttention, DefaultsToUlysses) {
  EXPECT_EQ(scenario_from_json(minimal(), kFile).cp_attention, CpAttention::Ulysses);
  Json doc = minimal();
  doc.erase("parallel");  // no parallel object at all
  EXPECT_EQ(scenario_from_json(doc, kFile).cp_attention, CpAttention::Ulysses);
  doc["parallel"] = Json::object();
  EXPECT_EQ(scenario_from_json(doc, kFile).cp_attention, CpAttention::Ulysses);
}

TEST(ScenarioCpAttention, ParsesEveryMode) {
  Json doc = minimal();
  doc["parallel"]["cp_attention"] = "ring";
  EXPECT_EQ(scenario_from_json(doc, kFile).cp_attention, CpAttention::Ring);
  doc["parallel"]["cp_attention"] = "zigzag";
  EXPECT_EQ(scenario_from_json(doc, kFile).cp_attention, CpAttention::Zigzag);
  doc["parallel"]["cp_attention"] = "all-gather";
  EXPECT_EQ(scenario_from_json(doc, kFile).cp_attention, CpAttention::AllGather);
  doc["parallel"]["cp_attention"] = "ulysses";
  EXPECT_EQ(scenario_from_json(doc, kFile).cp_attention, CpAttention::Ulysses);
}

TEST(ScenarioCpAttention, BadValuesNameFileAndPath) {
  Json doc = minimal();
  doc["parallel"]["cp_attention"] = "Ring";  // case matters: nothing is guessed
  const std::string bad = error_of(doc);
  EXPECT_TRUE(contains(bad, kFile + ": parallel.cp_attention"));
  EXPECT_TRUE(contains(bad, "expected one of \"ulysses\", \"ring\", \"zigzag\", \"all-gather\""));
  doc["parallel"]["cp_attention"] = 1;
  EXPECT_TRUE(contains(error_of(doc), kFile + ": parallel.cp_attention"));
}

TEST(ScenarioCpAttention, LoadedCostModelUsesTheMode) {
  const LoadedScenario ring = load_and_prepare(kSourceDir + "/scenarios/skrull/qwen0.5b-chatqa2-ring.json", 1);
  const LoadedScenario ulysses = load_and_prepare(kSourceDir + "/scenarios/skrull/qwen0.5b-chatqa2.json", 1);
  EXPECT_EQ(ring.cost->options().cp_attention, CpAttention::Zigzag);
  EXPECT_EQ(ulysses.cost->options().cp_attention, CpAttention::Ulysses);
  // The shipped pair differs in the mode only: same data, same layout.
  EXPECT_EQ(ring.batches, ulysses.batches);
  EXPECT_EQ(ring.scenario.layout.cp, ulysses.scenario.layout.cp);
  EXPECT_EQ(ring.scenario.policies.size(), ulysses.scenario.policies.size());
}

TEST(ScenarioCpAttention, RingNeedsTheProfilesSendRecvFits) {
  const ScratchDir scratch;
  Json profile;
  std::ifstream(kSourceDir + "/calibrate/profiles/h100-sxm-default.json") >> profile;
  Json kept = Json::array();
  for (const auto& fit : profile["collectives"])
    if (!(fit["op"] == "send_recv" && fit["link"] == "infiniband")) kept.push_back(fit);
  profile["collectives"] = kept;
  const auto profile_file = scratch.path / "no-ib-send-recv.json";
  std::ofstream(profile_file) << profile.dump(2);

  Json doc = minimal();
  doc["profile"] = profile_file.string();
  doc["parallel"]["cp_attention"] = "ring";
  const auto file = (scratch.path / "scenario.json").string();
  std::ofstream(file) << doc.dump(2);
  try {
    load_and_prepare(file);
    ADD_FAILURE() << "a two-node ring scenario needs the InfiniBand send_recv fit";
  } catch (const InputError& e) {
    EXPECT_TRUE(contains(e.what(), file + ": parallel.cp_attention"));
    EXPECT_TRUE(contains(e.what(), "send_recv fit on infiniband"));
    EXPECT_TRUE(contains(e.what(), profile_file.string()));
  }
  // One node never leaves NVLink, and Ulysses needs no send_recv: both load.
  doc["cluster"]["nodes"] = 1;
  std::ofstream(file) << doc.dump(2);
  EXPECT_NO_THROW(load_and_prepare(file));
  doc["cluster"]["nodes"] = 2;
  doc["parallel"]["cp_attention"] = "ulysses";
  std::ofstream(file) << doc.dump(2);
  EXPECT_NO_THROW(load_and_prepare(file));
}

TEST(ScenarioCpAttention, AllGatherNeedsTheProfilesAllGatherAndReduceScatterFits) {
  const ScratchDir scratch;
  Json profile;
  std::ifstream(kSourceDir + "/calibrate/profiles/h100-sxm-default.json") >> profile;
  Json kept = Json::array();
  for (const auto& fit : profile["collectives"])
    if (!(fit["op"] == "reduce_scatter" && fit["link"] == "infiniband")) kept.push_back(fit);
  profile["collectives"] = kept;
  const auto profile_file = scratch.path / "no-ib-reduce-scatter.json";
  std::ofstream(profile_file) << profile.dump(2);
  Json doc = minimal();
  doc["profile"] = profile_file.string();
  doc["parallel"]["cp_attention"] = "all-gather";
  const auto file = (scratch.path / "scenario.json").string();
  std::ofstream(file) << doc.dump(2);
  try {
    load_and_prepare(file);
    ADD_FAILURE() << "a two-node all-gather scenario needs the InfiniBand reduce_scatter fit";
  } catch (const InputError& e) {
    EXPECT_TRUE(contains(e.what(), file + ": parallel.cp_attention: \"all-gather\""));
    EXPECT_TRUE(contains(e.what(), "reduce_scatter fit on infiniband"));
  }
  // The ring variants time send_recv only.
  doc["parallel"]["cp_attention"] = "zigzag";
  std::ofstream(file) << doc.dump(2);
  EXPECT_NO_THROW(load_and_prepare(file));
}

}  // namespace scenario_cp_attention_test
}  // namespace lcsim
