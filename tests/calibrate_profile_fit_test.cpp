// Fitting calibration measurements into a profile: synthetic measurements made from known coefficients must give
// those coefficients back, held-out errors must be measured on points the fit did not see, and the profile must
// say what was measured and what was kept from the prior.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "base/errors.hpp"
#include "calibrate/fit/profile_fit.hpp"
#include "tests/calibrate_fixtures.hpp"

namespace lcsim {
namespace calibrate_profile_fit_test {

using testing::synthetic_measurements;
using testing::Truth;

Profile h100_prior() {
  return derive_default_profile(named_gpu("H100-SXM"));
}

const FitReportLine& line(const FittedProfile& f, const std::string& what) {
  for (const auto& l : f.report) {
    if (l.what.find(what) != std::string::npos) return l;
  }
  throw std::runtime_error("no report line " + what);
}

const CollectiveFit& entry(const Profile& p, CollectiveOp op, LinkClass link, int n) {
  for (const auto& c : p.collectives) {
    if (c.op == op && c.link == link && c.group_size == n) return c;
  }
  throw std::runtime_error("no collective entry");
}

TEST(CalibrateProfileFit, RecoversComputeCoefficients) {
  const Truth truth;
  const auto& model = named_model("Qwen2.5-7B");
  const auto fitted = fit_profile(synthetic_measurements(model, 8, truth), model, h100_prior());
  const auto& c = fitted.profile.compute;
  ASSERT_EQ(c.gemm_efficiency.x.size(), 9u);
  for (std::size_t i = 0; i < c.gemm_efficiency.x.size(); ++i) {
    EXPECT_NEAR(c.gemm_efficiency.y[i], 0.20 + 0.06 * static_cast<double>(i), 1e-12);
    EXPECT_NEAR(c.attention_efficiency.y[i], 0.10 + 0.05 * static_cast<double>(i), 1e-12);
  }
  ASSERT_TRUE(c.gemm_efficiency.fit_mape.has_value());
  EXPECT_LT(*c.gemm_efficiency.fit_mape, 1e-12);
  EXPECT_LT(*c.attention_efficiency.fit_mape, 1e-12);
  EXPECT_NEAR(c.attention_backward_ratio, 2.3, 1e-9);
  EXPECT_NEAR(c.layer_overhead_us, 55, 1e-6);
  EXPECT_NEAR(c.gemm_work_overhead, 0.15, 1e-9);
  ASSERT_TRUE(c.layer_overhead_fit_mape.has_value());
  EXPECT_LT(*c.layer_overhead_fit_mape, 1e-9);
  EXPECT_NEAR(c.optimizer_us_per_mparam, 9.95, 1e-6);
  EXPECT_NEAR(std::stod(line(fitted, "GEMM backward").result), 2.1, 1e-3);
  EXPECT_EQ(c.peak_tflops, 989);  // kept from the prior: the efficiencies refer to it
}

TEST(CalibrateProfileFit, RecoversActivationCoefficientsFromTheHighWaterMarkSlope) {
  const Truth truth;
  const auto& model = named_model("Qwen2.5-0.5B");
  const auto fitted = fit_profile(synthetic_measurements(model, 1, truth), model, h100_prior());
  const auto& m = fitted.profile.memory;
  EXPECT_NEAR(m.activations_none.per_hidden, 14, 1e-6);
  EXPECT_NEAR(m.activations_none.per_kv_hidden, 4, 1e-6);
  EXPECT_NEAR(m.activations_none.per_ffn, 6, 1e-6);
  EXPECT_NEAR(m.activations_selective.per_hidden, 10, 1e-6);
  EXPECT_NEAR(m.activations_selective.per_ffn, 4, 1e-6);
  EXPECT_NEAR(m.activations_full.per_hidden, 2, 1e-6);
  EXPECT_NEAR(m.activations_full.per_kv_hidden, 0, 1e-6);
  EXPECT_NEAR(m.activations_full.per_ffn, 0, 1e-6);
  ASSERT_TRUE(m.fit_mape.has_value());
  EXPECT_LT(*m.fit_mape, 1e-9);
  // 9 model shapes, every third interior one held out: 1, 4, 7.
  EXPECT_EQ(line(fitted, "recompute none").points, 9);
  EXPECT_EQ(line(fitted, "recompute none").held_out, 3);
  // The logits are what lcsim's LM head keeps (one bf16 buffer), not the prior's unfused loss; the reserve is
  // kept from the prior.
  EXPECT_EQ(m.logits_bytes_per_token_per_vocab, 2);
  EXPECT_NE(h100_prior().memory.logits_bytes_per_token_per_vocab, 2);
  EXPECT_EQ(m.reserve_bytes, h100_prior().memory.reserve_bytes);
}

TEST(CalibrateProfileFit, CurveErrorIsMeasuredInTimeOnHeldOutPoints) {
  auto m = synthetic_measurements(named_model("Qwen2.5-7B"), 1);
  // Point 1 (256 tokens) is held out; 10 % slower there means the curve, built without it, predicts a time
  // 1/1.1 of the measured one: |1/1.1 - 1| on one of the three held-out points.
  m.gemm[1].forward.kernel_seconds *= 1.1;
  const auto fitted = fit_profile(m, named_model("Qwen2.5-7B"), h100_prior());
  EXPECT_NEAR(*fitted.profile.compute.gemm_efficiency.fit_mape, (1 - 1 / 1.1) / 3, 1e-9);
  // A fitted point (index 2) moved instead changes the interpolation of its held-out neighbours.
  auto m2 = synthetic_measurements(named_model("Qwen2.5-7B"), 1);
  m2.gemm[2].forward.kernel_seconds *= 1.1;
  const auto fitted2 = fit_profile(m2, named_model("Qwen2.5-7B"), h100_prior());
  EXPECT_GT(*fitted2.profile.compute.gemm_efficiency.fit_mape, 0.001);
  // The stored curve keeps every measured point.
  EXPECT_NEAR(fitted2.profile.compute.gemm_efficiency.y[2], (0.20 + 0.12) / 1.1, 1e-12);
}

TEST(CalibrateProfileFit, MeasuredCollectivesReplaceThePriorOfTheirOpAndLink) {
  const Truth truth;
  const auto& model = named_model("Qwen2.5-7B");
  const auto fitted = fit_profile(synthetic_measurements(model, 4, truth), model, h100_prior());
  const auto& p = fitted.profile;
  for (int n : {2, 4}) {
    const auto& e = entry(p, CollectiveOp::AllReduce, LinkClass::NvLink, n);
    EXPECT_TRUE(e.measured);
    ASSERT_EQ(e.segments.size(), 1u);
    EXPECT_NEAR(e.segments[0].latency_us, 20, 1e-6);
    EXPECT_NEAR(e.segments[0].bus_GBps, 300, 1e-6);
    ASSERT_TRUE(e.fit_mape.has_value());
    EXPECT_LT(*e.fit_mape, 1e-9);
  }
  // Group size 8 was not measurable on 4 GPUs: the derived prior's entry goes, so 8 GPUs use the nearest measured
  // group (4) with the bus factor of 8: 20 us + 64 MiB x 2 (7/8) / 300 GB/s.
  const auto same = [](CollectiveOp op, LinkClass link, int n) {
    return [=](const CollectiveFit& e) { return e.op == op && e.link == link && e.group_size == n; };
  };
  EXPECT_EQ(
      std::count_if(p.collectives.begin(), p.collectives.end(), same(CollectiveOp::AllReduce, LinkClass::NvLink, 8)),
      0);
  const double bytes = 64.0 * (1 << 20);
  EXPECT_NEAR(p.collective_seconds(CollectiveOp::AllReduce, LinkClass::NvLink, 8, bytes),
              20e-6 + bytes * 2 * 7 / 8 / 300e9, 1e-12);
  // InfiniBand was not measured: the prior stays, marked not measured.
  EXPECT_FALSE(entry(p, CollectiveOp::AllGather, LinkClass::InfiniBand, 16).measured);
  EXPECT_TRUE(entry(p, CollectiveOp::SendRecv, LinkClass::NvLink, 2).measured);
  // The strategy switch moves 4 bytes per parameter at the send_recv rate: 4e6 B / 350 GB/s = 11.43 us.
  EXPECT_NEAR(p.compute.hot_switch_us_per_mparam, 4e6 / 350e9 * 1e6, 1e-6);
  // The Ulysses exchange is predicted by the fitted all_to_all exactly (the synthetic data follows it).
  EXPECT_LT(*line(fitted, "Ulysses").held_out_mape, 1e-9);
  // Entries keep the default profiles' order: link, then op, then group size.
  for (std::size_t i = 1; i < p.collectives.size(); ++i) {
    const auto& a = p.collectives[i - 1];
    const auto& b = p.collectives[i];
    EXPECT_LT(std::tie(a.link, a.op, a.group_size), std::tie(b.link, b.op, b.group_size));
  }
}

/// Published figures in the measurements format: GEMMs of their own shapes, attention of another head layout,
/// no backward for GEMMs, InfiniBand sweeps (tools/published_measurements.py writes such a file).
Measurements published_measurements(const Profile& prior) {
  Measurements m = synthetic_measurements(named_model("Qwen2.5-7B"), 8);
  m.published = "SOURCES.md";
  m.layers.clear();
  m.memory.clear();
  m.ulysses.clear();
  m.optimizer.clear();
  const double peak = prior.compute.peak_tflops * 1e12;
  m.gemm.clear();
  // Two shapes at 2048 tokens (efficiencies 0.70 and 0.80: median 0.75) and one each at 256 and 8192.
  const auto gemm = [&](Tokens tokens, double n, double k, double efficiency) {
    GemmMeasurement g{tokens, {}, std::nullopt, n, k};
    const double seconds = 2.0 * static_cast<double>(tokens) * n * k / (efficiency * peak);
    g.forward = {seconds, seconds, 0};
    m.gemm.push_back(g);
  };
  gemm(2048, 8192, 8192, 0.70);
  gemm(2048, 4096, 4096, 0.80);
  gemm(256, 43008, 5376, 0.60);
  gemm(8192, 8192, 8192, 0.81);
  // Attention over q_hidden 2048, 16K tokens per call, efficiency 0.2 .. 0.34, no backward.
  m.attention.clear();
  const std::vector<std::pair<int, double>> attention = {{512, 0.20}, {2048, 0.30}, {16384, 0.34}};
  for (const auto& [s, efficiency] : attention) {
    const int sequences = 16384 / s;
    const double seconds = sequences * 2.0 * s * s * 2048 / (efficiency * peak);
    m.attention.push_back({s, sequences, {seconds, seconds, 0}, std::nullopt, 2048});
  }
  // One InfiniBand sweep beside the NVLink ones: 80 ranks, 100 us + 320 GB/s bus bandwidth.
  CollectiveMeasurement ib{CollectiveOp::AllGather, 80, {}, LinkClass::InfiniBand};
  for (double bytes = 32.0 * (1 << 20); bytes <= 16.0 * (1 << 30); bytes *= 2)
    ib.samples.push_back({bytes, 100e-6 + bytes * 79.0 / 80.0 / 320e9});
  m.collectives.push_back(ib);
  return m;
}

TEST(CalibrateProfileFit, PublishedFiguresTakeTheSameRoadAndSaySo) {
  const Profile prior = h100_prior();
  const auto& model = named_model("Qwen2.5-7B");
  const auto fitted = fit_profile(published_measurements(prior), model, prior);
  const Profile& p = fitted.profile;
  // GEMMs: 2 m n k FLOPs of each point's own shape; two shapes at one token count combine by their median.
  ASSERT_EQ(p.compute.gemm_efficiency.x, (std::vector<double>{256, 2048, 8192}));
  EXPECT_NEAR(p.compute.gemm_efficiency.y[0], 0.60, 1e-12);
  EXPECT_NEAR(p.compute.gemm_efficiency.y[1], 0.75, 1e-12);
  EXPECT_NEAR(p.compute.gemm_efficiency.y[2], 0.81, 1e-12);
  // Attention FLOPs of the published head layout (q_hidden 2048), not the model's (3584).
  EXPECT_NEAR(p.compute.attention_efficiency.at(2048), 0.30, 1e-12);
  // No backward was published: the prior's ratio stays, and the report says so.
  EXPECT_EQ(p.compute.attention_backward_ratio, prior.compute.attention_backward_ratio);
  EXPECT_EQ(line(fitted, "attention backward").result, "not measured: prior kept");
  EXPECT_THROW(line(fitted, "GEMM backward"), std::runtime_error);
  // The InfiniBand sweep goes under infiniband, and replaces the prior's all_gather entries of that link only.
  const auto& ag = entry(p, CollectiveOp::AllGather, LinkClass::InfiniBand, 80);
  EXPECT_TRUE(ag.measured);
  EXPECT_NEAR(ag.segments.back().bus_GBps, 320, 1e-6);
  EXPECT_THROW(entry(p, CollectiveOp::AllGather, LinkClass::InfiniBand, 16), std::runtime_error);
  EXPECT_FALSE(entry(p, CollectiveOp::AllReduce, LinkClass::InfiniBand, 16).measured);
  // Not lcsim's measurement: uncalibrated, with a source that says where the figures are.
  EXPECT_FALSE(p.provenance.calibrated);
  EXPECT_EQ(p.provenance.source, "published measurements");
  EXPECT_NE(p.provenance.notes.find("SOURCES.md"), std::string::npos);
  EXPECT_EQ(p.label(), "uncalibrated (published measurements)");
}

TEST(CalibrateProfileFit, MeasuredCollectivesNoLongerRestOnTheFiguresThePriorWasFittedOn) {
  const Profile prior = h100_prior();
  ASSERT_EQ(prior.provenance.fitted_on.size(), 4u);  // Skrull Table 5's four NVLink ops
  const auto& model = named_model("Qwen2.5-7B");
  // One GPU: nothing measured between GPUs, the prior's collectives and what they were fitted on stay.
  EXPECT_EQ(fit_profile(synthetic_measurements(model, 1), model, prior).profile.provenance.fitted_on,
            prior.provenance.fitted_on);
  // Eight GPUs measure every NVLink op: nothing rests on Table 5 any more.
  EXPECT_TRUE(fit_profile(synthetic_measurements(model, 8), model, prior).profile.provenance.fitted_on.empty());
  // Only all_gather measured: the other three ops keep their Table 5 rows.
  Measurements m = synthetic_measurements(model, 8);
  std::erase_if(m.collectives, [](const auto& c) { return c.op != CollectiveOp::AllGather; });
  const auto kept = fit_profile(m, model, prior).profile.provenance.fitted_on;
  ASSERT_EQ(kept.size(), 3u);
  for (const auto& f : kept) EXPECT_NE(f.parameter, "collectives.nvlink.all_gather");
}

TEST(CalibrateProfileFit, OneGpuKeepsEveryPriorCollectiveMarkedNotMeasured) {
  const auto& model = named_model("Qwen2.5-0.5B");
  const Profile prior = h100_prior();
  const auto fitted = fit_profile(synthetic_measurements(model, 1), model, prior);
  ASSERT_EQ(fitted.profile.collectives.size(), prior.collectives.size());
  for (std::size_t i = 0; i < prior.collectives.size(); ++i) {
    EXPECT_FALSE(fitted.profile.collectives[i].measured);
    EXPECT_EQ(fitted.profile.collectives[i].segments.size(), prior.collectives[i].segments.size());
    EXPECT_EQ(fitted.profile.collectives[i].segments[0].bus_GBps, prior.collectives[i].segments[0].bus_GBps);
  }
  EXPECT_EQ(fitted.profile.compute.hot_switch_us_per_mparam, prior.compute.hot_switch_us_per_mparam);
  EXPECT_NE(fitted.profile.provenance.notes.find("1 GPU visible"), std::string::npos);
  EXPECT_NE(fitted.profile.provenance.notes.find("measured: false"), std::string::npos);
}

TEST(CalibrateProfileFit, ProvenanceNamesDeviceStackDateAndModel) {
  const auto& model = named_model("Qwen2.5-7B");
  const auto m = synthetic_measurements(model, 8);
  const auto fitted = fit_profile(m, model, h100_prior());
  const auto& pv = fitted.profile.provenance;
  EXPECT_TRUE(pv.calibrated);
  EXPECT_EQ(pv.source, "lcsim-gpu calibrate");
  EXPECT_NE(pv.device.find("NVIDIA H100 80GB HBM3 x8"), std::string::npos);
  EXPECT_NE(pv.device.find("gpu-node-1"), std::string::npos);
  EXPECT_EQ(pv.date, "2026-11-22T04:00:00Z");
  EXPECT_EQ(pv.driver, "580.159.04");
  EXPECT_EQ(pv.cuda, "13.0");
  EXPECT_EQ(pv.nccl, "2.28.9");
  EXPECT_EQ(pv.model, "Qwen2.5-7B");
  EXPECT_EQ(pv.tool_version, LCSIM_VERSION);
  EXPECT_EQ(fitted.profile.gpu, "H100-SXM");
  EXPECT_NE(pv.notes.find("kernel timing: cupti"), std::string::npos);
  EXPECT_EQ(fitted.profile.label(), "calibrated on " + pv.device + ", " + pv.date);
  // The written profile is valid: it survives the strict reader.
  const Profile again = profile_from_json(profile_to_json(fitted.profile), "fitted.json");
  EXPECT_EQ(again.provenance.device, pv.device);
  EXPECT_EQ(again.compute.gemm_efficiency.y, fitted.profile.compute.gemm_efficiency.y);

  auto other = m;
  other.device.name = "NVIDIA L40S";
  other.device.gpu_kind = "";
  EXPECT_EQ(fit_profile(other, model, h100_prior()).profile.gpu, "NVIDIA L40S");
}

TEST(CalibrateProfileFit, NegativeOverheadIsStoredAsZeroAndReported) {
  Truth truth;
  truth.layer_overhead_us = -20;  // the layer ran faster than its GEMM and attention terms alone
  const auto& model = named_model("Qwen2.5-7B");
  const auto fitted = fit_profile(synthetic_measurements(model, 1, truth), model, h100_prior());
  EXPECT_EQ(fitted.profile.compute.layer_overhead_us, 0);
  EXPECT_GT(fitted.profile.compute.gemm_work_overhead, 0);  // refitted alone
  EXPECT_NE(line(fitted, "layer time").result.find("layer_overhead_us (-20.0 us) fitted negative, stored as 0"),
            std::string::npos)
      << line(fitted, "layer time").result;
  EXPECT_NE(fitted.profile.provenance.notes.find("stored as 0"), std::string::npos);
  EXPECT_GT(*fitted.profile.compute.layer_overhead_fit_mape, 0);
}

TEST(CalibrateProfileFit, LayerOverheadSeparatesTheFixedCostFromTheShareOfTheGemms) {
  // Short micro-batches pin the fixed cost, long ones the share: 30 us + 20 % of the GEMM passes, exactly. The
  // attention part (base - gemm) gets no share: the long attention-heavy points say so.
  const std::vector<double> base = {1e-6, 10e-6, 100e-6, 1e-3, 10e-3, 10e-3};
  const std::vector<double> gemm = {0.8e-6, 8e-6, 60e-6, 0.5e-3, 8e-3, 1e-3};
  std::vector<double> measured;
  for (std::size_t i = 0; i < base.size(); ++i) measured.push_back(base[i] + 0.2 * gemm[i] + 30e-6);
  const auto fit = fit_layer_overhead(base, gemm, measured);
  EXPECT_NEAR(fit.fixed_seconds, 30e-6, 1e-12);
  EXPECT_NEAR(fit.gemm_share, 0.2, 1e-9);
  EXPECT_TRUE(fit.clamped.empty());

  // A layer faster than its GEMM and attention terms at length: the share is clamped, the fixed cost refitted.
  std::vector<double> faster;
  for (std::size_t i = 0; i < base.size(); ++i) faster.push_back(base[i] - 0.1 * gemm[i] + 30e-6);
  const auto clamped = fit_layer_overhead(base, gemm, faster);
  EXPECT_EQ(clamped.gemm_share, 0);
  EXPECT_GT(clamped.fixed_seconds, 0);
  ASSERT_EQ(clamped.clamped.size(), 1u);
  EXPECT_NE(clamped.clamped[0].find("gemm_work_overhead"), std::string::npos);

  EXPECT_THROW(fit_layer_overhead({}, {}, {}), std::invalid_argument);
  EXPECT_THROW(fit_layer_overhead({1e-3}, {1e-3}, {0}), std::invalid_argument);
  EXPECT_THROW(fit_layer_overhead({1e-3}, {}, {1e-3}), std::invalid_argument);
}

TEST(CalibrateProfileFit, InconsistentMeasurementsAreInputErrors) {
  const auto& model = named_model("Qwen2.5-7B");
  const auto good = synthetic_measurements(model, 1);
  auto too_fast = good;
  too_fast.gemm.back().forward.kernel_seconds /= 10;  // 0.68 x 10 of peak
  EXPECT_THROW(
      {
        try {
          fit_profile(too_fast, model, h100_prior());
        } catch (const InputError& e) {
          EXPECT_NE(std::string(e.what()).find("peak"), std::string::npos) << e.what();
          throw;
        }
      },
      InputError);
  auto no_gemm = good;
  no_gemm.gemm.clear();
  EXPECT_THROW(fit_profile(no_gemm, model, h100_prior()), InputError);
  auto no_attention = good;
  no_attention.attention.clear();
  EXPECT_THROW(fit_profile(no_attention, model, h100_prior()), InputError);
  EXPECT_THROW(fit_profile(good, named_model("Qwen2.5-0.5B"), h100_prior()), InputError);
  auto one_depth = good;
  one_depth.memory[0].layers = {2, 2, 2};
  EXPECT_THROW(fit_profile(one_depth, model, h100_prior()), InputError);
  auto duplicate = good;
  duplicate.gemm[1].tokens = duplicate.gemm[0].tokens;
  EXPECT_THROW(fit_profile(duplicate, model, h100_prior()), InputError);
}

/// The InputError message fit_profile throws for measurements read from "m.json", or "" when it fits.
std::string fit_error(const Measurements& m, const ModelConfig& model) {
  try {
    fit_profile(m, model, h100_prior(), "m.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

::testing::AssertionResult starts_with(const std::string& text, const std::string& prefix) {
  if (text.rfind(prefix, 0) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not start with \"" << prefix << "\"";
}

TEST(CalibrateProfileFit, InconsistenciesNameTheMeasurementsFileAndKey) {
  const auto& model = named_model("Qwen2.5-7B");
  const auto good = synthetic_measurements(model, 1);
  auto duplicate = good;
  duplicate.gemm[1].tokens = duplicate.gemm[0].tokens;
  EXPECT_TRUE(starts_with(fit_error(duplicate, model), "m.json: gemm: GEMM curve: two measurements at "));
  auto one_depth = good;
  one_depth.memory[0].layers = {2, 2, 2};
  EXPECT_TRUE(starts_with(fit_error(one_depth, model), "m.json: memory[0].layers: memory probe of "));
  auto too_fast = good;
  too_fast.gemm.back().forward.kernel_seconds /= 10;
  EXPECT_TRUE(
      starts_with(fit_error(too_fast, model), "m.json: gemm[" + std::to_string(good.gemm.size() - 1) + "]: GEMMs at "));
  auto flat_optimizer = good;
  for (auto& o : flat_optimizer.optimizer) o.seconds = 1e-3;
  EXPECT_EQ(fit_error(flat_optimizer, model), "m.json: optimizer: optimizer time does not grow with parameters");
  EXPECT_TRUE(starts_with(fit_error(good, named_model("Qwen2.5-0.5B")), "m.json: model: measurements were taken"));
  auto unknown = good;
  unknown.model = "Qwen9-1T";
  try {
    measured_model(unknown, "m.json");
    ADD_FAILURE() << "no InputError for an unknown model";
  } catch (const InputError& e) {
    EXPECT_TRUE(starts_with(e.what(), "m.json: model: "));
    EXPECT_NE(std::string(e.what()).find("Qwen9-1T"), std::string::npos) << e.what();
  }
  EXPECT_EQ(measured_model(good, "m.json").name, "Qwen2.5-7B");
}

TEST(CalibrateProfileFit, UnmeasuredPartsKeepThePriorAndSaySo) {
  const auto& model = named_model("Qwen2.5-7B");
  auto m = synthetic_measurements(model, 1);
  m.layers.clear();
  m.memory.clear();
  m.optimizer.clear();
  Profile prior = h100_prior();
  prior.compute.gemm_work_overhead = 0.3;
  const auto fitted = fit_profile(m, model, prior);
  EXPECT_EQ(fitted.profile.compute.layer_overhead_us, prior.compute.layer_overhead_us);
  EXPECT_EQ(fitted.profile.compute.gemm_work_overhead, 0.3);
  EXPECT_EQ(fitted.profile.memory.activations_none.per_ffn, prior.memory.activations_none.per_ffn);
  EXPECT_EQ(fitted.profile.compute.optimizer_us_per_mparam, prior.compute.optimizer_us_per_mparam);
  EXPECT_EQ(line(fitted, "layer overhead").result, "not measured: prior kept");
  EXPECT_NE(fitted.profile.provenance.notes.find("layer_overhead_us and gemm_work_overhead (no layer measurements)"),
            std::string::npos);
}

TEST(CalibrateActivationFit, DropsANegativeCoefficientAndRefits) {
  // bytes = 3 h - 0.5 kv + 1 f cannot be matched with non-negative coefficients: kv is fixed at 0 and h, f refitted.
  std::vector<ActivationSample> samples;
  for (const auto& m : named_models()) {
    samples.push_back(
        {double(m.hidden), double(m.kv_hidden()), double(m.ffn), 3.0 * m.hidden - 0.5 * m.kv_hidden() + 1.0 * m.ffn});
  }
  const auto fit = fit_activation_coefficients(samples, 3);
  EXPECT_EQ(fit.coefficients.per_kv_hidden, 0);
  EXPECT_GT(fit.coefficients.per_hidden, 0);
  EXPECT_GT(fit.coefficients.per_ffn, 0);
  EXPECT_GT(*fit.held_out_mape, 0);
  EXPECT_EQ(fit.points, 9);
  EXPECT_EQ(fit.held_out, 3);
}

TEST(CalibrateActivationFit, TooFewShapesIsAnInputError) {
  const std::vector<ActivationSample> samples = {{896, 128, 4864, 20000}, {3584, 512, 18944, 80000}};
  EXPECT_THROW(fit_activation_coefficients(samples, 0), InputError);
}

TEST(CalibrateEfficiencyCurve, SortsPointsAndRejectsDuplicates) {
  const Curve c = efficiency_curve({1024, 128, 512}, {0.5, 0.2, 0.4}, 0, "test");
  EXPECT_EQ(c.x, (std::vector<double>{128, 512, 1024}));
  EXPECT_EQ(c.y, (std::vector<double>{0.2, 0.4, 0.5}));
  EXPECT_FALSE(c.fit_mape.has_value());
  EXPECT_THROW(efficiency_curve({128, 128}, {0.2, 0.3}, 0, "test"), InputError);
}

}  // namespace calibrate_profile_fit_test
}  // namespace lcsim
