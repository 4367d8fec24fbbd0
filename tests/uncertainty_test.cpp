// Sampled worlds and their intervals (studies/sampled_worlds.hpp): the maths on constructed world figures with known
// answers, the profile and dataset draws, determinism, and --samples 1 as the nominal run.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "formats/results_io.hpp"
#include "formats/scenario_loader.hpp"
#include "studies/evaluation.hpp"
#include "studies/sampled_worlds.hpp"
#include "studies/validation_intervals.hpp"

namespace lcsim {
namespace uncertainty_test {

const std::string kDefaultScenario = std::string(LCSIM_SOURCE_DIR) + "/scenarios/default.json";

double log_sd(const std::vector<double>& values) {
  double mean = 0;
  for (double v : values) mean += std::log(v);
  mean /= static_cast<double>(values.size());
  double var = 0;
  for (double v : values) var += (std::log(v) - mean) * (std::log(v) - mean);
  return std::sqrt(var / static_cast<double>(values.size() - 1));
}

TEST(Uncertainty, SigmaFromMapeIsTheNormalStandardDeviation) {
  EXPECT_NEAR(sigma_from_mape(0.1), 0.1253314137, 1e-9);
  // The mean absolute value of draws with that sigma is the MAPE again.
  Rng rng(7);
  const double sigma = sigma_from_mape(0.1);
  double sum = 0;
  constexpr int kDraws = 200000;
  for (int i = 0; i < kDraws; ++i) sum += std::abs(sigma * standard_normal(rng));
  EXPECT_NEAR(sum / kDraws, 0.1, 0.001);
}

TEST(Uncertainty, QuantilesInterpolateBetweenOrderStatistics) {
  EXPECT_DOUBLE_EQ(quantile({0, 10}, 0.25), 2.5);
  EXPECT_DOUBLE_EQ(quantile({3, 1, 2}, 0.5), 2);
  const Quantiles q = quantiles_of({11, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  EXPECT_DOUBLE_EQ(q.p10, 2);
  EXPECT_DOUBLE_EQ(q.p50, 6);
  EXPECT_DOUBLE_EQ(q.p90, 10);
  EXPECT_THROW(quantile({}, 0.5), std::invalid_argument);
}

RunResults two_policies() {
  RunResults r;
  r.mode = "plan";
  r.seed = 42;
  r.baseline = "base";
  r.policies.resize(2);
  r.policies[0].label = "base";
  r.policies[1].label = "fast";
  return r;
}

std::vector<WorldFigures> figures(const std::vector<double>& tokens_per_s) {
  std::vector<WorldFigures> out;
  for (double t : tokens_per_s) {
    WorldFigures f;
    f.tokens_per_s = t;
    f.mean_iteration_s = 1000 / t;
    out.push_back(f);
  }
  return out;
}

TEST(Uncertainty, IntervalsAndWinProbabilitiesOfConstructedWorlds) {
  RunResults r = two_policies();
  // Speedups per world 1.5, 0.9, 1.2, 2.0, 1.1 -- sorted 0.9 1.1 1.2 1.5 2.0.
  attach_intervals(r, {figures({100, 100, 100, 100, 100}), figures({150, 90, 120, 200, 110})}, {"test"}, {});
  const PolicyInterval& fast = r.policies[1].interval;
  EXPECT_EQ(fast.samples, 5);
  EXPECT_NEAR(fast.speedup.p10, 0.98, 1e-12);
  EXPECT_NEAR(fast.speedup.p50, 1.2, 1e-12);
  EXPECT_NEAR(fast.speedup.p90, 1.8, 1e-12);
  EXPECT_DOUBLE_EQ(fast.p_beats_baseline, 0.8);
  EXPECT_DOUBLE_EQ(r.policies[0].interval.p_beats_baseline, 0);  // never faster than itself
  // Iteration seconds 1000/t: 6.667 11.111 8.333 5 9.091 -> p50 8.333.
  EXPECT_NEAR(fast.iteration_s.p50, 1000.0 / 120, 1e-9);
  EXPECT_EQ(r.uncertainty.winner, "fast");
  EXPECT_DOUBLE_EQ(r.uncertainty.p_winner, 0.8);
  EXPECT_EQ(r.uncertainty.samples, 5);
  EXPECT_DOUBLE_EQ(r.uncertainty.model_form_log_sigma, 0);
}

TEST(Uncertainty, APolicyWinsOnlyTheWorldsWhereItFitsInMemory) {
  RunResults r = two_policies();
  // "fast" is the faster in every world but runs out of memory in worlds 0 and 2: it wins only 1, 3 and 4, and
  // the nominal winner is the baseline, which fits.
  std::vector<WorldFigures> fast = figures({150, 90, 120, 200, 110});
  fast[0].oom_iterations = 1;
  fast[2].oom_iterations = 3;
  r.policies[1].oom_iterations = 1;
  attach_intervals(r, {figures({100, 80, 100, 100, 100}), fast}, {"test"}, {});
  EXPECT_EQ(r.uncertainty.winner, "base");
  EXPECT_DOUBLE_EQ(r.uncertainty.p_winner, 0.4);                   // worlds 0 and 2 only
  EXPECT_DOUBLE_EQ(r.policies[1].interval.p_beats_baseline, 0.6);  // 1, 3, 4: a world it does not fit beats nothing
}

TEST(Uncertainty, NoWinnerWhenNothingFitsAndSpeedupsOverTheFastestThatFits) {
  RunResults r = two_policies();
  std::vector<WorldFigures> base = figures({100, 100}), fast = figures({150, 150});
  base[0].oom_iterations = fast[0].oom_iterations = 1;
  attach_intervals(r, {base, fast}, {"test"}, {});
  EXPECT_EQ(r.uncertainty.winner, "");
  EXPECT_DOUBLE_EQ(r.uncertainty.p_winner, 0);

  // The baseline does not fit: apply_baseline makes the fastest policy that fits the reference.
  RunResults three = two_policies();
  three.policies.resize(3);
  three.policies[2].label = "slow";
  three.policies[0].tokens_per_s = 100, three.policies[0].oom_iterations = 2;
  three.policies[1].tokens_per_s = 300, three.policies[1].oom_iterations = 1;
  three.policies[2].tokens_per_s = 200;
  apply_baseline(three);
  EXPECT_EQ(three.speedup_reference, "slow");
  EXPECT_DOUBLE_EQ(three.policies[0].speedup_vs_baseline, 0.5);
  EXPECT_DOUBLE_EQ(three.policies[2].speedup_vs_baseline, 1.0);
  EXPECT_EQ(fastest_fitting(three), 2);
  // A baseline that fits stays the reference.
  three.policies[0].oom_iterations = 0;
  apply_baseline(three);
  EXPECT_EQ(three.speedup_reference, "base");
}

TEST(Uncertainty, ModelFormGivesASpeedupTheFileSigmaAndATimeItsShare) {
  // Every world alike: all spread comes from the model form. A speedup, a ratio of two independently perturbed
  // times, must spread by s_speedup (0.2), one time by s_speedup / sqrt(2).
  constexpr int kWorlds = 4000;
  RunResults r = two_policies();
  attach_intervals(r, {figures(std::vector<double>(kWorlds, 100)), figures(std::vector<double>(kWorlds, 100))}, {},
                   ModelForm{"model-form.json", 0.2});
  std::vector<double> speedups, times;
  // Rebuild the per-world spread from the quantiles of a normal: p90 / p50 = exp(1.2816 sigma).
  const PolicyInterval& fast = r.policies[1].interval;
  EXPECT_NEAR(std::log(fast.speedup.p90 / fast.speedup.p50) / 1.2815516, 0.2, 0.012);
  EXPECT_NEAR(std::log(fast.iteration_s.p90 / fast.iteration_s.p50) / 1.2815516, 0.2 / std::numbers::sqrt2, 0.01);
  // The per-world figures are those before the model form.
  EXPECT_DOUBLE_EQ(fast.world_speedup[17], 1.0);
  EXPECT_DOUBLE_EQ(fast.world_iteration_s[17], 10.0);
  // The baseline against itself stays at 1.
  EXPECT_DOUBLE_EQ(r.policies[0].interval.speedup.p10, 1.0);
  EXPECT_DOUBLE_EQ(r.policies[0].interval.speedup.p90, 1.0);
  EXPECT_NEAR(r.uncertainty.model_form_log_sigma, 0.2, 1e-12);
}

TEST(Uncertainty, OneWorldIsTheNominalFigures) {
  RunResults r = two_policies();
  attach_intervals(r, {figures({100}), figures({150})}, {"dataset"}, ModelForm{"model-form.json", 0.5});
  const PolicyInterval& fast = r.policies[1].interval;
  EXPECT_DOUBLE_EQ(fast.speedup.p10, 1.5);
  EXPECT_DOUBLE_EQ(fast.speedup.p90, 1.5);
  EXPECT_DOUBLE_EQ(fast.p_beats_baseline, 1);
  EXPECT_TRUE(r.uncertainty.sources.empty());
}

Profile profile_with_fits() {
  Profile p;
  p.compute.gemm_efficiency = Curve{{128, 8192}, {0.2, 0.75}, 0.1};
  p.compute.attention_efficiency = Curve{{256, 16384}, {0.15, 0.55}, std::nullopt};
  p.collectives.push_back(single_segment(CollectiveOp::AllGather, LinkClass::NvLink, 8, 50, 300));
  p.collectives.back().fit_mape = 0.05;
  p.collectives.push_back(single_segment(CollectiveOp::AllReduce, LinkClass::NvLink, 8, 80, 300));
  return p;
}

TEST(Uncertainty, ProfileDrawsScaleOnlyFieldsWithAFitErrorBySigmaFromMape) {
  const Profile nominal = profile_with_fits();
  const std::vector<std::string> fields = profile_sampled_fields(nominal);
  ASSERT_EQ(fields.size(), 2u);
  EXPECT_EQ(fields[0], "compute.gemm_efficiency (fit_mape 10.0%)");
  EXPECT_EQ(fields[1], "collectives.nvlink.all_gather n=8 (fit_mape 5.0%)");
  Rng rng(3);
  std::vector<double> gemm, latency;
  for (int i = 0; i < 4000; ++i) {
    const Profile p = perturb_profile(nominal, rng);
    gemm.push_back(p.compute.gemm_efficiency.y[0] / 0.2);
    latency.push_back(p.collectives[0].segments[0].latency_us / 50);
    // A time scales as one: the bandwidth divides by the latency's factor.
    EXPECT_NEAR(p.collectives[0].segments[0].bus_GBps * latency.back(), 300, 1e-9);
    EXPECT_EQ(p.compute.attention_efficiency.y, nominal.compute.attention_efficiency.y);
    EXPECT_EQ(p.collectives[1].segments[0].latency_us, 80);
    // One z for the whole curve: a systematic shift, not noise per point.
    if (p.compute.gemm_efficiency.y[1] < 1) {
      EXPECT_NEAR(p.compute.gemm_efficiency.y[1] / 0.75, gemm.back(), 1e-12);
    }
  }
  EXPECT_NEAR(log_sd(gemm), sigma_from_mape(0.1), 0.006);
  EXPECT_NEAR(log_sd(latency), sigma_from_mape(0.05), 0.003);
}

TEST(Uncertainty, ALayerFitScalesTheWholeLayerOnceInsteadOfItsCurves) {
  // With a layer fit, its residual (on whole layer times priced with these curves) is the layer's error: one draw
  // scales the GEMM curve, the attention curve and the fixed cost together, and the curves' own errors are not
  // drawn on top (they are inside that residual). The share k stays.
  Profile nominal = profile_with_fits();
  nominal.compute.attention_efficiency.fit_mape = 0.2;
  nominal.compute.layer_overhead_fit_mape = 0.04;
  nominal.compute.gemm_work_overhead = 0.5;
  nominal.compute.layer_overhead_us = 100;
  Rng rng(5);
  std::vector<double> layer;
  for (int i = 0; i < 4000; ++i) {
    const Profile p = perturb_profile(nominal, rng);
    const double f = nominal.compute.layer_overhead_us / p.compute.layer_overhead_us;  // 1 / time factor
    if (p.compute.gemm_efficiency.y[0] < 1) {
      EXPECT_NEAR(p.compute.gemm_efficiency.y[0], 0.2 * f, 1e-12);
    }
    if (p.compute.attention_efficiency.y[0] < 1) {
      EXPECT_NEAR(p.compute.attention_efficiency.y[0], nominal.compute.attention_efficiency.y[0] * f, 1e-12);
    }
    EXPECT_EQ(p.compute.gemm_work_overhead, 0.5);
    layer.push_back(p.compute.layer_overhead_us / 100);
  }
  EXPECT_NEAR(log_sd(layer), sigma_from_mape(0.04), 0.003);
}

TEST(Uncertainty, SampledWorldsOfAScenarioAreDeterministicAndWorldZeroIsTheNominalRun) {
  const LoadedScenario loaded = load_and_prepare(kDefaultScenario, 3);
  const RunResults nominal = evaluate_plans(loaded, {});
  const RunResults one = evaluate_with_samples(loaded, {}, 1, ModelForm{"m.json", 0.1});
  const RunResults four = evaluate_with_samples(loaded, {}, 4, ModelForm{"m.json", 0.1});
  const RunResults again = evaluate_with_samples(loaded, {}, 4, ModelForm{"m.json", 0.1});
  EXPECT_EQ(results_to_json(four).dump(), results_to_json(again).dump());
  ASSERT_EQ(four.policies.size(), nominal.policies.size());
  for (std::size_t p = 0; p < nominal.policies.size(); ++p) {
    EXPECT_EQ(one.policies[p].tokens_per_s, nominal.policies[p].tokens_per_s);
    EXPECT_EQ(four.policies[p].tokens_per_s, nominal.policies[p].tokens_per_s);
    EXPECT_EQ(four.policies[p].mean_iteration_s, nominal.policies[p].mean_iteration_s);
    EXPECT_EQ(four.policies[p].interval.world_iteration_s[0], nominal.policies[p].mean_iteration_s);
    EXPECT_EQ(one.policies[p].interval.iteration_s.p10, nominal.policies[p].mean_iteration_s);
    // The other worlds hold other data: their times differ from the nominal one.
    EXPECT_NE(four.policies[p].interval.world_iteration_s[1], nominal.policies[p].mean_iteration_s);
  }
  // A world's draw depends on the scenario seed and its index only, not on how many worlds are sampled.
  const RunResults three = evaluate_with_samples(loaded, {}, 3, ModelForm{"m.json", 0.1});
  EXPECT_EQ(three.policies[1].interval.world_iteration_s[2], four.policies[1].interval.world_iteration_s[2]);
  // And not on which policies are selected.
  const RunResults only = evaluate_with_samples(loaded, {four.policies[1].label}, 4, ModelForm{"m.json", 0.1});
  for (const auto& p : only.policies) {
    if (p.label == four.policies[1].label) {
      EXPECT_EQ(p.interval.iteration_s.p90, four.policies[1].interval.iteration_s.p90);
    }
  }
}

TEST(Uncertainty, WorldsOnThreadsGiveTheSerialResultsInWorldOrder) {
  const LoadedScenario loaded = load_and_prepare(kDefaultScenario, 2);
  const std::vector<std::string> only = {"skrull", "rr"};
  std::vector<std::pair<int, int>> calls;
  const auto record = [&](int done, int total) { calls.emplace_back(done, total); };
  const RunResults serial = evaluate_with_samples(loaded, only, 6, ModelForm{"m.json", 0.1}, {}, {}, true, 1);
  const RunResults threaded = evaluate_with_samples(loaded, only, 6, ModelForm{"m.json", 0.1}, {}, record, true, 3);
  EXPECT_EQ(results_to_json(threaded).dump(), results_to_json(serial).dump());
  // Progress: from 0 to the 5 sampled worlds, one call per world done, never backwards.
  ASSERT_EQ(calls.size(), 6u);
  for (std::size_t i = 0; i < calls.size(); ++i) EXPECT_EQ(calls[i], std::make_pair(static_cast<int>(i), 5));

  // A progress callback that throws (a Python one may) ends the run with its exception, from any thread.
  const auto throwing = [](int done, int) {
    if (done == 2) throw std::runtime_error("stop here");
  };
  EXPECT_THROW(evaluate_with_samples(loaded, only, 6, ModelForm{"m.json", 0.1}, {}, throwing, true, 3),
               std::runtime_error);

  const auto serial_worlds = estimate_worlds(loaded, only, 5, {}, true, 1);
  const auto threaded_worlds = estimate_worlds(loaded, only, 5, {}, true, 4);
  ASSERT_EQ(threaded_worlds.size(), serial_worlds.size());
  for (std::size_t p = 0; p < serial_worlds.size(); ++p) {
    ASSERT_EQ(threaded_worlds[p].size(), 5u);
    for (std::size_t w = 0; w < 5; ++w) {
      EXPECT_EQ(threaded_worlds[p][w].mean_iteration_s, serial_worlds[p][w].mean_iteration_s) << p << ' ' << w;
      EXPECT_EQ(threaded_worlds[p][w].tokens_per_s, serial_worlds[p][w].tokens_per_s) << p << ' ' << w;
    }
  }
}

TEST(Uncertainty, FixedDataWorldsKeepTheScenariosBatchesAndDrawTheProfile) {
  // A measured run's data is known: --fixed-data worlds keep the nominal batches, and only the profile moves.
  const LoadedScenario loaded = load_and_prepare(kDefaultScenario, 3);
  const LoadedScenario fixed = load_world(loaded, 2, false);
  const LoadedScenario drawn = load_world(loaded, 2);
  EXPECT_EQ(fixed.batches, loaded.batches);
  EXPECT_NE(drawn.batches, loaded.batches);
  // The same world's profile either way: the data draw does not shift the profile's.
  EXPECT_EQ(profile_to_json(fixed.profile), profile_to_json(drawn.profile));
  EXPECT_NE(sampled_sources(loaded, false).front().find("--fixed-data"), std::string::npos);
  // What a policy settles offline it settles from the nominal world (Hydraulis' proposal): a world's planning
  // context carries the nominal cost model and batches, the nominal world's none.
  EXPECT_FALSE(loaded.planning_context().nominal);
  ASSERT_TRUE(drawn.planning_context().nominal);
  EXPECT_EQ(drawn.planning_context().nominal->cost, loaded.cost.get());
  EXPECT_EQ(drawn.planning_context().nominal->batches.data(), loaded.batches.data());
  EXPECT_EQ(drawn.planning_context().cost, drawn.cost.get());
}

TEST(Uncertainty, SimulatedWorldsAreTheEstimateScaledToTheSimulation) {
  // Times by ratio, metrics by difference.
  WorldFigures sim, est0, estw;
  sim.mean_iteration_s = 2;
  sim.tokens_per_s = 50;
  sim.metrics.abr = 0.3;
  est0.mean_iteration_s = 1;
  est0.tokens_per_s = 100;
  est0.metrics.abr = 0.2;
  estw.mean_iteration_s = 1.5;
  estw.tokens_per_s = 80;
  estw.metrics.abr = 0.25;
  const WorldFigures w = transfer_world(sim, est0, estw);
  EXPECT_DOUBLE_EQ(w.mean_iteration_s, 3);
  EXPECT_DOUBLE_EQ(w.tokens_per_s, 40);
  EXPECT_NEAR(w.metrics.abr, 0.35, 1e-12);
}

IntervalCheck check(std::vector<double> worlds, double published) {
  IntervalCheck c;
  c.worlds = std::move(worlds);
  c.published = published;
  return c;
}

EntryIntervalInput entry(const std::string& id, ValidationQuantity quantity, std::vector<IntervalCheck> checks) {
  EntryIntervalInput input;
  input.id = id;
  input.quantity = quantity;
  input.checks = std::move(checks);
  return input;
}

TEST(ValidationIntervals, LeaveOneOutSigmaUsesOnlyTheOtherEntriesOfTheFamily) {
  // Nominal predictions 1 (the worlds agree: no sampled spread); published e^0.2, e^-0.4, e^0.1: squared log errors
  // 0.04, 0.16, 0.01. The iteration time's 0.01 counts as 0.01 / (1/sqrt 2)^2 = 0.02 in speedup units, and a
  // balance entry far off must not leak into the time family.
  std::vector<EntryIntervalInput> in{
      entry("a", ValidationQuantity::Speedup, {check({1, 1}, std::exp(0.2))}),
      entry("b", ValidationQuantity::Speedup, {check({1, 1}, std::exp(-0.4))}),
      entry("c", ValidationQuantity::IterationSeconds, {check({1, 1}, std::exp(0.1))}),
      entry("d", ValidationQuantity::Abr, {check({1, 1}, std::exp(3.0))}),
  };
  IntervalSummary summary;
  const std::vector<EntryInterval> out = entry_intervals(in, 8, summary);
  EXPECT_NEAR(out[0].model_form_sigma, std::sqrt((0.16 + 0.02) / 2), 1e-12);
  EXPECT_NEAR(out[1].model_form_sigma, std::sqrt((0.04 + 0.02) / 2), 1e-12);
  EXPECT_NEAR(out[2].model_form_sigma, std::sqrt((0.04 + 0.16) / 2), 1e-12);
  EXPECT_DOUBLE_EQ(out[3].model_form_sigma, 0);  // alone in its family: nothing else to learn from
  EXPECT_NEAR(summary.families.at(ModelFormFamily::Time).log_sigma, std::sqrt((0.04 + 0.16 + 0.02) / 3), 1e-12);
  EXPECT_EQ(summary.families.at(ModelFormFamily::Time).entries, 3);
  EXPECT_NEAR(summary.families.at(ModelFormFamily::Balance).log_sigma, 3.0, 1e-12);
}

TEST(ValidationIntervals, TheModelFormIsLearnedLeavingTheEntrysWholeSourceOut) {
  // Source A's two entries both miss by e^0.5; B and C by e^0.1 and e^-0.1. Leaving one entry out, an A entry would
  // still learn from its twin (sigma sqrt((0.25 + 0.01 + 0.01) / 3) = 0.3); leaving its source out it learns from B
  // and C alone: 0.1. B learns from A's two and C: sqrt((0.25 + 0.25 + 0.01) / 3).
  std::vector<EntryIntervalInput> in{
      entry("a1", ValidationQuantity::Speedup, {check({1, 1}, std::exp(0.5))}),
      entry("a2", ValidationQuantity::Speedup, {check({1, 1}, std::exp(0.5))}),
      entry("b1", ValidationQuantity::Speedup, {check({1, 1}, std::exp(0.1))}),
      entry("c1", ValidationQuantity::Speedup, {check({1, 1}, std::exp(-0.1))}),
  };
  in[0].source = in[1].source = "A";
  in[2].source = "B";
  in[3].source = "C";
  in[0].kind = in[1].kind = "framework";
  IntervalSummary summary;
  const std::vector<EntryInterval> out = entry_intervals(in, 8, summary);
  EXPECT_NEAR(out[0].model_form_sigma, 0.1, 1e-12);
  EXPECT_NEAR(out[1].model_form_sigma, 0.1, 1e-12);
  EXPECT_NEAR(out[2].model_form_sigma, std::sqrt((0.25 + 0.25 + 0.01) / 3), 1e-12);
  // Coverage per kind of entry: A's intervals (sigma 0.1 around 1) miss e^0.5; B's and C's (sigma ~0.41) hold.
  ASSERT_EQ(summary.kinds.count("framework"), 1u);
  EXPECT_EQ(summary.kinds.at("framework").entries, 2);
  EXPECT_DOUBLE_EQ(summary.kinds.at("framework").coverage, 0);
  EXPECT_EQ(summary.kinds.at("published").entries, 2);
  EXPECT_DOUBLE_EQ(summary.kinds.at("published").coverage, 1);
}

TEST(ValidationIntervals, TimesOfCalibratedProfilesAreAFamilyOfTheirOwn) {
  // The papers' figures with a profile derived from public figures miss by e^0.3; measured runs predicted with the
  // profile calibrated on their device by e^0.03. Pooled, the measured errors would shrink the papers' intervals
  // and the papers' errors widen the measured ones.
  std::vector<EntryIntervalInput> in{
      entry("paper-a", ValidationQuantity::Speedup, {check({1, 1}, std::exp(0.3))}),
      entry("paper-b", ValidationQuantity::Speedup, {check({1, 1}, std::exp(-0.3))}),
      entry("run-a", ValidationQuantity::Speedup, {check({1, 1}, std::exp(0.03))}),
      entry("run-b", ValidationQuantity::Speedup, {check({1, 1}, std::exp(-0.03))}),
  };
  in[2].calibrated_profile = in[3].calibrated_profile = true;
  IntervalSummary summary;
  const std::vector<EntryInterval> out = entry_intervals(in, 8, summary);
  EXPECT_EQ(out[0].family, ModelFormFamily::Time);
  EXPECT_EQ(out[2].family, ModelFormFamily::TimeCalibrated);
  EXPECT_NEAR(out[0].model_form_sigma, 0.3, 1e-12);   // from paper-b only
  EXPECT_NEAR(out[2].model_form_sigma, 0.03, 1e-12);  // from run-b only
  EXPECT_NEAR(summary.families.at(ModelFormFamily::Time).log_sigma, 0.3, 1e-12);
  EXPECT_NEAR(summary.families.at(ModelFormFamily::TimeCalibrated).log_sigma, 0.03, 1e-12);
  EXPECT_EQ(summary.families.at(ModelFormFamily::TimeCalibrated).entries, 2);
  EXPECT_EQ(to_string(ModelFormFamily::TimeCalibrated), "time_calibrated");
}

TEST(Uncertainty, ACalibratedProfileTakesTheCalibratedFamilysSigma) {
  ModelForm form{"model-form.json", 0.27};
  form.calibrated_speedup_log_sigma = 0.04;
  Profile uncalibrated;
  Profile calibrated;
  calibrated.provenance.calibrated = true;
  EXPECT_DOUBLE_EQ(form.for_profile(uncalibrated).speedup_log_sigma, 0.27);
  EXPECT_EQ(form.for_profile(uncalibrated).family, "time");
  EXPECT_DOUBLE_EQ(form.for_profile(calibrated).speedup_log_sigma, 0.04);
  EXPECT_EQ(form.for_profile(calibrated).family, "time_calibrated");
  // A file written before the split has one family: every profile takes it.
  const ModelForm old{"old.json", 0.2};
  EXPECT_DOUBLE_EQ(old.for_profile(calibrated).speedup_log_sigma, 0.2);
  // The shipped file has both, and they differ.
  const ModelForm shipped = load_model_form(LCSIM_SOURCE_DIR "/scenarios/validation/model-form.json", "shipped");
  ASSERT_TRUE(shipped.calibrated_speedup_log_sigma.has_value());
  EXPECT_LT(*shipped.calibrated_speedup_log_sigma, shipped.speedup_log_sigma);
}

TEST(ValidationIntervals, SampledSpreadIsSubtractedAndTheVarianceNeverNegative) {
  // Entry "wide" already spreads by its worlds (log values 0 and 1: sample variance 0.5): the model form must
  // not add what the worlds explain. 0.01 error - 0.5 spread < 0: the variance stops at 0.
  const std::vector<EntryIntervalInput> in{
      entry("wide", ValidationQuantity::Speedup, {check({1, std::exp(1.0)}, std::exp(0.1))}),
      entry("other", ValidationQuantity::Speedup, {check({1, 1}, 1)}),
  };
  IntervalSummary summary;
  const std::vector<EntryInterval> out = entry_intervals(in, 4, summary);
  EXPECT_NEAR(out[0].sampled_log_var, 0.5, 1e-12);
  EXPECT_NEAR(out[0].error_log_sq, 0.01, 1e-12);
  EXPECT_DOUBLE_EQ(summary.families.at(ModelFormFamily::Time).log_sigma, 0);
}

TEST(ValidationIntervals, CoverageCountsPublishedValuesAndRangesInsideP10P90) {
  // Worlds 1..10, no model form (each entry alone in its family, and with no error): p10 1.9, p90 9.1.
  std::vector<double> worlds{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  IntervalCheck inside = check(worlds, 5);
  IntervalCheck outside = check(worlds, 9.5);
  IntervalCheck range_overlap;
  range_overlap.worlds = worlds;
  range_overlap.low = 9;
  range_overlap.high = 12;
  IntervalCheck range_beyond = range_overlap;
  range_beyond.low = 9.2;
  EXPECT_TRUE(interval_covers(inside, 1.9, 9.1));
  EXPECT_FALSE(interval_covers(outside, 1.9, 9.1));
  EXPECT_TRUE(interval_covers(range_overlap, 1.9, 9.1));
  EXPECT_FALSE(interval_covers(range_beyond, 1.9, 9.1));

  // One entry per family, so that no model-form term is learnt; "each" has two points, one covered.
  const std::vector<EntryIntervalInput> in{
      entry("one", ValidationQuantity::Speedup, {inside}),
      entry("each", ValidationQuantity::CollectiveSeconds, {inside, outside}),
      entry("range", ValidationQuantity::RankGap, {range_beyond}),
  };
  IntervalSummary summary;
  const std::vector<EntryInterval> out = entry_intervals(in, 1, summary);
  EXPECT_NEAR(out[0].quantiles[0].p10, 1.9, 1e-12);
  EXPECT_NEAR(out[0].quantiles[0].p90, 9.1, 1e-12);
  EXPECT_DOUBLE_EQ(out[0].covered, 1);
  EXPECT_DOUBLE_EQ(out[1].covered, 0.5);
  EXPECT_DOUBLE_EQ(out[2].covered, 0);
  EXPECT_DOUBLE_EQ(summary.covered, 1.5);
  EXPECT_DOUBLE_EQ(summary.coverage, 0.5);
  EXPECT_EQ(summary.entries, 3);
  EXPECT_NEAR(out[0].relative_width, (9.1 - 1.9) / 5.5, 1e-12);
  EXPECT_NEAR(summary.median_relative_width, (9.1 - 1.9) / 5.5, 1e-12);
}

TEST(ValidationIntervals, AWorldOfAResultsDocumentIsItsPerWorldFigures) {
  const auto results = nlohmann::json::parse(R"({"schema": "lcsim-results/2", "policies": [
    {"name": "a", "tokens_per_s": 100, "mean_iteration_s": 2, "metrics": {"abr": 0.1}, "iterations": [{}],
     "interval": {"samples": 2, "world_iteration_s": [2, 3], "world_speedup": [1, 1.5], "world_peak_GiB": [4, 5],
                  "world_metrics": {"abr": [0.1, 0.2]}}}]})");
  EXPECT_EQ(results_worlds(results), 2);
  const nlohmann::json w = results_in_world(results, 1);
  EXPECT_EQ(w["policies"][0]["tokens_per_s"], 1.5);
  // The world's own throughput, for tokens_per_gpu_s: the nominal tokens per iteration over the world's time.
  EXPECT_NEAR(w["policies"][0]["world_tokens_per_s"].get<double>(), 100.0 * 2 / 3, 1e-9);
  EXPECT_EQ(w["policies"][0]["mean_iteration_s"], 3);
  EXPECT_EQ(w["policies"][0]["metrics"]["abr"], 0.2);
  EXPECT_EQ(w["policies"][0]["iterations"][0]["peak_GiB"], 5);
  EXPECT_EQ(results_in_world(results, 0), results);
  EXPECT_EQ(results_worlds(nlohmann::json::parse(R"({"policies": [{"name": "a"}]})")), 1);
}

}  // namespace uncertainty_test
}  // namespace lcsim
