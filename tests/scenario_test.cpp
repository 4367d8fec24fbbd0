// Scenario JSON parsing (strict: every error names file and JSON path) and scenario loading (data window).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <unistd.h>

#include "base/errors.hpp"
#include "base/suggest.hpp"
#include "formats/scenario.hpp"
#include "formats/scenario_loader.hpp"
#include "studies/evaluation.hpp"
#include "tests/scenario_test_support.hpp"

namespace lcsim {
namespace scenario_test {

using Json = nlohmann::json;

using testing::contains;
using testing::ScratchDir;
const std::string& kFile = testing::kScenarioFile;

Json minimal() {
  return testing::minimal_scenario();
}

std::string error_of(const Json& doc) {
  return testing::scenario_error(doc);
}

const std::string kSourceDir = LCSIM_SOURCE_DIR;

void write_file(const std::filesystem::path& file, const std::string& text) {
  std::ofstream out(file);
  out << text;
}

TEST(ScenarioParse, MinimalScenarioGetsDocumentedDefaults) {
  const Scenario s = scenario_from_json(minimal(), kFile);
  EXPECT_EQ(s.file, kFile);
  EXPECT_EQ(s.name, "mini");
  EXPECT_EQ(s.description, "");
  EXPECT_EQ(s.seed, 0u);
  EXPECT_EQ(s.model.hidden, 896);
  EXPECT_EQ(s.cluster.gpus_per_node, 8);
  EXPECT_EQ(s.cluster.world_size(), 16);
  EXPECT_DOUBLE_EQ(s.cluster.nvlink_GBps, s.cluster.gpu.nvlink_GBps);
  EXPECT_DOUBLE_EQ(s.cluster.nvlink_latency_us, 2.0);
  EXPECT_DOUBLE_EQ(s.cluster.ib_GBps, 50.0);
  EXPECT_DOUBLE_EQ(s.cluster.ib_latency_us, 5.0);
  EXPECT_EQ(s.cluster.topology_kind->name(), "fat-tree");
  EXPECT_EQ(s.training.iterations, 10);
  EXPECT_EQ(s.training.zero_stage, 2);
  EXPECT_EQ(s.training.recompute, Recompute::Selective);
  EXPECT_EQ(s.training.global_batch_sequences, 32);
  EXPECT_EQ(s.training.tokens_per_iteration, 0);
  EXPECT_FALSE(s.training.bucket_size_tokens.has_value());
  // dp fills the cluster: 16 GPUs / (cp 8) = 2.
  EXPECT_EQ(s.layout.dp, 2);
  EXPECT_EQ(s.layout.cp, 8);
  EXPECT_EQ(s.layout.tp, 1);
  EXPECT_EQ(s.layout.pp, 1);
  ASSERT_EQ(s.policies.size(), 2u);
  EXPECT_EQ(s.policies[0].label, "deepspeed");
  EXPECT_EQ(s.policies[1].label, "sorted");
  EXPECT_EQ(s.policies[1].path, "policies[1]");
  EXPECT_EQ(s.policies[1].file, kFile);
  EXPECT_TRUE(s.policies[1].options.is_object());
  EXPECT_EQ(s.baseline, "deepspeed");  // the first policy
  ASSERT_EQ(s.dataset.components.size(), 1u);
  EXPECT_EQ(s.dataset.components[0].distribution, "chatqa2-long-sft");
  EXPECT_TRUE(s.dataset.trace_path.empty());
  EXPECT_TRUE(s.paper_figures.empty());
}

TEST(ScenarioParse, ShippedDefaultScenarioIsSkrulls32GpuSetting) {
  const std::string file = kSourceDir + "/scenarios/default.json";
  const Scenario s = load_scenario(file);
  EXPECT_EQ(s.model.name, "Qwen2.5-0.5B");
  EXPECT_EQ(s.cluster.gpu.name, "H100-SXM");
  EXPECT_EQ(s.cluster.world_size(), 32);
  EXPECT_EQ(s.layout.dp, 4);
  EXPECT_EQ(s.layout.cp, 8);
  EXPECT_EQ(s.training.global_batch_sequences, 256);
  EXPECT_EQ(s.training.context_length, 131072);
  EXPECT_EQ(s.seed, 42u);
  EXPECT_EQ(s.baseline, "deepspeed");
  EXPECT_EQ(s.profile_path,
            (std::filesystem::path(kSourceDir) / "calibrate/profiles/h100-sxm-default.json").lexically_normal());
}

TEST(ScenarioParse, TpOverlapIsTheScenariosAndReachesTheCostModel) {
  EXPECT_EQ(scenario_from_json(minimal(), kFile).tp_overlap, TpOverlap::None);
  Json doc = minimal();
  doc["parallel"]["tp_overlap"] = "async";
  const Scenario s = scenario_from_json(doc, kFile);
  EXPECT_EQ(s.tp_overlap, TpOverlap::Async);
  EXPECT_EQ(cost_model_options(s).tp_overlap, TpOverlap::Async);
  doc["parallel"]["tp_overlap"] = "userbuffers";
  EXPECT_NE(error_of(doc).find(kFile + ": parallel.tp_overlap: expected \"none\" or \"async\""), std::string::npos);
  // One cost model serves every policy: a policy's own layout may not set it.
  doc = minimal();
  doc["policies"][0]["parallel"] = Json{{"cp", 8}, {"tp_overlap", "async"}};
  EXPECT_NE(error_of(doc).find("tp_overlap: is the scenario's (parallel.tp_overlap)"), std::string::npos);
}

TEST(ScenarioParse, OverlapGradientSyncReachesTheCostModel) {
  EXPECT_FALSE(cost_model_options(scenario_from_json(minimal(), kFile)).overlap_gradient_sync);
  Json doc = minimal();
  doc["training"]["overlap_gradient_sync"] = true;
  EXPECT_TRUE(cost_model_options(scenario_from_json(doc, kFile)).overlap_gradient_sync);
  doc["training"]["overlap_gradient_sync"] = "yes";
  EXPECT_NE(error_of(doc).find(kFile + ": training.overlap_gradient_sync"), std::string::npos);
}

TEST(ScenarioParse, AttentionNamesAKernelOfTheProfile) {
  EXPECT_EQ(scenario_from_json(minimal(), kFile).training.attention, "");
  Json doc = minimal();
  doc["training"]["attention"] = "fa2";
  EXPECT_EQ(scenario_from_json(doc, kFile).training.attention, "fa2");
  doc["training"]["attention"] = "";
  EXPECT_NE(error_of(doc).find(kFile + ": training.attention: is empty"), std::string::npos);
}

TEST(ScenarioParse, PrecisionAndAPartsOwnMemoryAndBandwidth) {
  EXPECT_EQ(scenario_from_json(minimal(), kFile).training.precision, Precision::Bf16);
  Json doc = minimal();
  doc["training"]["precision"] = "fp8";
  EXPECT_EQ(scenario_from_json(doc, kFile).training.precision, Precision::Fp8);
  doc["training"]["precision"] = "fp16";
  EXPECT_NE(error_of(doc).find(kFile + ": training.precision: expected \"bf16\" or \"fp8\""), std::string::npos);
  doc = minimal();
  EXPECT_EQ(scenario_from_json(doc, kFile).training.elementwise, Elementwise::Fused);
  doc["training"]["elementwise"] = "eager";
  EXPECT_EQ(scenario_from_json(doc, kFile).training.elementwise, Elementwise::Eager);
  doc["training"]["elementwise"] = "compiled";
  EXPECT_NE(error_of(doc).find(kFile + ": training.elementwise: expected \"fused\" or \"eager\""), std::string::npos);
  doc = minimal();
  doc["cluster"]["gpu_memory_GiB"] = 96;
  doc["cluster"]["hbm_TBps"] = 2.4;
  const Scenario s = scenario_from_json(doc, kFile);
  EXPECT_DOUBLE_EQ(s.cluster.gpu.memory_bytes, 96.0 * 1073741824.0);
  EXPECT_DOUBLE_EQ(s.cluster.gpu.hbm_TBps, 2.4);
  doc["cluster"]["gpu_memory_GiB"] = 0;
  EXPECT_NE(error_of(doc).find("cluster.gpu_memory_GiB"), std::string::npos);
  // The parts' tensor-core peak, as a share of the kind's datasheet peak (H100-SXM: 989 TFLOP/s).
  doc = minimal();
  EXPECT_DOUBLE_EQ(scenario_from_json(doc, kFile).cluster.tensor_peak_share, 1.0);
  doc["cluster"]["gpu"] = "H100-SXM";
  doc["cluster"]["peak_tflops"] = 912;
  EXPECT_DOUBLE_EQ(scenario_from_json(doc, kFile).cluster.tensor_peak_share, 912.0 / 989.0);
  doc["cluster"]["peak_tflops"] = -1;
  EXPECT_NE(error_of(doc).find(kFile + ": cluster.peak_tflops"), std::string::npos);
}

TEST(ScenarioParse, UnknownKeysAreErrorsNamingFileAndPath) {
  Json doc = minimal();
  doc["colour"] = "blue";
  EXPECT_EQ(error_of(doc), kFile + ": colour: unknown key");

  doc = minimal();
  doc["cluster"]["nvlink_gbps"] = 450;  // a typo of nvlink_GBps must not be dropped silently
  EXPECT_EQ(error_of(doc), kFile + ": cluster.nvlink_gbps: unknown key (did you mean `nvlink_GBps`?)");

  doc = minimal();
  doc["policies"][1]["option"] = Json::object();
  EXPECT_EQ(error_of(doc), kFile + ": policies[1].option: unknown key (did you mean `options`?)");

  // A misspelt required key is the unknown key, not a missing field.
  doc = minimal();
  doc["training"]["context_length"] = doc["training"]["context_length_tokens"];
  doc["training"].erase("context_length_tokens");
  EXPECT_EQ(error_of(doc), kFile +
                               ": training.context_length: unknown key (did you mean `context_length_tokens`?); "
                               "`context_length_tokens` is required");
}

TEST(ScenarioParse, BuiltInNamesCompareLooselyAndSuggestTheNearest) {
  Json doc = minimal();
  doc["model"] = "qwen2.5 0.5b";
  EXPECT_NO_THROW(scenario_from_json(doc, kFile));
  doc["cluster"]["gpu"] = "H100";
  EXPECT_EQ(scenario_from_json(doc, kFile).cluster.gpu.name, "H100-SXM");
  doc["cluster"]["gpu"] = "H200-SXM";
  EXPECT_EQ(scenario_from_json(doc, kFile).cluster.gpu.name, "H200");
  doc["model"] = "Qwen2.5-0.6B";
  EXPECT_TRUE(testing::contains(error_of(doc), "model: unknown model 'Qwen2.5-0.6B' (did you mean `Qwen2.5-0.5B`?)"));
  EXPECT_EQ(nearest_name("completely-different", {"Qwen2.5-0.5B", "H100-SXM"}), "");
  EXPECT_EQ(nearest_name("A100", {"H100-SXM", "H200", "A800", "A100-40GB"}), "A100-40GB");
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(ScenarioParse, WrongTypesNameTheField) {
  Json doc = minimal();
  doc["cluster"]["nodes"] = "2";
  EXPECT_TRUE(contains(error_of(doc), kFile + ": cluster.nodes: expected an integer, got string"));

  doc = minimal();
  doc["training"]["iterations"] = 2.5;
  EXPECT_TRUE(contains(error_of(doc), kFile + ": training.iterations: expected an integer"));

  doc = minimal();
  doc["model"] = 7;
  EXPECT_TRUE(contains(error_of(doc), kFile + ": model: expected a model name or an object"));

  doc = minimal();
  doc["policies"] = Json::object();
  EXPECT_TRUE(contains(error_of(doc), kFile + ": policies: expected a non-empty array"));

  doc = minimal();
  doc["policies"][0]["options"] = 3;
  EXPECT_TRUE(contains(error_of(doc), kFile + ": policies[0].options: expected an object, got number"));
}

TEST(ScenarioParse, MissingFieldsNameThePath) {
  Json doc = minimal();
  doc["training"].erase("context_length_tokens");
  EXPECT_EQ(error_of(doc), kFile + ": training.context_length_tokens: missing required field");

  doc = minimal();
  doc.erase("profile");
  EXPECT_EQ(error_of(doc), kFile + ": profile: missing required field");

  doc = minimal();
  doc["policies"][0].erase("kind");
  EXPECT_EQ(error_of(doc), kFile + ": policies[0].kind: missing required field");
}

TEST(ScenarioParse, OutOfRangeValuesAreRejectedNotClamped) {
  Json doc = minimal();
  doc["training"]["zero_stage"] = 4;
  EXPECT_TRUE(contains(error_of(doc), "training.zero_stage: must be in [0, 3], got 4"));

  doc = minimal();
  doc["cluster"]["ib_GBps"] = 0;
  EXPECT_TRUE(contains(error_of(doc), "cluster.ib_GBps: must be positive"));

  doc = minimal();
  doc["training"]["recompute"] = "some";
  EXPECT_TRUE(contains(error_of(doc), "training.recompute: expected \"none\", \"selective\" or \"full\""));

  doc = minimal();
  doc["cluster"]["topology"] = "torus";
  EXPECT_TRUE(contains(error_of(doc),
                       "cluster.topology: unknown topology \"torus\" (known: fat-tree, "
                       "rail-optimized, nvlink-domain)"));

  // Each kind reads its own keys: another kind's key is unknown, a required one is missing, a bad shape is named.
  doc = minimal();
  doc["cluster"]["pxn"] = true;
  EXPECT_TRUE(contains(error_of(doc), "cluster.pxn")) << error_of(doc);
  doc["cluster"]["topology"] = "rail-optimized";
  EXPECT_NO_THROW(scenario_from_json(doc, kFile));
  doc["cluster"]["pxn"] = "yes";
  EXPECT_TRUE(contains(error_of(doc), "cluster.pxn")) << error_of(doc);
  doc = minimal();
  doc["cluster"]["topology"] = "nvlink-domain";
  EXPECT_TRUE(contains(error_of(doc), "cluster.domain_gpus")) << error_of(doc);
  doc["cluster"]["domain_gpus"] = 12;
  EXPECT_TRUE(contains(error_of(doc), "cluster.domain_gpus: domain_gpus (12) is not a whole number of nodes of 8 GPUs"))
      << error_of(doc);
  doc["cluster"]["domain_gpus"] = 8000;  // the key that does not fit is named, not cluster.topology (#55)
  EXPECT_TRUE(contains(error_of(doc), "cluster.domain_gpus: the cluster's")) << error_of(doc);
  EXPECT_FALSE(contains(error_of(doc), "cluster.topology")) << error_of(doc);
}

TEST(ScenarioParse, RelativePathsResolveAgainstTheScenarioFolder) {
  Json doc = minimal();
  doc["profile"] = "../profiles/h100.json";
  doc["dataset"] = Json{{"trace", "traces/lens.txt"}};
  Scenario s = scenario_from_json(doc, kFile);
  EXPECT_EQ(s.profile_path, "/data/profiles/h100.json");
  EXPECT_EQ(s.dataset.trace_path, "/data/runs/traces/lens.txt");
  EXPECT_TRUE(s.dataset.shuffle);

  doc["profile"] = "/abs/p.json";
  doc["dataset"]["shuffle"] = false;
  s = scenario_from_json(doc, kFile);
  EXPECT_EQ(s.profile_path, "/abs/p.json");
  EXPECT_FALSE(s.dataset.shuffle);

  // A scenario named without a folder: paths stay relative to the working directory.
  s = scenario_from_json(minimal(), "s.json");
  EXPECT_EQ(s.profile_path, "profile.json");
}

TEST(ScenarioParse, DatasetNeedsExactlyOneForm) {
  Json doc = minimal();
  doc["dataset"]["trace"] = "lens.txt";
  EXPECT_TRUE(contains(error_of(doc), kFile + ": dataset: needs exactly one of"));

  doc = minimal();
  doc["dataset"] = Json::object();
  EXPECT_TRUE(contains(error_of(doc), kFile + ": dataset: needs exactly one of"));

  doc = minimal();
  doc["dataset"]["shuffle"] = true;
  EXPECT_TRUE(contains(error_of(doc), "dataset.shuffle: only applies to a \"trace\" dataset"));

  doc = minimal();
  doc["dataset"]["distribution"] = "wikipedia-en";
  EXPECT_TRUE(contains(error_of(doc), kFile + ": dataset.distribution: unknown length distribution"));
}

TEST(ScenarioParse, MixComponentsKeepWeightsAndPaths) {
  Json doc = minimal();
  doc["dataset"] = Json::parse(R"({"mix": [{"distribution": "tulu3", "weight": 0.9}, {"distribution": "longcite",
                                 "weight": 0.1}]})");
  const Scenario s = scenario_from_json(doc, kFile);
  ASSERT_EQ(s.dataset.components.size(), 2u);
  EXPECT_EQ(s.dataset.components[1].distribution, "longcite");
  EXPECT_DOUBLE_EQ(s.dataset.components[0].weight, 0.9);

  doc["dataset"]["mix"][1]["weight"] = -1;
  EXPECT_TRUE(contains(error_of(doc), kFile + ": dataset.mix[1].weight: must be positive"));
  doc["dataset"]["mix"][1] = Json{{"distribution", "nope"}};
  EXPECT_TRUE(contains(error_of(doc), kFile + ": dataset.mix[1].distribution: unknown length distribution"));
}

TEST(ScenarioParse, DistributionLongerThanContextIsAnError) {
  Json doc = minimal();
  doc["training"]["context_length_tokens"] = 4096;
  const std::string message = error_of(doc);
  EXPECT_TRUE(contains(message, kFile + ": training.context_length_tokens"));
  EXPECT_TRUE(contains(message, "chatqa2-long-sft"));
}

TEST(ScenarioParse, BatchSizeNeedsExactlyOneForm) {
  Json doc = minimal();
  doc["training"]["tokens_per_iteration"] = 100000;
  EXPECT_TRUE(contains(error_of(doc), "training: needs exactly one of"));

  doc["training"].erase("global_batch_sequences");
  const Scenario s = scenario_from_json(doc, kFile);
  EXPECT_EQ(s.training.tokens_per_iteration, 100000);
  EXPECT_EQ(s.training.global_batch_sequences, 0);
}

TEST(ScenarioParse, LayoutMustCoverTheCluster) {
  Json doc = minimal();
  doc["parallel"] = Json{{"dp", 4}, {"cp", 8}};
  const std::string message = error_of(doc);
  EXPECT_TRUE(contains(message, kFile + ": parallel: "));
  EXPECT_TRUE(contains(message, "= 32 GPUs, but the cluster has 2 x 8 = 16"));

  doc["parallel"] = Json{{"cp", 3}};
  EXPECT_TRUE(contains(error_of(doc), "parallel.dp: missing, and cp x tp x pp = 3 does not divide"));
}

TEST(ScenarioParse, LayoutsNoPlanCanUseNameTheirKey) {
  // Qwen2.5-0.5B has 24 layers; the cluster 8 GPUs per node.
  Json doc = minimal();
  doc["cluster"]["nodes"] = 5;
  doc["parallel"] = Json{{"dp", 1}, {"cp", 8}, {"pp", 5}};
  EXPECT_EQ(error_of(doc), kFile +
                               ": parallel.pp: every pipeline stage holds the same number of layers, but 5 does "
                               "not divide the 24 layers of Qwen2.5-0.5B");
  doc = minimal();
  doc["cluster"]["nodes"] = 3;
  doc["parallel"] = Json{{"dp", 1}, {"cp", 8}, {"tp", 3}};
  EXPECT_EQ(error_of(doc), kFile +
                               ": parallel.tp: a TP group must lie within one NVLink domain, but 3 does not divide "
                               "its 8 GPUs (cluster.gpus_per_node, or the topology's domain_gpus)");
  doc = minimal();
  doc["parallel"] = Json{{"cp", 1}, {"tp", 16}};
  EXPECT_TRUE(contains(error_of(doc), kFile + ": parallel.tp: a TP group must lie within one NVLink domain"));
  // TP 3 on nodes of 6 GPUs is a layout every plan can use (heads are split fractionally).
  doc = minimal();
  doc["cluster"] = Json{{"gpu", "H100-SXM"}, {"nodes", 1}, {"gpus_per_node", 6}};
  doc["parallel"] = Json{{"tp", 3}, {"pp", 2}};
  EXPECT_EQ(scenario_from_json(doc, kFile).layout.tp, 3);
}

TEST(ScenarioParse, APolicysOwnParallelIsItsLayoutCheckedLikeTheScenarios) {
  Json doc = minimal();  // 16 GPUs, parallel {"cp": 8}: dp 2
  doc["policies"][1]["parallel"] = Json{{"cp", 2}, {"tp", 2}};
  const Scenario s = scenario_from_json(doc, kFile);
  EXPECT_FALSE(s.policies[0].layout.has_value());
  ASSERT_TRUE(s.policies[1].layout.has_value());
  EXPECT_EQ(s.policies[1].layout->dp, 4);  // dp fills the cluster, as in the scenario's parallel
  EXPECT_EQ(s.policies[1].layout->cp, 2);
  EXPECT_EQ(s.policies[1].layout->tp, 2);
  EXPECT_EQ(s.layout.cp, 8);

  EXPECT_EQ(
      own_layouts_line(s),
      "own layouts: sorted dp=4 cp=2 tp=2 pp=1 (policies[].parallel; the others: parallel dp=2 cp=8 tp=1 pp=1)\n");
  EXPECT_EQ(own_layouts_line(scenario_from_json(minimal(), kFile)), "");

  doc["policies"][1]["parallel"] = Json{{"dp", 4}, {"cp", 8}};
  const std::string message = error_of(doc);
  EXPECT_TRUE(contains(message, kFile + ": policies[1].parallel: ")) << message;
  EXPECT_TRUE(contains(message, "= 32 GPUs, but the cluster has 2 x 8 = 16")) << message;
  doc["policies"][1]["parallel"] = Json{{"cp", 16}, {"cp_attention", "ring"}};
  EXPECT_EQ(error_of(doc), kFile +
                               ": policies[1].parallel.cp_attention: is the scenario's (parallel.cp_attention): "
                               "every policy shares one cost model");
  doc["policies"][1]["parallel"] = Json{{"cp", 16}, {"sp", 2}};
  EXPECT_TRUE(contains(error_of(doc), kFile + ": policies[1].parallel.sp"));
  doc["policies"][1]["parallel"] = 8;
  EXPECT_TRUE(contains(error_of(doc), kFile + ": policies[1].parallel: "));
}

TEST(ScenarioParse, RunsBeyondTheSizeLimitsAreRefusedNamingTheKey) {
  Json doc = minimal();
  doc["training"]["iterations"] = kMaxIterations + 1;
  EXPECT_TRUE(contains(error_of(doc), kFile + ": training.iterations: must be in [1, 10000], got 10001"));
  doc = minimal();
  doc["training"]["global_batch_sequences"] = 10000000;
  EXPECT_EQ(error_of(doc), kFile +
                               ": training.global_batch_sequences: 10000000 sequences x 10 iterations "
                               "(training.iterations) = 100000000 sequences, more than the 2000000 lcsim plans in "
                               "one run (docs/robustness.md)");
}

TEST(ScenarioParse, PolicyLabelsAreUniqueAndBaselineIsOneOfThem) {
  Json doc = minimal();
  doc["policies"][1] = Json{{"kind", "deepspeed"}};
  EXPECT_TRUE(contains(error_of(doc), kFile + ": policies[1].kind: label \"deepspeed\" is used"));

  doc["policies"][1]["label"] = "deepspeed-2";
  doc["baseline"] = "deepspeed-2";
  const Scenario s = scenario_from_json(doc, kFile);
  EXPECT_EQ(s.baseline, "deepspeed-2");
  EXPECT_EQ(s.policies[1].kind, "deepspeed");

  doc["baseline"] = "megatron";
  EXPECT_TRUE(contains(error_of(doc), kFile + ": baseline: no policy labelled \"megatron\""));

  doc = minimal();
  doc["policies"][0]["kind"] = "magic";
  EXPECT_TRUE(contains(error_of(doc), kFile + ": policies[0].kind: unknown policy kind \"magic\""));
}

TEST(ScenarioParse, CustomModelObject) {
  Json doc = minimal();
  doc["model"] = Json::parse(
      R"({"name": "tiny", "hidden": 1024, "layers": 4, "heads": 16, "kv_heads": 4, "ffn": 4096, "vocab": 32000})");
  Scenario s = scenario_from_json(doc, kFile);
  EXPECT_EQ(s.model.name, "tiny");
  EXPECT_EQ(s.model.head_dim, 64);  // hidden / heads
  EXPECT_FALSE(s.model.tied_embeddings);

  doc["model"]["head_dim"] = 128;
  s = scenario_from_json(doc, kFile);
  EXPECT_EQ(s.model.head_dim, 128);

  doc["model"]["kv_heads"] = 5;
  EXPECT_TRUE(contains(error_of(doc), kFile + ": model.kv_heads: must divide heads (16), got 5"));

  doc = minimal();
  doc["model"] = "Qwen9-1T";
  EXPECT_TRUE(contains(error_of(doc), kFile + ": model: unknown model"));
}

TEST(ScenarioParse, PaperFiguresReferToPolicies) {
  Json doc = minimal();
  doc["paper_figures"] = Json::parse(R"([{"policy": "sorted", "speedup": 1.1, "source": "Skrull Fig. 3"}])");
  const Scenario s = scenario_from_json(doc, kFile);
  ASSERT_EQ(s.paper_figures.size(), 1u);
  EXPECT_DOUBLE_EQ(s.paper_figures[0].speedup, 1.1);
  EXPECT_EQ(s.paper_figures[0].source, "Skrull Fig. 3");

  doc["paper_figures"][0]["policy"] = "skrull";
  EXPECT_TRUE(contains(error_of(doc), kFile + ": paper_figures[0].policy: no policy labelled \"skrull\""));
}

TEST(ScenarioParse, UnreadableFilesNameTheFile) {
  const ScratchDir scratch;
  const auto& dir = scratch.path;
  const std::string missing = (dir / "missing.json").string();
  EXPECT_THROW(
      {
        try {
          load_scenario(missing);
        } catch (const InputError& e) {
          EXPECT_TRUE(contains(e.what(), missing));
          throw;
        }
      },
      InputError);
  const std::string broken = (dir / "broken.json").string();
  write_file(broken, "{\"name\": ");
  try {
    load_scenario(broken);
    ADD_FAILURE() << "no error for invalid JSON";
  } catch (const InputError& e) {
    EXPECT_TRUE(contains(e.what(), broken + ": not valid JSON"));
  }
}

// ---- load_and_prepare: the data window every policy plans ----

/// A scenario file in `dir` using the shipped H100 profile.
std::string write_scenario(const std::filesystem::path& dir, Json doc) {
  doc["profile"] = kSourceDir + "/calibrate/profiles/h100-sxm-default.json";
  const auto file = dir / "scenario.json";
  write_file(file, doc.dump(2));
  return file.string();
}

TEST(ScenarioLoader, SampledBatchesHaveTheScenarioShape) {
  const LoadedScenario loaded = load_and_prepare(kSourceDir + "/scenarios/default.json", 2);
  EXPECT_EQ(loaded.scenario.training.iterations, 2);
  ASSERT_EQ(loaded.batches.size(), 2u);
  std::set<std::int64_t> ids;
  for (const auto& batch : loaded.batches) {
    EXPECT_EQ(batch.size(), 256u);
    for (const auto& s : batch) {
      EXPECT_GT(s.tokens, 0);
      EXPECT_LE(s.tokens, loaded.scenario.training.context_length);
      ids.insert(s.id);
    }
  }
  EXPECT_EQ(ids.size(), 512u);  // 512 distinct sequences
  EXPECT_EQ(loaded.dataset_label, "synthetic chatqa2-long-sft (sampled, seed 42)");
  ASSERT_NE(loaded.cost, nullptr);
  EXPECT_EQ(loaded.cost->options().zero_stage, 2);
  EXPECT_EQ(loaded.planning_context().cost, loaded.cost.get());
  EXPECT_EQ(loaded.planning_context().layout.cp, 8);
  EXPECT_EQ(loaded.planning_context().seed, 42u);

  // Same scenario, same seed: the same sequences.
  const LoadedScenario again = load_and_prepare(kSourceDir + "/scenarios/default.json", 2);
  EXPECT_EQ(again.batches, loaded.batches);
}

TEST(ScenarioLoader, EachPolicyPlansUnderItsOwnLayout) {
  ScratchDir dir;
  Json doc = minimal();  // parallel {"cp": 8} on 16 GPUs: DP 2
  doc["training"]["iterations"] = 1;
  doc["policies"][1] = Json{{"kind", "deepspeed"}, {"label", "dp16"}, {"parallel", Json{{"cp", 1}}}};
  const LoadedScenario loaded = load_and_prepare(write_scenario(dir.path, doc), std::nullopt);
  const auto& own = loaded.scenario.policies[1];
  EXPECT_EQ(loaded.planning_context(&own).layout.dp, 16);
  EXPECT_EQ(loaded.planning_context(&loaded.scenario.policies[0]).layout.dp, 2);
  EXPECT_EQ(loaded.planning_context().layout.dp, 2);
  // The plans follow: DeepSpeed deals the batch over DP replicas of the layout's scheme.
  const PolicyPlans shared = plan_policy(loaded, loaded.scenario.policies[0]);
  const PolicyPlans mine = plan_policy(loaded, own);
  ASSERT_EQ(shared.plans.size(), 1u);
  ASSERT_EQ(mine.plans.size(), 1u);
  EXPECT_EQ(shared.plans[0].replicas.size(), 2u);
  EXPECT_EQ(shared.plans[0].replicas[0].scheme.cp, 8);
  EXPECT_EQ(mine.plans[0].replicas.size(), 16u);
  EXPECT_EQ(mine.plans[0].replicas[0].scheme.cp, 1);
}

TEST(ScenarioLoader, AnOwnLayoutAPolicyCannotUseIsRefused) {
  ScratchDir dir;
  Json doc = minimal();
  doc["policies"][1] = Json{{"kind", "flexsp"}, {"parallel", Json{{"cp", 4}}}};
  std::string message;
  try {
    load_and_prepare(write_scenario(dir.path, doc), 1);
  } catch (const InputError& e) {
    message = e.what();
  }
  EXPECT_TRUE(contains(message, "policies[1].parallel: flexsp chooses its own parallel strategies")) << message;
  doc["policies"][1] = Json{{"kind", "skrull"}, {"parallel", Json{{"cp", 4}, {"tp", 2}}}};
  message.clear();
  try {
    load_and_prepare(write_scenario(dir.path, doc), 1);
  } catch (const InputError& e) {
    message = e.what();
  }
  EXPECT_TRUE(contains(message, "policies[1].parallel: skrull: Skrull schedules DP x CP layouts")) << message;
}

TEST(ScenarioLoader, SeedChangesTheSample) {
  const ScratchDir scratch;
  const auto& dir = scratch.path;
  Json doc = minimal();
  doc["training"]["iterations"] = 1;
  doc["seed"] = 1;
  const auto a = load_and_prepare(write_scenario(dir, doc));
  doc["seed"] = 2;
  const auto b = load_and_prepare(write_scenario(dir, doc));
  EXPECT_NE(a.batches, b.batches);
  EXPECT_EQ(b.dataset_label, "synthetic chatqa2-long-sft (sampled, seed 2)");
}

TEST(ScenarioLoader, TokenBudgetBatchesAreFullAndConsecutive) {
  const ScratchDir scratch;
  const auto& dir = scratch.path;
  Json doc = minimal();
  doc["training"].erase("global_batch_sequences");
  doc["training"]["tokens_per_iteration"] = 300000;
  doc["training"]["iterations"] = 3;
  doc["dataset"] = Json::parse(R"({"mix": [{"distribution": "tulu3", "weight": 3}, {"distribution": "longcite"}]})");
  const LoadedScenario loaded = load_and_prepare(write_scenario(dir, doc));
  ASSERT_EQ(loaded.batches.size(), 3u);
  EXPECT_EQ(loaded.dataset_label, "synthetic mix 3 tulu3 + 1 longcite (sampled, seed 0)");
  std::int64_t next_id = 0;
  for (const auto& batch : loaded.batches) {
    Tokens tokens = 0;
    for (const auto& s : batch) {
      EXPECT_EQ(s.id, next_id++);  // the window is the sample in epoch order, nothing skipped
      tokens += s.tokens;
    }
    EXPECT_TRUE(tokens <= 300000 || batch.size() == 1) << tokens;
  }
}

TEST(ScenarioLoader, TraceWindowInFileOrderAndShortTraceError) {
  const ScratchDir scratch;
  const auto& dir = scratch.path;
  write_file(dir / "lens.txt", "100\n200\n300\n400\n500\n600\n700\n800\n900\n1000\n");
  Json doc = minimal();
  doc["dataset"] = Json{{"trace", (dir / "lens.txt").string()}, {"shuffle", false}};
  doc["training"]["global_batch_sequences"] = 4;
  doc["training"]["iterations"] = 2;
  const std::string file = write_scenario(dir, doc);
  const LoadedScenario loaded = load_and_prepare(file);
  ASSERT_EQ(loaded.batches.size(), 2u);
  EXPECT_EQ(loaded.batches[0], (GlobalBatch{{0, 100}, {1, 200}, {2, 300}, {3, 400}}));
  EXPECT_EQ(loaded.batches[1], (GlobalBatch{{4, 500}, {5, 600}, {6, 700}, {7, 800}}));
  EXPECT_EQ(loaded.dataset_label, "trace " + (dir / "lens.txt").string() + " (file order)");

  try {
    load_and_prepare(file, 3);
    ADD_FAILURE() << "a 10-sequence trace cannot fill 3 batches of 4";
  } catch (const InputError& e) {
    EXPECT_TRUE(contains(e.what(), (dir / "lens.txt").string() + ": holds 10 sequences"));
    EXPECT_TRUE(contains(e.what(), "enough for 2 full global batches of 4 sequences"));
    EXPECT_TRUE(contains(e.what(), "asks for 3 iterations"));
  }
}

TEST(ScenarioLoader, ASampledWorldOfATraceIsABootstrapResampleWithFreshIds) {
  const ScratchDir scratch;
  const auto& dir = scratch.path;
  write_file(dir / "lens.txt", "100\n200\n300\n400\n500\n600\n700\n800\n900\n1000\n");
  Json doc = minimal();
  doc["dataset"] = Json{{"trace", (dir / "lens.txt").string()}, {"shuffle", false}};
  doc["training"]["global_batch_sequences"] = 5;
  doc["training"]["iterations"] = 2;
  const Scenario scenario = scenario_from_json(doc, write_scenario(dir, doc));
  std::string label;
  const std::vector<GlobalBatch> nominal = prepare_batches(scenario, label);
  const std::vector<GlobalBatch> world = prepare_batches(scenario, label, 12345);
  EXPECT_EQ(prepare_batches(scenario, label, 12345), world);  // the same seed draws the same world
  std::vector<Tokens> drawn;
  std::int64_t next_id = 0;
  for (const auto& batch : world)
    for (const auto& s : batch) {
      EXPECT_EQ(s.id, next_id++);  // duplicates are new sequences: a plan holds every id once
      EXPECT_EQ(s.tokens % 100, 0);
      drawn.push_back(s.tokens);
    }
  ASSERT_EQ(drawn.size(), 10u);  // as many sequences as the trace
  std::sort(drawn.begin(), drawn.end());
  // With replacement: 10 draws of 10 give a repeat unless the draw is a permutation (10!/10^10, 0.04%).
  EXPECT_NE(std::adjacent_find(drawn.begin(), drawn.end()), drawn.end());
  EXPECT_NE(world, nominal);
}

TEST(ScenarioLoader, TruncateToContextCutsLongSequencesAndSaysHowMany) {
  const ScratchDir scratch;
  const auto& dir = scratch.path;
  write_file(dir / "lens.txt", "100\n5000\n300\n7000\n");
  Json doc = minimal();
  doc["dataset"] = Json{{"trace", (dir / "lens.txt").string()}, {"shuffle", false}, {"truncate_to_context", true}};
  doc["training"]["global_batch_sequences"] = 4;
  doc["training"]["iterations"] = 1;
  doc["training"]["context_length_tokens"] = 4096;
  const LoadedScenario loaded = load_and_prepare(write_scenario(dir, doc));
  EXPECT_EQ(loaded.batches[0], (GlobalBatch{{0, 100}, {1, 4096}, {2, 300}, {3, 4096}}));
  EXPECT_TRUE(contains(loaded.dataset_label, "2 sequences truncated to the context length of 4096 tokens"));

  // A distribution longer than the context is accepted only with the flag.
  Json sampled = minimal();
  sampled["training"]["context_length_tokens"] = 4096;
  sampled["dataset"]["truncate_to_context"] = true;
  EXPECT_NO_THROW(scenario_from_json(sampled, kFile));
}

// A policy that plans from the whole dataset (Hydraulis' proposal) gets it: every length of a trace, cut as the
// window is; the others get nothing to carry.
TEST(ScenarioLoader, TheWholeDatasetGoesToAPolicyThatPlansFromIt) {
  const ScratchDir scratch;
  const auto& dir = scratch.path;
  write_file(dir / "lens.txt", "100\n5000\n300\n7000\n200\n");
  Json doc = minimal();
  doc["dataset"] = Json{{"trace", (dir / "lens.txt").string()}, {"shuffle", false}, {"truncate_to_context", true}};
  doc["training"]["global_batch_sequences"] = 2;
  doc["training"]["iterations"] = 1;
  doc["training"]["context_length_tokens"] = 4096;
  EXPECT_EQ(load_and_prepare(write_scenario(dir, doc)).dataset_lengths, nullptr);
  doc["policies"] = Json::array({Json{{"kind", "deepspeed"}}, Json{{"kind", "hydraulis"}}});
  const LoadedScenario loaded = load_and_prepare(write_scenario(dir, doc));
  ASSERT_NE(loaded.dataset_lengths, nullptr);
  EXPECT_EQ(*loaded.dataset_lengths, (std::vector<Tokens>{100, 4096, 300, 4096, 200}));
  EXPECT_EQ(loaded.planning_context().dataset_lengths, loaded.dataset_lengths);
  // A named distribution: its quantile points, as many as kDistributionLengths, none past the window.
  doc["dataset"] = Json{{"distribution", "chatqa2-long-sft"}, {"truncate_to_context", true}};
  const LoadedScenario sampled = load_and_prepare(write_scenario(dir, doc));
  ASSERT_NE(sampled.dataset_lengths, nullptr);
  EXPECT_EQ(sampled.dataset_lengths->size(), std::size_t{1} << 17);
  EXPECT_EQ(*std::max_element(sampled.dataset_lengths->begin(), sampled.dataset_lengths->end()), 4096);
}

// A loader cuts a document as it reads it, so a token budget counts the cut lengths: a 7000-token document is 4096
// tokens of its batch. Cutting after the batches were formed left that batch 2904 tokens short.
TEST(ScenarioLoader, TruncateToContextCutsBeforeTheTokenBudgetIsCounted) {
  const ScratchDir scratch;
  const auto& dir = scratch.path;
  write_file(dir / "lens.txt", "3000\n7000\n3000\n100\n5000\n4000\n4000\n100\n");
  Json doc = minimal();
  doc["dataset"] = Json{{"trace", (dir / "lens.txt").string()}, {"shuffle", false}, {"truncate_to_context", true}};
  doc["training"].erase("global_batch_sequences");
  doc["training"]["tokens_per_iteration"] = 8192;
  doc["training"]["iterations"] = 2;
  doc["training"]["context_length_tokens"] = 4096;
  const LoadedScenario loaded = load_and_prepare(write_scenario(dir, doc));
  EXPECT_EQ(loaded.batches[0], (GlobalBatch{{0, 3000}, {1, 4096}}));
  EXPECT_EQ(loaded.batches[1], (GlobalBatch{{2, 3000}, {3, 100}, {4, 4096}}));
  EXPECT_TRUE(contains(loaded.dataset_label, "2 sequences truncated to the context length of 4096 tokens"));

  // Sampled data: every batch is closed by a sequence that did not fit, and no sequence is longer than the window,
  // so every batch holds more than the budget less one window.
  Json sampled = minimal();
  sampled["dataset"] = Json{{"distribution", "chatqa2-long-sft"}, {"truncate_to_context", true}};
  sampled["training"].erase("global_batch_sequences");
  sampled["training"]["tokens_per_iteration"] = 65536;
  sampled["training"]["iterations"] = 20;
  sampled["training"]["context_length_tokens"] = 16384;
  const LoadedScenario drawn = load_and_prepare(write_scenario(dir, sampled));
  ASSERT_EQ(drawn.batches.size(), 20u);
  for (const auto& batch : drawn.batches) {
    Tokens held = 0;
    for (const auto& s : batch) {
      EXPECT_LE(s.tokens, 16384);
      held += s.tokens;
    }
    EXPECT_GT(held, 65536 - 16384);
    EXPECT_LE(held, 65536);
  }
}

TEST(ScenarioLoader, TraceShuffleIsSeededPermutation) {
  const ScratchDir scratch;
  const auto& dir = scratch.path;
  std::string lens;
  for (int i = 1; i <= 40; ++i) lens += std::to_string(i * 10) + "\n";
  write_file(dir / "lens.txt", lens);
  Json doc = minimal();
  doc["seed"] = 7;
  doc["dataset"] = Json{{"trace", "lens.txt"}};  // relative to the scenario file's folder
  doc["training"]["global_batch_sequences"] = 20;
  doc["training"]["iterations"] = 2;
  const std::string file = write_scenario(dir, doc);
  const LoadedScenario a = load_and_prepare(file);
  const LoadedScenario b = load_and_prepare(file);
  EXPECT_EQ(a.batches, b.batches);
  std::set<std::int64_t> ids;
  bool in_file_order = true;
  std::int64_t position = 0;
  for (const auto& batch : a.batches)
    for (const auto& s : batch) {
      EXPECT_EQ(s.tokens, (s.id + 1) * 10);  // ids keep their lengths through the shuffle
      ids.insert(s.id);
      in_file_order = in_file_order && s.id == position++;
    }
  EXPECT_EQ(ids.size(), 40u);
  EXPECT_FALSE(in_file_order);
  EXPECT_TRUE(contains(a.dataset_label, "(shuffled, seed 7)"));
}

TEST(ScenarioLoader, ProfileForAnotherGpuNamesBothFiles) {
  const ScratchDir scratch;
  const auto& dir = scratch.path;
  Json doc = minimal();
  doc["cluster"]["gpu"] = "A800";
  const std::string file = write_scenario(dir, doc);
  try {
    load_and_prepare(file);
    ADD_FAILURE() << "an H100 profile must not drive an A800 cluster";
  } catch (const InputError& e) {
    EXPECT_TRUE(contains(e.what(), "h100-sxm-default.json"));
    EXPECT_TRUE(contains(e.what(), file + ": cluster.gpu is \"A800\""));
  }
}

TEST(ScenarioLoader, PolicyOptionsAreCheckedAtLoad) {
  const ScratchDir scratch;
  Json doc = minimal();
  doc["policies"][1]["options"] = Json{{"bogus", 1}};
  const std::string file = write_scenario(scratch.path, doc);
  try {
    load_and_prepare(file);
    ADD_FAILURE() << "an unknown policy option must be an error";
  } catch (const InputError& e) {
    EXPECT_TRUE(contains(e.what(), file + ": policies[1].options.bogus"));
  }
}

TEST(ScenarioLoader, IterationsOverrideMustBePositive) {
  EXPECT_THROW(load_and_prepare(kSourceDir + "/scenarios/default.json", 0), InputError);
}

TEST(ScenarioLoader, IterationsOverrideIsBoundedBeforeAnythingIsSampled) {
  const std::string file = kSourceDir + "/scenarios/default.json";
  try {
    load_and_prepare(file, 1000000);
    FAIL() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "--iterations: must be in [1, 10000], got 1000000 (docs/robustness.md)");
  }
  try {
    load_and_prepare(file, 10000);  // 10000 x 256 sequences
    FAIL() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_TRUE(contains(e.what(), file + ": training.global_batch_sequences: 256 sequences x 10000 iterations "
                                          "(--iterations) = 2560000 sequences, more than the 2000000"));
  }
}

TEST(ScenarioLoader, ATokenBudgetBeyondTheWindowLimitIsRefused) {
  const ScratchDir scratch;
  Json doc = minimal();
  doc["training"].erase("global_batch_sequences");
  doc["training"]["tokens_per_iteration"] = std::int64_t{1} << 40;
  doc["training"]["iterations"] = 2;
  try {
    load_and_prepare(write_scenario(scratch.path, doc));
    FAIL() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_TRUE(contains(e.what(),
                         ": training.tokens_per_iteration: 2 iterations of 1099511627776 tokens take more "
                         "than 2000000 sequences"));
  }
}

}  // namespace scenario_test
}  // namespace lcsim
