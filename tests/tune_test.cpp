// `lcsim tune`: the search space it expands, the verdict it draws, and the command end to end -- it must find the
// optimum an exhaustive in-process enumeration finds, never accept a plan that runs out of memory, and give the
// same results for any --jobs; its bounds never fall below an estimate, and pruning with them keeps every
// estimate the verdict reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include <unistd.h>

#include "base/errors.hpp"
#include "base/json_reader.hpp"
#include "formats/scenario.hpp"
#include "formats/scenario_loader.hpp"
#include "studies/evaluation.hpp"
#include "studies/sweep.hpp"
#include "studies/tune.hpp"
#include "studies/tune_candidate.hpp"
#include "tests/command_run_support.hpp"

namespace lcsim {
namespace tune_test {

using Json = nlohmann::json;
namespace fs = std::filesystem;

/// The default scenario (32 H100, Qwen2.5-0.5B) with its paths absolute, `iterations` batches and `tune`.
Json default_document(int iterations, const Json& tune = nullptr) {
  const std::string file = std::string(LCSIM_SOURCE_DIR) + "/scenarios/default.json";
  Json doc = scenario_with_absolute_paths(parse_json_file(file), file);
  doc["training"]["iterations"] = iterations;
  if (!tune.is_null()) doc["tune"] = tune;
  return doc;
}

std::string tune_error(const Json& tune) {
  try {
    scenario_from_json(default_document(1, tune), "s.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(TuneKnobs, EachPolicyDeclaresItsOwn) {
  const TuneKnobContext context{65536, Tokens{26624}};
  const auto knobs = [&](const std::string& kind, Json options = Json::object()) {
    PolicySpec spec;
    spec.kind = kind;
    spec.label = kind;
    spec.options = std::move(options);
    return tune_knobs(spec, context);
  };
  // Skrull and RR: BucketSize up to the context, the scenario's own included.
  for (const char* kind : {"skrull", "rr"}) {
    const auto k = knobs(kind);
    ASSERT_EQ(k.size(), 1u) << kind;
    EXPECT_EQ(k[0].path, "training.bucket_size_tokens");
    EXPECT_EQ(Json(k[0].values), Json::parse("[4096, 8192, 16384, 24576, 26624, 32768, 49152, 65536]"));
  }
  EXPECT_TRUE(knobs("skrull-dacp").empty());
  EXPECT_TRUE(knobs("deepspeed").empty());
  const auto packing = knobs("packing");
  ASSERT_EQ(packing.size(), 1u);
  EXPECT_EQ(packing[0].path, "options.packing_length_tokens");
  EXPECT_EQ(Json(packing[0].values), Json::parse("[null, 16384, 32768, 65536]"));
  EXPECT_EQ(knobs("sorted")[0].path, "options.micro_batch_tokens");
  EXPECT_TRUE(knobs("sorted", {{"micro_batch", "sequence"}}).empty()) << "one sequence per micro-batch has no budget";
}

TEST(TuneSpec, IsReadStrictlyAndNamesTheKey) {
  EXPECT_EQ(tune_error({{"layout", {{"cp", {1, 2}}}}, {"simulate_top", 2}}), "");
  EXPECT_NE(tune_error({{"colour", 1}}).find("tune.colour"), std::string::npos);
  EXPECT_NE(tune_error({{"layout", {{"dp", {1}}}}}).find("tune.layout.dp"), std::string::npos);
  EXPECT_NE(tune_error({{"layout", {{"cp", {2, 2}}}}}).find("duplicate degree 2"), std::string::npos);
  EXPECT_NE(tune_error({{"keys", {{"training.zero_stage", Json::array()}}}}).find("non-empty array"),
            std::string::npos);
  EXPECT_NE(tune_error({{"keys", {{"options.algorithm", {"isf"}}}}}).find("under \"policies\""), std::string::npos);
  EXPECT_NE(tune_error({{"keys", {{"parallel.cp", {1}}}}}).find("under \"layout\""), std::string::npos);
  EXPECT_NE(tune_error({{"policies", {{"nobody", {{"options.x", {1}}}}}}}).find("tune.policies.nobody"),
            std::string::npos);
}

TEST(TuneSpace, LayoutsDivideTheClusterWithTensorParallelismInsideANode) {
  const Scenario s = scenario_from_json(default_document(1), "s.json");
  const auto layouts = tune_layouts(s, TuneSpec{});
  ASSERT_FALSE(layouts.empty());
  for (const auto& l : layouts) {
    EXPECT_EQ(l.gpus(), 32);
    EXPECT_EQ(8 % l.tp, 0);
    EXPECT_EQ(s.model.layers % l.pp, 0);
  }
  // cp 1..32, tp 1..8 and pp 1, 2, 4 with cp tp pp dividing 32: 6 + 5 + 4 + 3 (pp 1), 5 + 4 + 3 + 2 (pp 2),
  // 4 + 3 + 2 + 1 (pp 4) = 42.
  EXPECT_EQ(layouts.size(), 42u);
  TuneSpec spec;
  spec.cp = {4, 8};
  spec.tp = {1};
  spec.pp = {1};
  const auto chosen = tune_layouts(s, spec);
  ASSERT_EQ(chosen.size(), 2u);
  EXPECT_EQ(chosen[0].dp, 8);
  EXPECT_EQ(chosen[1].dp, 4);
}

TEST(TuneSpace, CandidatesCarryTheirSettingsAndSkipWhatAPolicyRefuses) {
  const Json doc = default_document(1, {{"layout", {{"cp", {4, 8}}, {"tp", {1, 2}}, {"pp", {1}}}},
                                        {"policies",
                                         {{"skrull", {{"training.bucket_size_tokens", {8192, 16384}}}},
                                          {"packing", {{"options.packing_length_tokens", {131072}}}}}}});
  const Scenario s = scenario_from_json(doc, "s.json");
  const TuneSpace space = expand_tune_space(s, doc, s.tune, {"skrull", "packing"});
  // Skrull takes tp = 1 only: 2 layouts x 2 sizes; the tp = 2 ones are refused without planning.
  int skrull = 0, packing = 0;
  for (const auto& c : space.candidates) {
    if (c.policy == "skrull") {
      ++skrull;
      EXPECT_EQ(c.layout.tp, 1);
      EXPECT_EQ(c.scenario["training"]["bucket_size_tokens"], c.settings.at(0).second);
    } else {
      ++packing;
      EXPECT_EQ(c.scenario["policies"][0]["options"]["packing_length_tokens"], 131072);
    }
    // Only the tuned policy and the baseline run; the layout is the candidate's.
    EXPECT_EQ(c.scenario["policies"].size(), 2u);
    EXPECT_EQ(c.scenario["parallel"]["cp"], c.layout.cp);
    EXPECT_EQ(c.scenario["parallel"]["dp"], c.layout.dp);
    EXPECT_FALSE(c.scenario.contains("tune"));
  }
  EXPECT_EQ(skrull, 4);
  EXPECT_EQ(packing, 4);
  EXPECT_EQ(space.refused.at("skrull"), 4);
  EXPECT_EQ(space.knob_names.at("skrull").back(), "training.bucket_size_tokens");
}

TEST(TuneSpace, APolicysOwnLayoutIsItsStartAndTheCandidatesReplaceIt) {
  Json doc = default_document(1, {{"layout", {{"cp", {4, 8}}, {"tp", {1}}, {"pp", {1}}}}});
  doc["policies"] =
      Json::array({Json{{"kind", "deepspeed"}}, Json{{"kind", "skrull"}, {"parallel", {{"dp", 2}, {"cp", 16}}}},
                   Json{{"kind", "flexsp"}}});
  const Scenario s = scenario_from_json(doc, "s.json");
  const TuneSpace space = expand_tune_space(s, doc, s.tune, {"skrull"});
  std::set<int> cps;
  for (const auto& c : space.candidates) {
    ASSERT_EQ(c.policy, "skrull");
    cps.insert(c.layout.cp);
    // The candidate's layout is the scenario's parallel; the policy's own would override it, so it is gone.
    EXPECT_EQ(c.scenario["parallel"]["cp"], c.layout.cp);
    EXPECT_FALSE(c.scenario["policies"][0].contains("parallel"));
    EXPECT_FALSE(scenario_from_json(c.scenario, "s.json").policies[0].layout.has_value());
  }
  EXPECT_EQ(cps, (std::set<int>{4, 8}));
}

PolicyVerdict verdict_of(const std::string& policy, int best) {
  PolicyVerdict v;
  v.policy = policy;
  v.best = best;
  return v;
}

/// The candidate of `policy` in `space` with layout cp and the given value of its first setting.
int candidate_of(const TuneSpace& space, const std::string& policy, int cp, const Json& setting) {
  for (const auto& c : space.candidates)
    if (c.policy == policy && c.layout.cp == cp && c.settings.at(0).second == setting) return c.index;
  ADD_FAILURE() << "no candidate of " << policy << " at cp " << cp << " with " << setting.dump();
  return 0;
}

TEST(TunedScenario, EachPolicyGetsItsBestLayoutOptionsAndKeys) {
  Json doc = default_document(1, {{"layout", {{"cp", {4, 8}}, {"tp", {1}}, {"pp", {1}}}},
                                  {"policies",
                                   {{"skrull", {{"training.bucket_size_tokens", {8192, 16384}}}},
                                    {"packing", {{"options.packing_length_tokens", {65536, 131072}}}}}}});
  doc["policies"] = Json::array({Json{{"kind", "deepspeed"}}, Json{{"kind", "skrull"}},
                                 Json{{"kind", "packing"}, {"options", {{"algorithm", "isf"}}}}});
  const Scenario s = scenario_from_json(doc, "s.json");
  const TuneSpace space = expand_tune_space(s, doc, s.tune, {"skrull", "packing"});
  TuneVerdict verdict;
  verdict.policies.push_back(verdict_of("skrull", candidate_of(space, "skrull", 4, 8192)));
  verdict.policies.push_back(verdict_of("packing", candidate_of(space, "packing", 8, 65536)));
  const Json tuned = tuned_scenario(doc, s, space, verdict);
  // Skrull's layout differs from the scenario's DP 4 x CP 8: written; packing's is the scenario's: not written.
  EXPECT_EQ(tuned["policies"][1]["parallel"], (Json{{"dp", 8}, {"cp", 4}, {"tp", 1}, {"pp", 1}}));
  EXPECT_FALSE(tuned["policies"][2].contains("parallel"));
  EXPECT_EQ(tuned["policies"][2]["options"], (Json{{"algorithm", "isf"}, {"packing_length_tokens", 65536}}));
  EXPECT_EQ(tuned["training"]["bucket_size_tokens"], 8192);
  EXPECT_EQ(tuned["policies"][0], doc["policies"][0]);  // not tuned
  EXPECT_EQ(tuned["tune"], doc["tune"]);                // tuning the file written searches the same space
  // It is a scenario, and each policy plans under its best layout.
  const Scenario again = scenario_from_json(tuned, "s.json");
  ASSERT_TRUE(again.policies[1].layout.has_value());
  EXPECT_EQ(again.policies[1].layout->cp, 4);
  EXPECT_FALSE(again.policies[2].layout.has_value());
}

TEST(TunedScenario, AKeyTwoPoliciesSetApartOrAnUntunedPolicyReadsIsRefused) {
  const Json doc = default_document(1, {{"layout", {{"cp", {8}}, {"tp", {1}}, {"pp", {1}}}},
                                        {"policies",
                                         {{"skrull", {{"training.bucket_size_tokens", {8192, 16384}}}},
                                          {"rr", {{"training.bucket_size_tokens", {8192, 16384}}}}}}});
  const Scenario s = scenario_from_json(doc, "s.json");  // deepspeed, sorted, packing, skrull-dacp, rr, skrull
  const TuneSpace space = expand_tune_space(s, doc, s.tune, {"skrull", "rr"});
  TuneVerdict verdict;
  verdict.policies.push_back(verdict_of("rr", candidate_of(space, "rr", 8, 16384)));
  verdict.policies.push_back(verdict_of("skrull", candidate_of(space, "skrull", 8, 8192)));
  try {
    tuned_scenario(doc, s, space, verdict);
    ADD_FAILURE() << "two values of one key were written";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "s.json: training.bucket_size_tokens: the best of rr sets it to 16384, the best of skrull to 8192; one "
              "scenario holds one value (tune them apart with --policy)");
  }
  verdict.policies.pop_back();  // rr alone: skrull declares the key among its knobs too
  try {
    tuned_scenario(doc, s, space, verdict);
    ADD_FAILURE() << "a key an untuned policy reads was written";
  } catch (const InputError& e) {
    EXPECT_TRUE(std::string(e.what()).find("training.bucket_size_tokens: skrull, which was not tuned, reads it "
                                           "too") != std::string::npos)
        << e.what();
  }
}

TEST(TuneCli, TheShippedHeadToHeadIsWhatTuneWrites) {
  // Each policy of the head to head at the best lcsim tune finds for it (docs/policies.md): tuning the file again
  // writes the same layouts, options and keys.
  const fs::path dir = fs::temp_directory_path() / ("lcsim-tuned-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string file = std::string(LCSIM_SOURCE_DIR) + "/scenarios/head-to-head/llama2-13b-commoncrawl-32gpu.json";
  const auto run = testing::run_lcsim("tune '" + file +
                                      "' --policy skrull --policy hbp --policy hydraulis --policy wlb-llm --policy "
                                      "flexsp --jobs 2 --quiet --write-scenario '" +
                                      (dir / "tuned.json").string() + "'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const Scenario shipped = load_scenario(file);
  const Scenario tuned = load_scenario((dir / "tuned.json").string());
  EXPECT_EQ(tuned.profile_path, shipped.profile_path);  // written relative to its own folder
  ASSERT_EQ(tuned.policies.size(), shipped.policies.size());
  for (std::size_t i = 0; i < tuned.policies.size(); ++i) {
    const auto& a = tuned.policies[i];
    const auto& b = shipped.policies[i];
    EXPECT_EQ(a.options, b.options) << a.label;
    ASSERT_EQ(a.layout.has_value(), b.layout.has_value()) << a.label;
    if (a.layout) {
      EXPECT_EQ(std::tie(a.layout->dp, a.layout->cp, a.layout->tp, a.layout->pp),
                std::tie(b.layout->dp, b.layout->cp, b.layout->tp, b.layout->pp))
          << a.label;
    }
  }
  EXPECT_EQ(tuned.training.bucket_size_tokens, shipped.training.bucket_size_tokens);
  fs::remove_all(dir);
}

TEST(TuneVerdict, OutOfMemoryIsNeverBestAndSimulationOutranksTheEstimate) {
  TuneSpace space;
  for (int i = 0; i < 4; ++i) {
    TuneCandidate c;
    c.index = i;
    c.policy = "p";
    c.layout = {4 / (1 << (i % 2)), 1 << (i % 2), 1, 1};
    c.settings = {{"training.bucket_size_tokens", 1000 * (i / 2 + 1)}};
    space.candidates.push_back(c);
  }
  space.knob_names["p"] = {"cp", "tp", "pp", "training.bucket_size_tokens"};
  std::vector<TuneOutcome> o(4);
  for (auto& x : o) x.estimated = true;
  o[0].estimate_tokens_per_s = 100;
  o[1].estimate_tokens_per_s = 300, o[1].oom_iterations = 1;  // fastest, but out of memory
  o[2].estimate_tokens_per_s = 200;
  o[3].estimate_tokens_per_s = 150;
  EXPECT_EQ(most_promising(space.candidates, o, "p", 2), (std::vector<int>{2, 3}));
  TuneVerdict v = judge_tune(space, o, {"p"});
  ASSERT_TRUE(v.policies[0].best);
  EXPECT_EQ(*v.policies[0].best, 2);
  EXPECT_EQ(*v.policies[0].runner_up, 3);
  EXPECT_EQ(v.policies[0].rejected_oom, 1);
  // Around the best (cp 1, size 2000): moving cp to 2 gives candidate 3 (0.75x); moving the size gives 0 (0.50x).
  ASSERT_EQ(v.policies[0].sensitivity.size(), 4u);
  EXPECT_EQ(v.policies[0].sensitivity[0].values,
            (std::vector<std::pair<std::string, std::string>>{{"1", "1.00x"}, {"2", "0.75x"}}));
  EXPECT_EQ(v.policies[0].sensitivity[3].knob, "bucket_size_tokens");
  EXPECT_EQ(v.policies[0].sensitivity[3].values,
            (std::vector<std::pair<std::string, std::string>>{{"1000", "0.50x"}, {"2000", "1.00x"}}));
  // A simulated candidate outranks estimated ones by its simulated figure.
  o[3].simulated = true, o[3].simulated_tokens_per_s = 120;
  v = judge_tune(space, o, {"p"});
  EXPECT_EQ(*v.policies[0].best, 3);
}

/// The catalogue-free end-to-end case: one node of 8 GPUs, deepspeed and skrull, 2 batches, every CP degree and
/// four BucketSizes (the largest run out of memory), estimates only (simulate_top 0) so the in-process enumeration
/// below is the same quantity.
Json small_tune_document() {
  Json doc =
      default_document(2, {{"layout", {{"tp", {1}}, {"pp", {1}}}},
                           {"policies", {{"skrull", {{"training.bucket_size_tokens", {8192, 16384, 26624, 65536}}}}}},
                           {"simulate_top", 0}});
  doc["cluster"]["nodes"] = 1;
  doc["parallel"] = {{"dp", 1}, {"cp", 8}, {"tp", 1}, {"pp", 1}};
  doc["training"]["global_batch_sequences"] = 64;
  doc["policies"] = {{{"kind", "deepspeed"}}, {{"kind", "skrull"}}};
  return doc;
}

TEST(TuneCli, FindsTheExhaustiveOptimumRejectsOomAndIgnoresJobs) {
  const fs::path dir = fs::temp_directory_path() / ("lcsim-tune-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const Json doc = small_tune_document();
  const fs::path file = dir / "small.json";
  std::ofstream(file) << doc.dump(2);
  const auto one = testing::run_lcsim("tune '" + file.string() + "' --jobs 1 --json '" + (dir / "1.json").string() +
                                      "' --csv '" + (dir / "1.csv").string() + "'");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_TRUE(testing::contains(one.output, "winner"));
  const auto two = testing::run_lcsim("tune '" + file.string() + "' --jobs 2 --quiet --json '" +
                                      (dir / "2.json").string() + "' --csv '" + (dir / "2.csv").string() + "'");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_EQ(testing::read_file(dir / "1.json"), testing::read_file(dir / "2.json"));
  EXPECT_EQ(testing::read_file(dir / "1.csv"), testing::read_file(dir / "2.csv"));

  // Enumerate every candidate in process and find each policy's best plan that fits in memory.
  const Scenario s = scenario_from_json(doc, file.string());
  const TuneSpace space = expand_tune_space(s, doc, s.tune, {});
  std::map<std::string, std::pair<double, int>> best;  // policy -> (tokens/s, candidate)
  bool an_oom_was_faster = false;
  for (const auto& c : space.candidates) {
    const LoadedScenario loaded = load_and_prepare(c.scenario, file.string());
    const RunResults r = evaluate_plans(loaded, {c.policy}, nullptr);
    for (const auto& p : r.policies) {
      if (p.label != c.policy) continue;
      if (p.oom_iterations > 0) {
        an_oom_was_faster = an_oom_was_faster || p.tokens_per_s > best[c.policy].first;
        continue;
      }
      if (p.tokens_per_s > best[c.policy].first) best[c.policy] = {p.tokens_per_s, c.index};
    }
  }
  EXPECT_TRUE(an_oom_was_faster) << "the test needs an out-of-memory plan faster than an accepted one";
  std::ifstream in(dir / "1.json");
  const Json results = Json::parse(in);
  for (const auto& p : results["policies"]) {
    const std::string label = p["policy"];
    ASSERT_TRUE(p["best"].is_number()) << label;
    EXPECT_EQ(p["best"].get<int>(), best.at(label).second) << label;
    const Json& chosen = results["candidates"][p["best"].get<std::size_t>()];
    EXPECT_EQ(chosen["oom_iterations"], 0);
    EXPECT_GT(chosen["headroom_GiB"].get<double>(), 0);
  }
  fs::remove_all(dir);
}

TEST(TunePruning, ThresholdIsTheKeptEstimateAndPrunedCandidatesLoseTheirEstimates) {
  EXPECT_EQ(exact_estimates(3), 5);
  EXPECT_EQ(prune_threshold({100, 80, 90}, 2), 90);
  EXPECT_EQ(prune_threshold({100}, 2), 0);  // too few estimates: nothing is pruned
  EXPECT_TRUE(bound_loses(89.9, 90));
  EXPECT_FALSE(bound_loses(90, 90));  // a candidate that could tie the threshold is estimated
  EXPECT_FALSE(bound_loses(std::nullopt, 90));
  EXPECT_FALSE(bound_loses(1, 0));

  TuneSpace space;
  for (int i = 0; i < 9; ++i) {
    TuneCandidate c;
    c.index = i;
    c.policy = i < 8 ? "p" : "q";
    space.candidates.push_back(c);
  }
  space.knob_names["p"] = space.knob_names["q"] = {"cp", "tp", "pp"};
  std::vector<TuneOutcome> o(9);
  for (int i : {0, 1, 2, 8}) o[static_cast<std::size_t>(i)].estimated = true;
  o[0].estimate_tokens_per_s = 100, o[1].estimate_tokens_per_s = 90, o[2].estimate_tokens_per_s = 80;
  o[8].estimate_tokens_per_s = 10, o[8].compute_bound_tokens_per_s = 1;        // q has too few estimates to prune
  o[3].compute_bound_tokens_per_s = 89;                                        // below the threshold (90): pruned
  o[3].estimated = true, o[3].estimate_tokens_per_s = 85;                      // ... even when a thread estimated it
  o[4].compute_bound_tokens_per_s = 90;                                        // could tie: kept
  o[5].compute_bound_tokens_per_s = 95, o[5].replica_bound_tokens_per_s = 85;  // the replica bound prunes
  o[6].compute_bound_tokens_per_s = 85, o[6].replica_bound_tokens_per_s = 84;  // the compute bound prunes first
  o[7].memory_oom_iterations = 2, o[7].memory_bound_gib = 99;                  // out of memory whatever its speed
  prune_candidates(space, o, 2);
  const auto pruned = [&] {
    std::vector<int> out;
    for (int i = 0; i < 9; ++i)
      if (o[static_cast<std::size_t>(i)].pruned) out.push_back(i);
    return out;
  };
  EXPECT_EQ(pruned(), (std::vector<int>{3, 5, 6, 7}));
  EXPECT_FALSE(o[3].estimated);
  EXPECT_EQ(o[3].estimate_tokens_per_s, 0);
  EXPECT_EQ(o[5].replica_bound_tokens_per_s, 85);
  EXPECT_FALSE(o[6].replica_bound_tokens_per_s);  // whether a thread computed it depended on timing
  EXPECT_EQ(o[7].oom_iterations, 2);
  TuneVerdict v = judge_tune(space, o, {"p", "q"});
  EXPECT_EQ(v.policies[0].pruned, 4);
  EXPECT_EQ(v.policies[0].rejected_oom, 1);
}

/// Small search spaces of different shapes, each with candidates the bounds prune: 8 or 16 GPUs, 2 batches.
std::vector<Json> small_spaces() {
  Json two_nodes = default_document(2, {{"simulate_top", 1}});
  two_nodes["cluster"]["nodes"] = 2;
  two_nodes["parallel"] = {{"dp", 2}, {"cp", 8}, {"tp", 1}, {"pp", 1}};
  two_nodes["training"]["global_batch_sequences"] = 64;
  two_nodes["policies"] = {{{"kind", "deepspeed"}}, {{"kind", "sorted"}}, {{"kind", "rr"}}};
  Json packing = default_document(2, {{"simulate_top", 2}});
  packing["cluster"]["nodes"] = 1;
  packing["parallel"] = {{"dp", 1}, {"cp", 8}, {"tp", 1}, {"pp", 1}};
  packing["training"]["global_batch_sequences"] = 32;
  packing["policies"] = {{{"kind", "deepspeed"}}, {{"kind", "packing"}}, {{"kind", "skrull-dacp"}}};
  return {small_tune_document(), two_nodes, packing};
}

TEST(TunePruning, BoundsNeverFallBelowTheEstimate) {
  const auto describe = [](const std::exception& e) { return std::string(e.what()); };
  const auto no_threshold = [] { return 0.0; };
  int replica_bounds = 0, out_of_memory = 0;
  for (const Json& doc : small_spaces()) {
    const Scenario s = scenario_from_json(doc, "small.json");
    const TuneSpace space = expand_tune_space(s, doc, s.tune, {});
    for (const auto& c : space.candidates) {
      const TuneOutcome bounded = estimate_candidate(c, "small.json", CandidateBounds::All, no_threshold, describe);
      const TuneOutcome plain = estimate_candidate(c, "small.json", CandidateBounds::None, no_threshold, describe);
      SCOPED_TRACE(describe_settings(c) + " " + c.policy);
      if (!plain.failed.empty()) continue;
      ASSERT_TRUE(plain.estimated);
      // A memory bound over the capacity proves the estimate runs out of memory in at least as many iterations.
      EXPECT_GE(plain.oom_iterations, bounded.memory_oom_iterations);
      ASSERT_TRUE(bounded.memory_bound_gib);
      EXPECT_LE(*bounded.memory_bound_gib, plain.peak_gib * (1 + 1e-9));
      if (bounded.memory_oom_iterations > 0) {
        ++out_of_memory;
        continue;
      }
      EXPECT_EQ(bounded.estimate_tokens_per_s, plain.estimate_tokens_per_s);
      ASSERT_TRUE(bounded.compute_bound_tokens_per_s);
      EXPECT_GE(*bounded.compute_bound_tokens_per_s, plain.estimate_tokens_per_s);
      if (!bounded.replica_bound_tokens_per_s) continue;
      ++replica_bounds;
      EXPECT_GE(*bounded.replica_bound_tokens_per_s, plain.estimate_tokens_per_s);
      EXPECT_LE(*bounded.replica_bound_tokens_per_s, *bounded.compute_bound_tokens_per_s);
    }
  }
  EXPECT_GT(replica_bounds, 10);
  EXPECT_GT(out_of_memory, 10);
}

/// The accepted candidates of `policy` in a results file, best estimate first (ties: lower index), as
/// most_promising ranks them.
std::vector<int> ranked_estimates(const Json& results, const std::string& policy) {
  std::vector<int> ranked;
  for (const auto& c : results["candidates"])
    if (c["policy"] == policy && c["estimated"].get<bool>() && c["failed"] == "" && c["oom_iterations"] == 0)
      ranked.push_back(c["index"].get<int>());
  std::stable_sort(ranked.begin(), ranked.end(), [&](int a, int b) {
    return results["candidates"][static_cast<std::size_t>(a)]["estimate_tokens_per_s"].get<double>() >
           results["candidates"][static_cast<std::size_t>(b)]["estimate_tokens_per_s"].get<double>();
  });
  return ranked;
}

TEST(TunePruning, PrunedSearchKeepsTheExhaustiveOptimumOnSmallSpaces) {
  const fs::path dir = fs::temp_directory_path() / ("lcsim-tune-prune-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  int space_index = 0;
  for (const Json& doc : small_spaces()) {
    const fs::path file = dir / ("space-" + std::to_string(space_index++) + ".json");
    std::ofstream(file) << doc.dump(2);
    SCOPED_TRACE(file.string());
    const std::string run = "tune '" + file.string() + "' --jobs 2 --quiet --json '";
    ASSERT_EQ(testing::run_lcsim(run + (dir / "exhaustive.json").string() + "' --no-prune").exit_code, 0);
    ASSERT_EQ(testing::run_lcsim(run + (dir / "pruned.json").string() + "'").exit_code, 0);
    const Json exhaustive = Json::parse(testing::read_file(dir / "exhaustive.json"));
    const Json pruned = Json::parse(testing::read_file(dir / "pruned.json"));
    EXPECT_EQ(pruned["winner"], exhaustive["winner"]);
    EXPECT_EQ(pruned["margin"], exhaustive["margin"]);
    const int keep = pruned["pruning"]["exact_estimates_per_policy"].get<int>();
    EXPECT_EQ(keep, exact_estimates(doc["tune"]["simulate_top"].get<int>()));
    int pruned_count = 0;
    for (std::size_t p = 0; p < exhaustive["policies"].size(); ++p) {
      const Json& e = exhaustive["policies"][p];
      const std::string label = e["policy"];
      EXPECT_EQ(pruned["policies"][p]["best"], e["best"]) << label;
      EXPECT_EQ(pruned["policies"][p]["runner_up"], e["runner_up"]) << label;
      pruned_count += pruned["policies"][p]["pruned"].get<int>();
      // The estimates the verdict reads are all there: the policy's `keep` best, in the same order.
      std::vector<int> top = ranked_estimates(exhaustive, label);
      top.resize(std::min(top.size(), static_cast<std::size_t>(keep)));
      std::vector<int> kept = ranked_estimates(pruned, label);
      kept.resize(std::min(kept.size(), top.size()));
      EXPECT_EQ(kept, top) << label;
    }
    EXPECT_GT(pruned_count, 0) << "a space that prunes nothing proves nothing";
    for (std::size_t i = 0; i < exhaustive["candidates"].size(); ++i) {
      const Json& e = exhaustive["candidates"][i];
      const Json& c = pruned["candidates"][i];
      if (!c["pruned"].get<bool>()) {
        // Not pruned: the exhaustive search's figures.
        for (const char* key : {"estimated", "estimate_tokens_per_s", "simulated_tokens_per_s", "p99_iteration_s",
                                "peak_GiB", "oom_iterations"})
          EXPECT_EQ(c[key], e[key]) << i << " " << key;
        continue;
      }
      // Pruned: out of memory in the exhaustive search too, or its bound is no lower than its estimate there.
      EXPECT_FALSE(c["estimated"].get<bool>());
      if (c["oom_iterations"].get<int>() > 0) {
        EXPECT_GE(e["oom_iterations"].get<int>(), c["oom_iterations"].get<int>()) << i;
        continue;
      }
      const Json& bound =
          c["replica_bound_tokens_per_s"].is_null() ? c["compute_bound_tokens_per_s"] : c["replica_bound_tokens_per_s"];
      ASSERT_TRUE(bound.is_number()) << i;
      if (e["estimated"].get<bool>()) {
        EXPECT_GE(bound.get<double>(), e["estimate_tokens_per_s"].get<double>()) << i;
      }
    }
  }
  fs::remove_all(dir);
}

TEST(TuneCli, AFailingCandidateIsRecordedAndTheSearchGoesOn) {
  const fs::path dir = fs::temp_directory_path() / ("lcsim-tune-fail-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // Packing refuses a packing length shorter than a sequence of the batch: those candidates fail as they plan.
  Json doc = small_tune_document();
  doc["policies"] = {{{"kind", "deepspeed"}}, {{"kind", "packing"}}};
  doc["tune"] = {{"layout", {{"cp", {8}}, {"tp", {1}}, {"pp", {1}}}},
                 {"policies", {{"packing", {{"options.packing_length_tokens", {4096, 131072}}}}}},
                 {"simulate_top", 0}};
  std::ofstream(dir / "s.json") << doc.dump(2);
  const auto run = testing::run_lcsim("tune '" + (dir / "s.json").string() + "' --jobs 2 --quiet --json '" +
                                      (dir / "t.json").string() + "'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const Json results = Json::parse(testing::read_file(dir / "t.json"));
  int failed = 0;
  for (const auto& c : results["candidates"]) {
    if (c["settings"].value("options.packing_length_tokens", 0) != 4096) continue;
    ++failed;
    EXPECT_TRUE(testing::contains(c["failed"], "plan exited 2: lcsim: error: "));
    EXPECT_TRUE(testing::contains(c["failed"], "packing does not truncate sequences"));
  }
  EXPECT_EQ(failed, 1);
  EXPECT_EQ(results["policies"][1]["failed"], 1);
  EXPECT_TRUE(results["policies"][1]["best"].is_number());
  fs::remove_all(dir);
}

// Tune searches every wiring, and physics orders them: with all 16 GPUs in one NVLink domain no layout can run
// slower than on the same two nodes wired any other way. The default profile once priced a 16-GPU all-to-all at
// 30 us across InfiniBand and 71 us inside the domain, and CP 16 came out 10% faster over two fat-tree nodes.
TEST(TuneCli, NoWiringBeatsOneNvlinkDomain) {
  const fs::path dir = fs::temp_directory_path() / ("lcsim-tune-wiring-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  Json doc = default_document(1, {{"layout", {{"tp", {1}}, {"pp", {1}}}}, {"simulate_top", 0}});
  doc["cluster"]["nodes"] = 2;
  doc["parallel"] = {{"dp", 2}, {"cp", 8}, {"tp", 1}, {"pp", 1}};
  doc["training"]["global_batch_sequences"] = 64;
  doc["policies"] = {{{"kind", "deepspeed"}}};
  const auto estimates = [&](const Json& wiring) {
    Json scenario = doc;
    scenario["cluster"].update(wiring);
    std::ofstream(dir / "s.json") << scenario.dump(2);
    const auto run = testing::run_lcsim("tune '" + (dir / "s.json").string() + "' --no-prune --quiet --json '" +
                                        (dir / "t.json").string() + "'");
    EXPECT_EQ(run.exit_code, 0) << run.output;
    const Json results = Json::parse(testing::read_file(dir / "t.json"));
    std::map<int, double> by_cp;  // the layout's CP -> estimated tokens/s
    for (const auto& c : results["candidates"]) {
      by_cp[c["layout"]["cp"].get<int>()] = c["estimate_tokens_per_s"].get<double>();
    }
    return by_cp;
  };
  const auto domain = estimates({{"topology", "nvlink-domain"}, {"domain_gpus", 16}});
  ASSERT_EQ(domain.size(), 5u);  // CP 1, 2, 4, 8, 16
  for (const Json& wiring : Json::parse(R"([{}, {"topology": "rail-optimized", "pxn": true},
                                             {"oversubscription": 4}])")) {
    const auto other = estimates(wiring);
    ASSERT_EQ(other.size(), domain.size()) << wiring.dump();
    for (const auto& [cp, tokens_per_s] : other) {
      EXPECT_LE(tokens_per_s, domain.at(cp) * (1 + 1e-9)) << wiring.dump() << " CP " << cp;
    }
    // CP 16 crosses the nodes' boundary: inside the domain it is strictly faster.
    EXPECT_LT(other.at(16), domain.at(16)) << wiring.dump();
  }
  // And a fat-tree that shares each node's uplink four ways is never faster than a non-blocking one.
  const auto non_blocking = estimates(Json::object());
  for (const auto& [cp, tokens_per_s] : estimates({{"oversubscription", 4}}))
    EXPECT_LE(tokens_per_s, non_blocking.at(cp) * (1 + 1e-9)) << "CP " << cp;
  fs::remove_all(dir);
}

// That the Runner plans such a candidate in a child process: tests/runner_test.cpp.
TEST(TuneCli, APolicyThatNeedsItsOwnProcessIsEstimated) {
  const fs::path dir = fs::temp_directory_path() / ("lcsim-tune-own-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // Hydraulis' exact packing gives CBC a limit on the process's CPU time: not for a thread of a busy process.
  Json doc = small_tune_document();
  doc["policies"] = {{{"kind", "deepspeed"}}, {{"kind", "hydraulis"}, {"options", {{"packing", "exact"}}}}};
  doc["tune"] = {{"layout", {{"cp", {8}}, {"tp", {1}}, {"pp", {1}}}}, {"simulate_top", 0}};
  const Scenario s = scenario_from_json(doc, "s.json");
  const TuneSpace space = expand_tune_space(s, doc, s.tune, {});
  ASSERT_EQ(space.candidates.size(), 2u);
  EXPECT_FALSE(space.candidates[0].own_process);
  EXPECT_TRUE(space.candidates[1].own_process);
  std::ofstream(dir / "s.json") << doc.dump(2);
  const auto run = testing::run_lcsim("tune '" + (dir / "s.json").string() + "' --jobs 2 --quiet --work '" +
                                      (dir / "work").string() + "' --json '" + (dir / "t.json").string() + "'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const Json results = Json::parse(testing::read_file(dir / "t.json"));
  EXPECT_TRUE(results["candidates"][1]["estimated"].get<bool>());
  EXPECT_TRUE(fs::exists(dir / "work" / "candidate-00001.json"));  // --work keeps each candidate's scenario
  fs::remove_all(dir);
}

TEST(TuneCli, SlicesMergedAreTheOneMachineSearch) {
  const fs::path dir = fs::temp_directory_path() / ("lcsim-tune-slices-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "small.json";
  std::ofstream(file) << small_tune_document().dump(2);
  const std::string scenario = "tune '" + file.string() + "' --quiet";
  ASSERT_EQ(testing::run_lcsim(scenario + " --json '" + (dir / "one.json").string() + "'").exit_code, 0);
  for (int k = 1; k <= 3; ++k) {
    const auto run = testing::run_lcsim(scenario + " --shard " + std::to_string(k) + "/3 --slice '" +
                                        (dir / ("slice-" + std::to_string(k) + ".json")).string() + "'");
    ASSERT_EQ(run.exit_code, 0) << run.output;
  }
  const auto slice = [&](int k) {
    return " --merge '" + (dir / ("slice-" + std::to_string(k) + ".json")).string() + "'";
  };
  // In any order, the merged search is the one-machine search, byte for byte.
  const auto merged = testing::run_lcsim(scenario + slice(3) + slice(1) + slice(2) + " --json '" +
                                         (dir / "merged.json").string() + "'");
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  EXPECT_EQ(testing::read_file(dir / "merged.json"), testing::read_file(dir / "one.json"));
  // A missing or repeated slice, or a slice of another search, is named.
  const auto missing = testing::run_lcsim(scenario + slice(1) + slice(3));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_TRUE(testing::contains(missing.output, "slice 2/3 is missing"));
  const auto twice = testing::run_lcsim(scenario + slice(1) + slice(1) + slice(2) + slice(3));
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_TRUE(testing::contains(twice.output, "slice 1/3 again"));
  const auto other = testing::run_lcsim(scenario + " --iterations 1" + slice(1) + slice(2) + slice(3));
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_TRUE(testing::contains(other.output, "a slice of another search"));
  EXPECT_EQ(testing::run_lcsim(scenario + " --shard 4/3 --slice x.json").exit_code, 2);
  EXPECT_EQ(testing::run_lcsim(scenario + " --shard 1/3").exit_code, 2);
  fs::remove_all(dir);
}

TEST(TuneCli, BadCommandLinesAreUsageErrors) {
  const std::string file = std::string(LCSIM_SOURCE_DIR) + "/scenarios/default.json";
  EXPECT_EQ(testing::run_lcsim("tune '" + file + "' --jobs 0").exit_code, 2);
  EXPECT_EQ(testing::run_lcsim("tune '" + file + "' --policy nobody").exit_code, 2);
  EXPECT_EQ(testing::run_lcsim("tune '" + file + "' --budget-s -1").exit_code, 2);
  EXPECT_TRUE(testing::contains(testing::run_lcsim("tune --help").output, "Usage: lcsim tune SCENARIO"));
}

}  // namespace tune_test
}  // namespace lcsim
