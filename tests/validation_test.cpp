// The validation catalogue (`lcsim validate`): the shipped catalogue loads and every scenario it names plans; the
// reader is strict; the error, ordering and summary maths.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "base/errors.hpp"
#include "formats/results_io.hpp"
#include "studies/evaluation.hpp"
#include "studies/validation_catalogue.hpp"
#include "tests/command_run_support.hpp"

namespace lcsim {
namespace validation_test {

using Json = nlohmann::json;

const std::string kCatalogue = std::string(LCSIM_SOURCE_DIR) + "/scenarios/validation/catalogue.json";
const std::string kCaseStudy = std::string(LCSIM_SOURCE_DIR) + "/scenarios/skrull/case-study-dp1.json";

Json entry_json(Json overrides) {
  Json e = {{"id", "e"},
            {"source", {{"paper", "Skrull"}, {"where", "Table 3"}}},
            {"claim", "a claim"},
            {"quantity", "speedup"},
            {"scenario", kCaseStudy},
            {"policy", "skrull"},
            {"reference", "deepspeed"},
            {"published", 1.4}};
  for (const auto& [key, value] : overrides.items()) {
    if (value.is_null() && key != "published")
      e.erase(key);
    else
      e[key] = value;
  }
  return e;
}

ValidationCatalogue catalogue_of(std::vector<Json> entries) {
  Json doc = {{"schema", "lcsim-validation-catalogue/1"}, {"entries", entries}};
  return catalogue_from_json(doc, "/tmp/catalogue.json");
}

PointPrediction value(double v) {
  PointPrediction p;
  p.value = v;
  return p;
}

TEST(ValidationCatalogue, ShippedCatalogueLoadsWithThirtyEntriesAndEveryScenarioPlans) {
  const ValidationCatalogue catalogue = load_catalogue(kCatalogue);
  ASSERT_GE(catalogue.entries.size(), 30u);
  std::set<std::string> papers, framework_sources;
  int evaluated = 0, framework = 0;
  for (const ValidationEntry& e : catalogue.entries) {
    SCOPED_TRACE(e.id);
    if (entry_kind(e) == "published") papers.insert(e.source.paper);
    if (!e.not_expressible.empty()) continue;
    ++evaluated;
    if (e.framework) {
      ++framework;
      framework_sources.insert(e.source.paper);
    }
    for (const ValidationPoint& point : e.points) {
      const Json doc = point_scenario(point, e.id);
      const LoadedScenario loaded = load_and_prepare(doc, point.scenario, 1);
      const RunResults results = evaluate_plans(loaded, point_labels(point));
      if (e.quantity == ValidationQuantity::CollectiveSeconds) continue;
      // The entry reads its figure from results of the same shape `lcsim validate` reads.
      const Json parsed = Json::parse(results_to_json(results).dump());
      const PointPrediction p = predict_from_results(e, point, parsed, loaded.scenario.cluster.world_size());
      EXPECT_TRUE(p.value || p.yes || !p.failed.empty());
    }
  }
  EXPECT_EQ(papers, (std::set<std::string>{"Skrull", "Hydraulis", "HBP", "FlexSP", "WLB-LLM"}));
  EXPECT_GE(evaluated, 30);
  // Issue #50: the framework-benchmark family holds at least 30 evaluated entries from at least three sources.
  EXPECT_GE(framework, 30);
  EXPECT_GE(framework_sources.size(), 3u);
}

TEST(ValidationCatalogue, AFitsEntryOfAPublishedRunIsNotOutOfMemory) {
  // torchtitan's Table 1 run (Llama 3.1 8B, FSDP over 8 H100s of 96 GB, 2 x 8K per micro-batch, per-op selective
  // checkpointing) ran at 82.4 GiB. With Megatron's selective coefficients (the default profile) lcsim declared it out
  // of memory; the PyTorch-native preset keeps what torchtitan's policy keeps.
  const std::string file = std::string(LCSIM_SOURCE_DIR) + "/scenarios/framework/torchtitan-t1-fsdp-8b-8gpu.json";
  Json doc = Json::parse(std::ifstream(file));
  doc["dataset"]["trace"] = std::string(LCSIM_SOURCE_DIR) + "/scenarios/framework/traces/fixed-8192.txt";
  const auto oom_iterations = [&](const std::string& profile) {
    doc["profile"] = std::string(LCSIM_SOURCE_DIR) + "/calibrate/profiles/" + profile;
    const RunResults results = evaluate_plans(load_and_prepare(doc, file, 1), {"run"});
    return results.policies.front().oom_iterations;
  };
  EXPECT_EQ(oom_iterations("h100-sxm-pytorch-fsdp.json"), 0);
  EXPECT_GT(oom_iterations("h100-sxm-default.json"), 0);
}

TEST(ValidationCatalogue, StrictReading) {
  EXPECT_NO_THROW(catalogue_of({entry_json({})}));
  EXPECT_THROW(catalogue_of({entry_json({{"colour", "red"}})}), InputError);
  EXPECT_THROW(catalogue_of({entry_json({}), entry_json({})}), InputError);  // duplicate id
  EXPECT_THROW(catalogue_of({entry_json({{"quantity", "latency"}})}), InputError);
  EXPECT_THROW(catalogue_of({entry_json({{"quantity", "oom"}, {"published", 1.2}})}), InputError);
  EXPECT_THROW(catalogue_of({entry_json({{"reference", nullptr}})}), InputError);  // a speedup needs a reference
  EXPECT_THROW(catalogue_of({entry_json({{"published", {{"min", 2}, {"max", 1}}}})}), InputError);
  EXPECT_THROW(catalogue_of({entry_json({{"set", {{"training..iterations", 2}}}})}), InputError);
  // "one" takes one point; a series gives values on every point or on none.
  EXPECT_THROW(catalogue_of({entry_json({{"points", Json::array({Json::object(), Json::object()})}})}), InputError);
  EXPECT_THROW(catalogue_of({entry_json({{"combine", "series"},
                                         {"published", "increasing"},
                                         {"points", Json::array({{{"published", 1.0}}, Json::object()})}})}),
               InputError);
  // A figure lcsim cannot express needs only its reason.
  const auto listed = catalogue_of({entry_json({{"not_expressible", "no such mechanism"}, {"published", "6.7 s"}})});
  EXPECT_EQ(listed.entries.front().published_text, "6.7 s");
  EXPECT_TRUE(listed.entries.front().points.empty());
}

TEST(ValidationCatalogue, DuplicateKeysInTheCatalogueFileAreErrors) {
  const auto file = std::filesystem::temp_directory_path() / ("lcsim-catalogue-" + std::to_string(::getpid()));
  std::ofstream(file) << R"({"schema": "lcsim-validation-catalogue/1", "entries": [{"id": "a", "id": "b"}]})";
  try {
    load_catalogue(file.string());
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), file.string() + ": entries[0].id: duplicate key");
  }
  std::filesystem::remove(file);
}

TEST(ValidationCatalogue, SetChangesTheScenarioAtDottedPathsAndRefusesMissingParents) {
  const auto catalogue = catalogue_of({entry_json({{"set", {{"training.bucket_size_tokens", 8192}}}})});
  const Json doc = point_scenario(catalogue.entries.front().points.front(), "e");
  EXPECT_EQ(doc["training"]["bucket_size_tokens"], 8192);
  EXPECT_TRUE(std::filesystem::path(doc["profile"].get<std::string>()).is_absolute());
  const auto bad = catalogue_of({entry_json({{"set", {{"trainig.iterations", 2}}}})});
  EXPECT_THROW(point_scenario(bad.entries.front().points.front(), "e"), InputError);
}

TEST(ValidationMaths, ErrorAgainstAValueAndARange) {
  const auto value_entry = catalogue_of({entry_json({{"published", 2.0}})});
  EntryOutcome o = evaluate_entry(value_entry.entries.front(), {value(2.5)});
  EXPECT_DOUBLE_EQ(*o.error, 0.25);
  EXPECT_EQ(o.ordering, OrderingVerdict::Held);
  EXPECT_TRUE(o.within_tolerance);  // default tolerance 0.25

  const auto range = catalogue_of({entry_json({{"published", {{"min", 1.32}, {"max", 2.66}}}})});
  EXPECT_DOUBLE_EQ(*evaluate_entry(range.entries.front(), {value(2.0)}).error, 0.0);
  EXPECT_NEAR(*evaluate_entry(range.entries.front(), {value(1.1)}).error, (1.1 - 1.32) / 1.32, 1e-12);
  EXPECT_NEAR(*evaluate_entry(range.entries.front(), {value(3.0)}).error, (3.0 - 2.66) / 2.66, 1e-12);
  // Below 1 the other policy wins: the ordering breaks whatever the size of the error.
  const EntryOutcome lost = evaluate_entry(range.entries.front(), {value(0.95)});
  EXPECT_EQ(lost.ordering, OrderingVerdict::Broken);
  EXPECT_FALSE(lost.within_tolerance);
}

TEST(ValidationMaths, OrderingOfSpeedupsSeriesAndRankings) {
  // A published 0.16x: the reference wins; a predicted 1.15x breaks it.
  const auto slower = catalogue_of({entry_json({{"published", 0.16}})});
  EXPECT_EQ(evaluate_entry(slower.entries.front(), {value(1.15)}).ordering, OrderingVerdict::Broken);
  EXPECT_EQ(evaluate_entry(slower.entries.front(), {value(0.5)}).ordering, OrderingVerdict::Held);

  Json three = Json::array({Json::object(), Json::object(), Json::object()});
  const auto rising =
      catalogue_of({entry_json({{"combine", "series"}, {"published", "increasing"}, {"points", three}})});
  const ValidationEntry& series = rising.entries.front();
  EXPECT_EQ(evaluate_entry(series, {value(1.0), value(1.2), value(1.5)}).ordering, OrderingVerdict::Held);
  EXPECT_EQ(evaluate_entry(series, {value(1.0), value(1.5), value(1.2)}).ordering, OrderingVerdict::Broken);
  // A flat step keeps no trend (Skrull Fig. 4a's BucketSize claim against a flat prediction).
  EXPECT_EQ(evaluate_entry(series, {value(1.0), value(1.5), value(1.501)}).ordering, OrderingVerdict::Broken);

  Json ranked = Json::array({{{"published", 0.5}}, {{"published", 0.3}}, {{"published", 0.29}}});
  const auto each = catalogue_of({entry_json(
      {{"quantity", "abr"}, {"reference", nullptr}, {"combine", "each"}, {"published", nullptr}, {"points", ranked}})});
  const EntryOutcome kept = evaluate_entry(each.entries.front(), {value(0.6), value(0.4), value(0.45)});
  EXPECT_EQ(kept.ordering, OrderingVerdict::Held);  // 0.3 and 0.29 are too close to rank
  EXPECT_NEAR(*kept.abs_error, ((0.1 / 0.5) + (0.1 / 0.3) + (0.16 / 0.29)) / 3, 1e-12);
  EXPECT_EQ(evaluate_entry(each.entries.front(), {value(0.3), value(0.4), value(0.1)}).ordering,
            OrderingVerdict::Broken);
}

Json series_entry(const std::string& id, const std::string& trend, std::vector<double> published) {
  Json points = Json::array();
  for (double p : published) points.push_back(p > 0 ? Json{{"published", p}} : Json::object());
  return entry_json({{"id", id}, {"combine", "series"}, {"published", trend}, {"points", points}});
}

TEST(ValidationMaths, ASeriesFactorIsHowFarTheTrendGoesTheWayItRuns) {
  // Falling 100 -> 10 published (x10), 80 -> 16 predicted (x5): half the decline, -50%, though the points' mean
  // error is +6.7% (-20%, -20%, +60%). Taken last over first, the factors would be 0.1 and 0.2 (+100%).
  const auto falling = catalogue_of({series_entry("falling", "decreasing", {100, 50, 10})});
  const EntryOutcome shallow = evaluate_entry(falling.entries.front(), {value(80), value(40), value(16)});
  ASSERT_TRUE(shallow.series_factor.has_value());
  EXPECT_DOUBLE_EQ(shallow.series_factor->published, 10.0);
  EXPECT_DOUBLE_EQ(shallow.series_factor->predicted, 5.0);
  EXPECT_DOUBLE_EQ(shallow.series_factor->error, -0.5);
  EXPECT_NEAR(*shallow.error, (-0.2 - 0.2 + 0.6) / 3, 1e-12);  // the level error stays the mean over points
  EXPECT_EQ(shallow.ordering, OrderingVerdict::Held);

  // Rising 2 -> 8 published (x4), 1 -> 5 predicted (x5): +25%, at the criterion's edge. First over last: -20%.
  const auto rising = catalogue_of({series_entry("rising", "increasing", {2, 3, 8})});
  const EntryOutcome steep = evaluate_entry(rising.entries.front(), {value(1), value(2), value(5)});
  ASSERT_TRUE(steep.series_factor.has_value());
  EXPECT_DOUBLE_EQ(steep.series_factor->published, 4.0);
  EXPECT_DOUBLE_EQ(steep.series_factor->predicted, 5.0);
  EXPECT_DOUBLE_EQ(steep.series_factor->error, 0.25);

  // A trend without published values has a direction only: no factor, as for any other entry.
  const auto bare = catalogue_of({series_entry("bare", "increasing", {0, 0, 0})});
  EXPECT_FALSE(evaluate_entry(bare.entries.front(), {value(1), value(2), value(5)}).series_factor);
  const auto one = catalogue_of({entry_json({{"published", 2.0}})});
  EXPECT_FALSE(evaluate_entry(one.entries.front(), {value(2.5)}).series_factor);
  // No ratio to take of an end point at zero.
  EXPECT_FALSE(series_factor({100, 10}, {80, 0}, Trend::Decreasing));
}

TEST(ValidationMaths, TrendFactorsAreCountedPerFamilyAndWrittenOnTheirEntries) {
  const Json source = {
      {"paper", "torchtitan"}, {"where", "Table 2"}, {"framework", "pytorch-fsdp"}, {"precision", "bf16"}};
  Json framework = series_entry("fw-falling", "decreasing", {100, 50, 10});
  framework["family"] = "framework";
  framework["source"] = source;
  const auto catalogue = catalogue_of({series_entry("rising", "increasing", {2, 3, 8}), framework,
                                       series_entry("bare", "increasing", {0, 0}), entry_json({{"id", "one"}})});
  const std::vector<EntryOutcome> outcomes = {
      evaluate_entry(catalogue.entries[0], {value(1), value(2), value(5)}),     // x5 against x4: +25%, within
      evaluate_entry(catalogue.entries[1], {value(80), value(40), value(16)}),  // x5 against x10: -50%
      evaluate_entry(catalogue.entries[2], {value(1), value(2)}), evaluate_entry(catalogue.entries[3], {value(1.5)})};
  const ValidationSummary s = summarize_validation(outcomes);
  EXPECT_EQ(s.factor_checked, 1);
  EXPECT_EQ(s.factor_within, 1);
  EXPECT_EQ(s.framework.factor_checked, 1);
  EXPECT_EQ(s.framework.factor_within, 0);
  EXPECT_EQ(s.measured.factor_checked, 0);

  const auto j = validation_to_json(catalogue, outcomes, s);
  EXPECT_EQ(j["schema"], "lcsim-validation/4");
  ASSERT_TRUE(j["entries"][1].contains("series_factor"));
  EXPECT_DOUBLE_EQ(j["entries"][1]["series_factor"]["published"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(j["entries"][1]["series_factor"]["predicted"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(j["entries"][1]["series_factor"]["error"].get<double>(), -0.5);
  EXPECT_FALSE(j["entries"][2].contains("series_factor"));  // a trend without values
  EXPECT_FALSE(j["entries"][3].contains("series_factor"));
  EXPECT_EQ(j["summary"]["factor_checked"], 1);
  EXPECT_EQ(j["summary"]["factor_within"], 1);
  EXPECT_EQ(j["summary"]["framework_factor_checked"], 1);
  EXPECT_EQ(j["summary"]["framework_factor_within"], 0);

  // The CSV carries the factors in its last three columns, empty for entries without one.
  std::istringstream csv(validation_to_csv(outcomes));
  std::string header, rising, falling, bare;
  std::getline(csv, header);
  std::getline(csv, rising);
  std::getline(csv, falling);
  std::getline(csv, bare);
  EXPECT_NE(header.find(",published_factor,predicted_factor,factor_error"), std::string::npos) << header;
  EXPECT_TRUE(falling.ends_with(",10,5,-0.5")) << falling;
  EXPECT_TRUE(bare.ends_with(",,,")) << bare;
}

TEST(ValidationMaths, CombinedPointsAndOom) {
  Json two = Json::array({Json::object(), Json::object()});
  const auto mean = catalogue_of({entry_json({{"combine", "mean"}, {"points", two}, {"published", 2.0}})});
  EXPECT_DOUBLE_EQ(*evaluate_entry(mean.entries.front(), {value(1.0), value(4.0)}).predicted, 2.5);
  const auto peak = catalogue_of({entry_json({{"combine", "max"}, {"points", two}, {"published", 2.0}})});
  EXPECT_DOUBLE_EQ(*evaluate_entry(peak.entries.front(), {value(1.0), value(4.0)}).predicted, 4.0);

  const auto oom = catalogue_of({entry_json({{"quantity", "oom"}, {"reference", nullptr}, {"published", true}})});
  PointPrediction fits;
  fits.yes = false;
  const EntryOutcome missed = evaluate_entry(oom.entries.front(), {fits});
  EXPECT_EQ(missed.ordering, OrderingVerdict::Broken);
  EXPECT_FALSE(missed.within_tolerance);
}

TEST(ValidationMaths, SpeedupReadsTheBestReferenceFromResults) {
  const auto catalogue = catalogue_of({entry_json({{"reference", {"a", "b"}}})});
  const Json results = {{"policies",
                         {{{"name", "skrull"}, {"tokens_per_s", 300.0}},
                          {{"name", "a"}, {"tokens_per_s", 100.0}},
                          {{"name", "b"}, {"tokens_per_s", 200.0}}}}};
  const ValidationEntry& e = catalogue.entries.front();
  EXPECT_DOUBLE_EQ(*predict_from_results(e, e.points.front(), results, 8).value, 1.5);
}

TEST(ValidationMaths, PaddingRatioIsThePolicysPrMetric) {
  // HBP Table 3's PR column: the results' mean padding ratio of the entry's policy, nothing else.
  const auto catalogue = catalogue_of(
      {entry_json({{"quantity", "pr"}, {"reference", nullptr}, {"policy", "random"}, {"published", 0.416}})});
  const ValidationEntry& e = catalogue.entries.front();
  EXPECT_EQ(e.quantity, ValidationQuantity::Pr);
  const Json results = {{"policies",
                         {{{"name", "isf-4k"}, {"metrics", {{"pr", 0.0}, {"dbr", 0.1}}}},
                          {{"name", "random"}, {"metrics", {{"pr", 0.49}, {"dbr", 0.62}}}}}}};
  EXPECT_DOUBLE_EQ(*predict_from_results(e, e.points.front(), results, 32).value, 0.49);
  EXPECT_NEAR(*evaluate_entry(e, {value(0.49)}).error, (0.49 - 0.416) / 0.416, 1e-12);
  const Json no_pr = {{"policies", {{{"name", "random"}, {"metrics", {{"dbr", 0.62}}}}}}};
  EXPECT_THROW(predict_from_results(e, e.points.front(), no_pr, 32), InputError);
}

TEST(ValidationMaths, TokensPerGpuSecondIsThePolicysThroughputOverTheClustersGpus) {
  const auto catalogue =
      catalogue_of({entry_json({{"quantity", "tokens_per_gpu_s"}, {"reference", nullptr}, {"published", 4000.0}})});
  const Json results = {{"policies", {{{"name", "skrull"}, {"tokens_per_s", 36000.0}}}}};
  const ValidationEntry& e = catalogue.entries.front();
  EXPECT_DOUBLE_EQ(*predict_from_results(e, e.points.front(), results, 8).value, 4500.0);
  EXPECT_NEAR(*evaluate_entry(e, {value(4500.0)}).error, 0.125, 1e-12);
}

TEST(ValidationCatalogue, AFrameworkEntryNamesItsStackAndPrecisionAndIsSummarizedApart) {
  const Json source = {
      {"paper", "torchtitan"}, {"where", "Table 1"}, {"framework", "pytorch-fsdp"}, {"precision", "bf16"}};
  const auto catalogue =
      catalogue_of({entry_json({{"id", "paper"}, {"published", 2.0}}),
                    entry_json({{"id", "fw"}, {"family", "framework"}, {"source", source}, {"published", 2.0}})});
  EXPECT_TRUE(catalogue.entries[1].framework);
  EXPECT_EQ(entry_kind(catalogue.entries[1]), "framework");
  const ValidationSummary s = summarize_validation(
      {evaluate_entry(catalogue.entries[0], {value(3.0)}), evaluate_entry(catalogue.entries[1], {value(2.2)})});
  EXPECT_EQ(s.held_out, 1);  // the papers' figures alone
  EXPECT_DOUBLE_EQ(s.held_out_mape, 0.5);
  EXPECT_EQ(s.framework.entries, 1);
  EXPECT_NEAR(s.framework.mape, 0.1, 1e-12);
  EXPECT_EQ(s.framework.ordering_checked, 1);
  // A framework entry without its stack class or precision, or another family, is refused.
  Json bare = source;
  bare.erase("precision");
  EXPECT_THROW(catalogue_of({entry_json({{"family", "framework"}, {"source", bare}})}), InputError);
  EXPECT_THROW(catalogue_of({entry_json({{"family", "papers"}})}), InputError);
  Json odd = source;
  odd["framework"] = "jax";
  EXPECT_THROW(catalogue_of({entry_json({{"family", "framework"}, {"source", odd}})}), InputError);
}

TEST(ValidationMaths, SummaryKeepsFittedAndUnexpressedEntriesOutOfTheHeldOutError) {
  const auto catalogue =
      catalogue_of({entry_json({{"id", "held"}, {"published", 2.0}}), entry_json({{"id", "fit"}, {"published", 2.0}}),
                    entry_json({{"id", "none"}, {"not_expressible", "why"}})});
  std::vector<EntryOutcome> outcomes = {evaluate_entry(catalogue.entries[0], {value(3.0)}),
                                        evaluate_entry(catalogue.entries[1], {value(10.0)}),
                                        evaluate_entry(catalogue.entries[2], {})};
  outcomes[1].fitted = "collectives.nvlink.all_gather";  // what the profile's provenance.fitted_on says
  EXPECT_EQ(entry_status(outcomes[1]), "fitted");
  EXPECT_EQ(entry_status(outcomes[0]), "held out");
  const ValidationSummary s = summarize_validation(outcomes);
  EXPECT_EQ(s.held_out, 1);
  EXPECT_EQ(s.fitted, 1);
  EXPECT_EQ(s.not_expressible, 1);
  EXPECT_DOUBLE_EQ(s.held_out_mape, 0.5);
  EXPECT_DOUBLE_EQ(s.held_out_median_ape, 0.5);
  EXPECT_EQ(s.ordering_checked, 2);
  EXPECT_EQ(s.ordering_held, 2);
}

/// A measured results file (lcsim-gpu live --json) of the case-study scenario, in a fresh folder.
struct MeasuredFile {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("lcsim-measured-test-" + std::to_string(::getpid()));
  std::filesystem::path file = dir / "run.live.json";
  explicit MeasuredFile(Json overrides = Json::object()) {
    std::filesystem::create_directories(dir);
    Json doc = {{"schema", "lcsim-results/1"},
                {"mode", "live"},
                {"scenario", "skrull-case-study-dp1"},
                {"baseline", "deepspeed"},
                {"policies",
                 {{{"name", "deepspeed"}, {"mean_iteration_s", 2.0}, {"speedup_vs_baseline", 1.0}},
                  {{"name", "skrull"},
                   {"mean_iteration_s", 1.25},
                   {"speedup_vs_baseline", 1.6},
                   {"iterations", {{{"peak_GiB", 10.0}}, {{"peak_GiB", 20.0}}}}}}}};
    for (const auto& [key, value] : overrides.items()) doc[key] = value;
    std::ofstream(file) << doc.dump(2);
  }
  ~MeasuredFile() { std::filesystem::remove_all(dir); }
};

Json measured_entry(const MeasuredFile& measured, Json overrides = Json::object()) {
  Json e = entry_json({{"id", "m"},
                       {"quantity", "iteration_seconds"},
                       {"reference", nullptr},
                       {"published", nullptr},
                       {"mode", "plan"},
                       {"measured", measured.file.string()}});
  e.erase("published");
  for (const auto& [key, value] : overrides.items()) e[key] = value;
  return e;
}

std::string catalogue_error(const Json& entry) {
  try {
    catalogue_of({entry});
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ValidationCatalogue, AMeasuredEntryTakesItsFigureFromTheMeasuredRun) {
  const MeasuredFile measured;
  const auto seconds = catalogue_of({measured_entry(measured)});
  EXPECT_EQ(entry_kind(seconds.entries[0]), "measured");
  EXPECT_DOUBLE_EQ(*seconds.entries[0].published.value, 1.25);
  const auto speedup = catalogue_of({measured_entry(measured, {{"quantity", "speedup"}, {"reference", "deepspeed"}})});
  EXPECT_DOUBLE_EQ(*speedup.entries[0].published.value, 1.6);
  // Peak memory as a prediction's peak_GB: the mean of the iterations' peaks, GiB to GB.
  const auto peak = catalogue_of({measured_entry(measured, {{"quantity", "peak_GB"}})});
  EXPECT_DOUBLE_EQ(*peak.entries[0].published.value, 15.0 * 1.073741824);
  EXPECT_NE(catalogue_error(measured_entry(measured, {{"quantity", "peak_GB"}, {"policy", "deepspeed"}}))
                .find("has no iterations"),
            std::string::npos);
  EXPECT_EQ(entry_kind(catalogue_of({entry_json({})}).entries[0]), "published");

  // Each way a measured entry can disagree with its file is named.
  EXPECT_NE(catalogue_error(measured_entry(measured, {{"published", 1.0}})).find("comes from its measured file"),
            std::string::npos);
  EXPECT_NE(
      catalogue_error(measured_entry(measured, {{"quantity", "abr"}})).find("iteration_seconds, speedup or peak_GB"),
      std::string::npos);
  EXPECT_NE(catalogue_error(measured_entry(measured, {{"mode", "simulate"}})).find("\"plan\""), std::string::npos);
  EXPECT_NE(catalogue_error(measured_entry(measured, {{"policy", "rr"}})).find("no policy 'rr'"), std::string::npos);
  EXPECT_NE(catalogue_error(measured_entry(measured, {{"quantity", "speedup"}, {"reference", "rr"}}))
                .find("over the run's baseline 'deepspeed'"),
            std::string::npos);
  const MeasuredFile planned(Json{{"mode", "plan"}});
  EXPECT_NE(catalogue_error(measured_entry(planned)).find("mode \"live\""), std::string::npos);
  const MeasuredFile other(Json{{"scenario", "another-run"}});
  EXPECT_NE(catalogue_error(measured_entry(other)).find("measured scenario 'another-run'"), std::string::npos);
  const MeasuredFile oom(Json{{"policies", {{{"name", "skrull"}, {"mean_iteration_s", nullptr}}}}});
  EXPECT_NE(catalogue_error(measured_entry(oom)).find("no measured mean_iteration_s"), std::string::npos);
}

// A measured entry tests the model on the plans that ran: a policy change that plans other iterations must be
// caught, not compared against hardware that ran something else.
TEST(ValidationCatalogue, AMeasuredEntryRefusesAPredictionOfOtherPlans) {
  const MeasuredFile measured(Json{{"policies",
                                    {{{"name", "deepspeed"}, {"mean_iteration_s", 2.0}, {"speedup_vs_baseline", 1.0}},
                                     {{"name", "skrull"},
                                      {"mean_iteration_s", 1.25},
                                      {"speedup_vs_baseline", 1.6},
                                      {"iterations", {{{"label", "batch 0: a"}}, {{"label", "batch 1: b"}}}}}}}});
  const auto catalogue =
      catalogue_of({measured_entry(measured, {{"quantity", "speedup"}, {"reference", "deepspeed"}})});
  const ValidationEntry& entry = catalogue.entries[0];
  ASSERT_EQ(entry.measured_plans.count("skrull"), 1u);
  EXPECT_EQ(entry.measured_plans.at("skrull"), (std::vector<std::string>{"batch 0: a", "batch 1: b"}));
  EXPECT_EQ(entry.measured_plans.count("deepspeed"), 0u);  // its file records no iterations: nothing to compare

  const auto predicted = [](const std::string& second) {
    return Json{{"policies",
                 {{{"name", "deepspeed"}, {"tokens_per_s", 1.0}},
                  {{"name", "skrull"},
                   {"tokens_per_s", 2.0},
                   {"iterations", {{{"label", "batch 0: a"}}, {{"label", second}}}}}}}};
  };
  EXPECT_EQ(plan_drift(entry, predicted("batch 1: b")), "");
  const std::string drift = plan_drift(entry, predicted("batch 1: c"));
  EXPECT_EQ(drift.rfind(kPlanDrift, 0), 0u);
  EXPECT_NE(drift.find("plans \"batch 1: c\" where \"batch 1: b\" ran"), std::string::npos);
  Json shorter = predicted("batch 1: b");
  shorter["policies"][1]["iterations"].erase(1);
  EXPECT_NE(plan_drift(entry, shorter).find("plans 1 iterations, 2 were measured"), std::string::npos);
  // A published entry has no measured plans to drift from.
  EXPECT_EQ(plan_drift(catalogue_of({entry_json({})}).entries[0], predicted("batch 1: c")), "");
}

TEST(ValidationMaths, MeasuredEntriesAreSummarizedApartFromThePapers) {
  const MeasuredFile measured;
  const auto catalogue =
      catalogue_of({entry_json({{"id", "paper"}, {"published", 2.0}}), measured_entry(measured),
                    measured_entry(measured, {{"id", "m2"}, {"quantity", "speedup"}, {"reference", "deepspeed"}})});
  const std::vector<EntryOutcome> outcomes = {evaluate_entry(catalogue.entries[0], {value(3.0)}),
                                              evaluate_entry(catalogue.entries[1], {value(1.0)}),
                                              evaluate_entry(catalogue.entries[2], {value(0.8)})};
  const ValidationSummary s = summarize_validation(outcomes);
  EXPECT_EQ(s.held_out, 1);
  EXPECT_DOUBLE_EQ(s.held_out_mape, 0.5);
  EXPECT_EQ(s.ordering_checked, 1);
  EXPECT_EQ(s.measured.entries, 2);
  EXPECT_EQ(s.measured.numeric, 2);
  EXPECT_DOUBLE_EQ(s.measured.mape, (0.2 + 0.5) / 2);  // |1.0 - 1.25| / 1.25 and |0.8 - 1.6| / 1.6
  EXPECT_DOUBLE_EQ(s.measured.median_ape, 0.35);
  EXPECT_EQ(s.measured.ordering_checked, 1);
  EXPECT_EQ(s.measured.ordering_held, 0);  // the measured run says Skrull wins; 0.8 says it loses
}

TEST(ValidationMaths, MeasuredRankingJudgesEveryPairOfARunAndLeavesMeasuredTiesOut) {
  // One run of four policies over deepspeed (measured 1): a 1.6, b 1.605 (a tie with a), c 1.2.
  const MeasuredFile measured(Json{{"policies",
                                    {{{"name", "deepspeed"}, {"mean_iteration_s", 2.0}, {"speedup_vs_baseline", 1.0}},
                                     {{"name", "a"}, {"mean_iteration_s", 1.25}, {"speedup_vs_baseline", 1.6}},
                                     {{"name", "b"}, {"mean_iteration_s", 1.246}, {"speedup_vs_baseline", 1.605}},
                                     {{"name", "c"}, {"mean_iteration_s", 1.667}, {"speedup_vs_baseline", 1.2}}}}});
  const auto speedup = [&](const std::string& policy) {
    return measured_entry(measured,
                          {{"id", policy}, {"quantity", "speedup"}, {"reference", "deepspeed"}, {"policy", policy}});
  };
  // The fourth entry, a time, takes no part in the ranking.
  const auto catalogue =
      catalogue_of({speedup("a"), speedup("b"), speedup("c"), measured_entry(measured, {{"policy", "a"}})});
  // Predicted: a 1.3 and c 1.4 (c over a: broken), b 1.2 (no verdict against a: measured tie), deepspeed 1; c
  // against b is kept, and b, a and c each beat deepspeed.
  std::vector<EntryOutcome> outcomes = {
      evaluate_entry(catalogue.entries[0], {value(1.3)}), evaluate_entry(catalogue.entries[1], {value(1.2)}),
      evaluate_entry(catalogue.entries[2], {value(1.4)}), evaluate_entry(catalogue.entries[3], {value(1.0)})};
  MeasuredRanking r = measured_ranking(outcomes);
  EXPECT_EQ(r.ties, 1);
  EXPECT_EQ(r.pairs, 5);  // {ds, a, b, c}: 6 pairs, a-b measured 0.3% apart
  EXPECT_EQ(r.kept, 3);   // a, b, c over deepspeed
  ASSERT_EQ(r.broken.size(), 2u);
  std::set<std::pair<std::string, std::string>> broken;
  for (const BrokenRanking& b : r.broken) broken.insert({b.faster, b.slower});
  EXPECT_EQ(broken, (std::set<std::pair<std::string, std::string>>{{"a", "c"}, {"b", "c"}}));

  // A predicted tie (within 0.1%) ranks nothing: with c predicted level with b, a over c is kept and b over c not.
  outcomes[2] = evaluate_entry(catalogue.entries[2], {value(1.2005)});
  r = measured_ranking(outcomes);
  EXPECT_EQ(r.kept, 4);
  ASSERT_EQ(r.broken.size(), 1u);
  EXPECT_EQ(r.broken[0].faster, "b");
  // Predicted in the measured order, every judged pair is kept; a fitted entry takes no part.
  outcomes[2] = evaluate_entry(catalogue.entries[2], {value(1.1)});
  EXPECT_EQ(measured_ranking(outcomes).kept, 5);
  outcomes[2].fitted = "compute.layer_issue_us";
  r = measured_ranking(outcomes);
  EXPECT_EQ(r.pairs + r.ties, 3);  // {ds, a, b}
  EXPECT_EQ(summarize_validation(outcomes).measured_ranking.kept, r.kept);
}

TEST(ValidationCatalogue, ShippedCatalogueHoldsTheH200LiveRunsAsMeasuredEntries) {
  const ValidationCatalogue catalogue = load_catalogue(kCatalogue);
  int measured = 0;
  for (const ValidationEntry& e : catalogue.entries)
    if (!e.measured.empty()) {
      ++measured;
      EXPECT_TRUE(std::filesystem::exists(e.measured)) << e.id;
    }
  EXPECT_GE(measured, 4);
}

TEST(ValidationCatalogue, FittedIsTheProfilesToSayNotTheCatalogues) {
  Profile profile;
  profile.provenance.fitted_on = {{"table5-ag", "collectives.nvlink.all_gather"},
                                  {"table5-ag", "collectives.nvlink.reduce_scatter"},
                                  {"other", "compute.layer_overhead_us"}};
  EXPECT_EQ(fitted_parameters(profile, "table5-ag"),
            "collectives.nvlink.all_gather; collectives.nvlink.reduce_scatter");
  EXPECT_EQ(fitted_parameters(profile, "fig3"), "");
  try {
    catalogue_of({entry_json({{"id", "x"}, {"published", 2.0}, {"fitted", "profile x"}})});
    FAIL() << "a catalogue entry may not declare itself fitted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("provenance.fitted_on"), std::string::npos) << e.what();
  }
}

TEST(ValidateCli, RunsASmallCatalogueAndWritesItsResults) {
  const auto dir = std::filesystem::temp_directory_path() / ("lcsim-validate-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  Json doc = {{"schema", "lcsim-validation-catalogue/1"},
              {"entries",
               {entry_json({{"id", "speedup"}, {"set", {{"training.iterations", 2}}}, {"mode", "plan"}}),
                entry_json({{"id", "oom"},
                            {"quantity", "oom"},
                            {"policy", "skrull-no-rollback"},
                            {"reference", nullptr},
                            {"set", {{"training.iterations", 2}}},
                            {"published", true}}),
                entry_json({{"id", "latency"},
                            {"quantity", "collective_seconds"},
                            {"policy", nullptr},
                            {"reference", nullptr},
                            {"collective", {{"op", "all_gather"}, {"group_size", 8}, {"bytes", 2097152}}},
                            {"published", 53.29e-6}})}}};
  const auto file = dir / "catalogue.json";
  std::ofstream(file) << doc.dump(2);
  const auto json = dir / "out.json";
  const auto run = testing::run_lcsim("validate --catalogue '" + file.string() + "' --json '" + json.string() +
                                      "' --csv '" + (dir / "out.csv").string() + "' --jobs 2 --wide");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("held out: 3 published entries"), std::string::npos) << run.output;
  // --wide: one row per entry. The table shows each held-out numeric entry's 80% interval and whether the published
  // figure is inside it; the yes/no OOM entry has none.
  EXPECT_NE(run.output.find("80% interval"), std::string::npos) << run.output;
  EXPECT_TRUE(std::regex_search(run.output, std::regex(R"(\nspeedup .* [0-9.]+-[0-9.]+ (in|OUT) )"))) << run.output;
  EXPECT_TRUE(std::regex_search(run.output, std::regex(R"(\noom .* (OOM|fits) +- )"))) << run.output;
  std::ifstream in(json);
  const Json results = Json::parse(in);
  EXPECT_EQ(results["schema"], "lcsim-validation/4");
  ASSERT_EQ(results["entries"].size(), 3u);
  EXPECT_TRUE(results["entries"][0]["predicted"].is_number());
  EXPECT_TRUE(results["entries"][1]["predicted"].is_boolean());
  EXPECT_NEAR(results["entries"][2]["predicted"].get<double>(), 53.29e-6, 53.29e-6 * 0.15);
  // Same catalogue, same results, to the byte.
  const auto again = dir / "again.json";
  ASSERT_EQ(testing::run_lcsim("validate --quiet --catalogue '" + file.string() + "' --json '" + again.string() + "'")
                .exit_code,
            0);
  std::ifstream a(json), b(again);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(a), {}), std::string(std::istreambuf_iterator<char>(b), {}));
  EXPECT_EQ(testing::run_lcsim("validate --catalogue '" + file.string() + "' --only nope").exit_code, 2);

  // --profile replaces the profile of every scenario on its GPU kind: a profile whose collectives were measured on
  // twice the NVLink bandwidth predicts a slower all-gather on this cluster; an A800 profile leaves H100 runs alone.
  std::ifstream h100_in(std::string(LCSIM_SOURCE_DIR) + "/calibrate/profiles/h100-sxm-default.json");
  Json faster_reference = Json::parse(h100_in);
  faster_reference["network"]["nvlink_GBps"] = 900;
  const auto profile = dir / "profile.json";
  std::ofstream(profile) << faster_reference.dump(2);
  const auto swapped = dir / "swapped.json";
  ASSERT_EQ(testing::run_lcsim("validate --quiet --only latency --catalogue '" + file.string() + "' --json '" +
                               swapped.string() + "' --profile '" + profile.string() + "' --profile '" +
                               LCSIM_SOURCE_DIR + "/calibrate/profiles/a800-default.json'")
                .exit_code,
            0);
  std::ifstream swapped_in(swapped);
  const double slower = Json::parse(swapped_in)["entries"][0]["predicted"].get<double>();
  EXPECT_GT(slower, results["entries"][2]["predicted"].get<double>() * 1.05);

  // Whether an entry is fitted is the profile's to say: the default H100 profile's NVLink collectives were fitted
  // on this Table 5 row (provenance.fitted_on), the published-measurements profile's were not.
  Json table5 = doc;
  table5["entries"] = Json::array({doc["entries"][2]});
  table5["entries"][0]["id"] = "skrull-table5-all-gather-fitted";
  const auto table5_file = dir / "table5.json";
  std::ofstream(table5_file) << table5.dump(2);
  const auto status_with = [&](const std::string& extra) {
    const auto out = dir / "status.json";
    const auto r = testing::run_lcsim("validate --quiet --catalogue '" + table5_file.string() + "' --json '" +
                                      out.string() + "'" + extra);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::ifstream status_in(out);
    const Json entry = Json::parse(status_in)["entries"][0];
    return entry["status"].get<std::string>() + " " + entry["fitted"].get<std::string>();
  };
  EXPECT_EQ(status_with(""), "fitted collectives.nvlink.all_gather");
  EXPECT_EQ(
      status_with(" --profile '" + std::string(LCSIM_SOURCE_DIR) + "/calibrate/profiles/h100-sxm-published.json'"),
      "held out ");
  std::filesystem::remove_all(dir);
}

}  // namespace validation_test
}  // namespace lcsim
