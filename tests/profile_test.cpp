#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include <nlohmann/json.hpp>

#include "base/errors.hpp"
#include "base/json_reader.hpp"
#include "model/profile.hpp"

namespace lcsim {
namespace profile_test {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(ProfileCurve, InterpolatesInLogXAndHoldsTheEnds) {
  const Curve c{{100, 10000}, {0.2, 0.6}, std::nullopt};
  EXPECT_DOUBLE_EQ(c.at(1000), 0.4);                      // halfway in log x (linear x would give 0.236)
  EXPECT_NEAR(c.at(std::sqrt(1000.0) * 10), 0.3, 1e-12);  // a quarter of the way
  EXPECT_DOUBLE_EQ(c.at(100), 0.2);
  EXPECT_DOUBLE_EQ(c.at(10000), 0.6);
  EXPECT_DOUBLE_EQ(c.at(1), 0.2);  // below the first point: the first value holds
  EXPECT_DOUBLE_EQ(c.at(0), 0.2);
  EXPECT_DOUBLE_EQ(c.at(1e9), 0.6);  // beyond the last point: the last value holds
}

TEST(ProfileCurve, PicksTheRightInterval) {
  const Curve c{{1, 10, 100}, {0.1, 0.5, 0.7}, std::nullopt};
  EXPECT_NEAR(c.at(std::sqrt(10.0)), 0.3, 1e-12);
  EXPECT_NEAR(c.at(std::sqrt(1000.0)), 0.6, 1e-12);
  EXPECT_DOUBLE_EQ(c.at(10), 0.5);
}

TEST(ProfileCollective, BusFactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::AllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::AllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::ReduceScatter, 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::AllToAll, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::SendRecv, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::AllReduce, 1), 0.0);
}

TEST(ProfileCollective, NamesOps) {
  EXPECT_EQ(to_string(CollectiveOp::AllGather), "all_gather");
  EXPECT_EQ(to_string(CollectiveOp::ReduceScatter), "reduce_scatter");
  EXPECT_EQ(to_string(CollectiveOp::AllReduce), "all_reduce");
  EXPECT_EQ(to_string(CollectiveOp::AllToAll), "all_to_all");
  EXPECT_EQ(to_string(CollectiveOp::SendRecv), "send_recv");
}

CollectiveFit two_segment_all_gather() {
  CollectiveFit fit;
  fit.op = CollectiveOp::AllGather;
  fit.link = LinkClass::NvLink;
  fit.group_size = 8;
  fit.segments = {{1e6, 10, 100}, {kInf, 50, 200}};
  return fit;
}

TEST(ProfileCollective, SecondsUseTheSegmentOfTheSize) {
  const CollectiveFit fit = two_segment_all_gather();
  // 10 us + 5e5 B * 0.875 / 100 GB/s
  EXPECT_NEAR(fit.seconds(5e5), 10e-6 + 4.375e-6, 1e-15);
  EXPECT_NEAR(fit.seconds(1e6), 10e-6 + 8.75e-6, 1e-15);  // max_bytes is inclusive
  EXPECT_NEAR(fit.seconds(4e6), 50e-6 + 17.5e-6, 1e-15);
  EXPECT_NEAR(fit.seconds(0), 10e-6, 1e-15);
}

Profile profile_with(std::vector<CollectiveFit> collectives) {
  Profile p;
  p.gpu = "TestGPU";
  p.provenance.source = "unit test";
  p.collectives = std::move(collectives);
  return p;
}

CollectiveFit single(CollectiveOp op, LinkClass link, int n, double latency_us, double bus_GBps) {
  CollectiveFit fit;
  fit.op = op;
  fit.link = link;
  fit.group_size = n;
  fit.segments = {{kInf, latency_us, bus_GBps}};
  return fit;
}

TEST(ProfileCollective, UsesTheNearestGroupSizeInLogScale) {
  const Profile p = profile_with({single(CollectiveOp::AllGather, LinkClass::NvLink, 2, 1, 100),
                                  single(CollectiveOp::AllGather, LinkClass::NvLink, 8, 7, 100),
                                  single(CollectiveOp::AllGather, LinkClass::InfiniBand, 16, 30, 50)});
  const double bytes = 3e6;
  // 3 GPUs: log2(3/2) = 0.58 < log2(8/3) = 1.42 -> the 2-GPU entry, with the bus factor of 3 GPUs (2/3).
  EXPECT_NEAR(p.collective_seconds(CollectiveOp::AllGather, LinkClass::NvLink, 3, bytes),
              1e-6 + bytes * (2.0 / 3) / 1e11, 1e-15);
  // 4 GPUs: equally far from 2 and 8 -> the larger group's (more conservative) latency.
  EXPECT_NEAR(p.collective_seconds(CollectiveOp::AllGather, LinkClass::NvLink, 4, bytes), 7e-6 + bytes * 0.75 / 1e11,
              1e-15);
  EXPECT_NEAR(p.collective_seconds(CollectiveOp::AllGather, LinkClass::InfiniBand, 64, bytes),
              30e-6 + bytes * (63.0 / 64) / 5e10, 1e-15);
  EXPECT_EQ(p.collective_seconds(CollectiveOp::AllGather, LinkClass::NvLink, 1, bytes), 0.0);
}

TEST(ProfileCollective, MissingEntryIsAnInputError) {
  const Profile p = profile_with({single(CollectiveOp::AllGather, LinkClass::NvLink, 8, 1, 100)});
  try {
    p.collective_seconds(CollectiveOp::AllToAll, LinkClass::NvLink, 8, 1e6);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("all_to_all"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("nvlink"), std::string::npos);
  }
  EXPECT_THROW(p.collective_seconds(CollectiveOp::AllGather, LinkClass::InfiniBand, 16, 1e6), InputError);
}

TEST(ProfileLabel, SaysWhereNumbersComeFrom) {
  Profile p;
  p.provenance.source = "derived from public figures";
  EXPECT_EQ(p.label(), "uncalibrated (derived from public figures)");
  p.provenance.calibrated = true;
  p.provenance.device = "H100-SXM node x1";
  p.provenance.date = "2025-01-02";
  EXPECT_EQ(p.label(), "calibrated on H100-SXM node x1, 2025-01-02");
}

// ---- JSON ----

nlohmann::json valid_document() {
  return nlohmann::json::parse(R"({
    "format_version": 2,
    "gpu": "H100-SXM",
    "provenance": {"calibrated": false, "source": "unit test", "device": "", "date": "", "tool_version": "0.1.0",
                   "driver": "", "cuda": "", "nccl": "", "model": "", "notes": "hand written"},
    "network": {"nvlink_GBps": 450, "nvlink_latency_us": 2, "ib_GBps": 50, "ib_latency_us": 5},
    "compute": {
      "peak_tflops": 989,
      "gemm_efficiency": {"tokens": [128, 8192], "efficiency": [0.2, 0.75], "fit_mape": 0.03},
      "attention_efficiency": {"seq_tokens": [256, 16384], "efficiency": [0.15, 0.55], "fit_mape": null},
      "attention_backward_ratio": 2.5,
      "layer_overhead_us": 40,
      "gemm_work_overhead": 0.25,
      "layer_overhead_fit_mape": null,
      "optimizer_us_per_mparam": 9.95,
      "hot_switch_us_per_mparam": 11.1
    },
    "memory": {
      "activation_bytes_per_token_per_layer": {
        "none": {"per_hidden": 12, "per_kv_hidden": 4, "per_ffn": 8},
        "selective": {"per_hidden": 10, "per_kv_hidden": 4, "per_ffn": 6},
        "full": {"per_hidden": 2, "per_kv_hidden": 0, "per_ffn": 0}
      },
      "logits_bytes_per_token_per_vocab": 10,
      "static_bytes_per_param": {"replicated": [16, 4, 2, 0], "sharded": [0, 12, 14, 16]},
      "reserve_GiB": 6,
      "fit_mape": 0.02
    },
    "collectives": [
      {"op": "all_gather", "link": "nvlink", "group_size": 8, "measured": true, "fit_mape": 0.015,
       "segments": [{"max_bytes": 16777216, "latency_us": 33.1, "bus_GBps": 98.8},
                    {"max_bytes": null, "latency_us": 77.9, "bus_GBps": 141.4}]},
      {"op": "send_recv", "link": "infiniband", "group_size": 2, "measured": false, "fit_mape": null,
       "segments": [{"max_bytes": null, "latency_us": 8, "bus_GBps": 47}]}
    ]
  })");
}

TEST(ProfileJson, ReadsEveryField) {
  const Profile p = profile_from_json(valid_document(), "p.json");
  EXPECT_EQ(p.format_version, 2);
  ASSERT_TRUE(p.network);
  EXPECT_DOUBLE_EQ(p.network->ib_GBps, 50);
  EXPECT_EQ(p.gpu, "H100-SXM");
  EXPECT_FALSE(p.provenance.calibrated);
  EXPECT_EQ(p.provenance.notes, "hand written");
  EXPECT_DOUBLE_EQ(p.compute.peak_tflops, 989);
  EXPECT_EQ(p.compute.gemm_efficiency.x, (std::vector<double>{128, 8192}));
  EXPECT_EQ(p.compute.gemm_efficiency.fit_mape, 0.03);
  EXPECT_FALSE(p.compute.attention_efficiency.fit_mape.has_value());
  EXPECT_DOUBLE_EQ(p.compute.attention_efficiency.y[1], 0.55);
  EXPECT_DOUBLE_EQ(p.compute.layer_overhead_us, 40);
  EXPECT_DOUBLE_EQ(p.compute.gemm_work_overhead, 0.25);
  EXPECT_DOUBLE_EQ(p.memory.activations_selective.per_ffn, 6);
  EXPECT_DOUBLE_EQ(p.memory.activations_full.per_hidden, 2);
  EXPECT_DOUBLE_EQ(p.memory.sharded_bytes_per_param[2], 14);
  EXPECT_DOUBLE_EQ(p.memory.reserve_bytes, 6.0 * 1024 * 1024 * 1024);
  ASSERT_EQ(p.collectives.size(), 2u);
  EXPECT_EQ(p.collectives[0].op, CollectiveOp::AllGather);
  EXPECT_TRUE(p.collectives[0].measured);
  EXPECT_DOUBLE_EQ(p.collectives[0].segments[0].max_bytes, 16777216);
  EXPECT_TRUE(std::isinf(p.collectives[0].segments[1].max_bytes));
  EXPECT_EQ(p.collectives[1].link, LinkClass::InfiniBand);
  EXPECT_FALSE(p.collectives[1].fit_mape.has_value());
}

TEST(ProfileJson, RoundTripsThroughJsonAndFiles) {
  const Profile p = profile_from_json(valid_document(), "p.json");
  const nlohmann::json j = profile_to_json(p);
  EXPECT_EQ(j, valid_document());  // the writer produces exactly the documented format
  const Profile back = profile_from_json(j, "again.json");
  EXPECT_EQ(profile_to_json(back), j);
  EXPECT_EQ(back.compute.gemm_efficiency.y, p.compute.gemm_efficiency.y);
  EXPECT_EQ(back.memory.reserve_bytes, p.memory.reserve_bytes);

  const auto file = std::filesystem::temp_directory_path() / "lcsim_profile_test_roundtrip.json";
  save_profile(p, file.string());
  const Profile loaded = load_profile(file.string());
  std::filesystem::remove(file);
  EXPECT_EQ(profile_to_json(loaded), j);
}

// The framework's CPU floor is optional: absent it is 0 and not written, so every profile without it reads and
// writes as before; present it round-trips.
TEST(ProfileJson, TheCpuFloorIsOptionalAndRoundTrips) {
  EXPECT_EQ(profile_from_json(valid_document(), "p.json").compute.layer_issue_us, 0);
  nlohmann::json doc = valid_document();
  doc["compute"]["layer_issue_us"] = 3096;
  doc["compute"]["step_issue_us"] = 12000;
  const Profile p = profile_from_json(doc, "p.json");
  EXPECT_DOUBLE_EQ(p.compute.layer_issue_us, 3096);
  EXPECT_DOUBLE_EQ(p.compute.step_issue_us, 12000);
  EXPECT_EQ(profile_to_json(p), doc);
  doc["compute"]["layer_issue_us"] = -1;
  EXPECT_THROW(profile_from_json(doc, "p.json"), InputError);
}

TEST(ProfileJson, GradientReduceBytesAreOptionalBf16AndRoundTrip) {
  EXPECT_EQ(profile_from_json(valid_document(), "p.json").memory.gradient_reduce_bytes, 2);
  EXPECT_FALSE(profile_to_json(profile_from_json(valid_document(), "p.json"))["memory"].contains(
      "gradient_reduce_bytes_per_param"));
  nlohmann::json doc = valid_document();
  doc["memory"]["gradient_reduce_bytes_per_param"] = 4;
  const Profile p = profile_from_json(doc, "p.json");
  EXPECT_DOUBLE_EQ(p.memory.gradient_reduce_bytes, 4);
  EXPECT_EQ(profile_to_json(p), doc);
  doc["memory"]["gradient_reduce_bytes_per_param"] = 0;
  EXPECT_THROW(profile_from_json(doc, "p.json"), InputError);
}

/// Expects profile_from_json to reject `doc` with a message containing `needle` (a JSON path and/or reason).
void expect_rejected(const nlohmann::json& doc, const std::string& needle) {
  try {
    profile_from_json(doc, "bad.json");
    ADD_FAILURE() << "accepted a document that should fail with '" << needle << "'";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("bad.json"), std::string::npos) << message;
    EXPECT_NE(message.find(needle), std::string::npos) << message;
  }
}

// Other attention kernels a profile prices: they round-trip, are read strictly, and training.attention's choice
// replaces the profile's own curve and backward ratio, or names what the profile has.
TEST(ProfileJson, AttentionImplementationsRoundTripAndOneReplacesTheProfilesOwn) {
  nlohmann::json doc = valid_document();
  doc["compute"]["attention_implementations"] = nlohmann::json::parse(R"({
    "fa2": {"efficiency": {"seq_tokens": [512, 16384], "efficiency": [0.19, 0.34], "fit_mape": null},
            "backward_ratio": 2.87, "source": "FlashAttention-3 paper Fig. 5"}})");
  const Profile p = profile_from_json(doc, "p.json");
  EXPECT_EQ(profile_to_json(p), doc);
  const Profile fa2 = with_attention(p, "fa2", "s.json: training.attention");
  EXPECT_EQ(fa2.compute.attention_efficiency.y, (std::vector<double>{0.19, 0.34}));
  EXPECT_DOUBLE_EQ(fa2.compute.attention_backward_ratio, 2.87);
  EXPECT_EQ(with_attention(p, "", "unused").compute.attention_efficiency.y, p.compute.attention_efficiency.y);
  try {
    (void)with_attention(p, "fa3", "s.json: training.attention");
    ADD_FAILURE() << "a kernel the profile does not price was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("s.json: training.attention: the profile prices no \"fa3\" attention "
                                         "(its compute.attention_implementations: fa2)"),
              std::string::npos)
        << e.what();
  }
  doc["compute"]["attention_implementations"]["fa2"].erase("source");
  expect_rejected(doc, "compute.attention_implementations.fa2");
  doc["compute"]["attention_implementations"]["fa2"]["source"] = "x";
  doc["compute"]["attention_implementations"]["fa2"]["backwards"] = 2;
  expect_rejected(doc, "backwards");
}

TEST(ProfileJson, UnknownKeysAreErrorsWithTheirPath) {
  auto doc = valid_document();
  doc["compute"]["gemm_efficiency"]["bogus"] = 1;
  expect_rejected(doc, "compute.gemm_efficiency.bogus: unknown key");
  doc = valid_document();
  doc["collectives"][0]["segments"][1]["extra"] = true;
  expect_rejected(doc, "collectives[0].segments[1].extra: unknown key");
  doc = valid_document();
  doc["top"] = 0;
  expect_rejected(doc, "top: unknown key");
}

TEST(ProfileJson, MissingFieldsAreErrors) {
  auto doc = valid_document();
  doc["memory"].erase("reserve_GiB");
  expect_rejected(doc, "memory.reserve_GiB: missing");
  doc = valid_document();
  doc["compute"]["attention_efficiency"].erase("fit_mape");
  expect_rejected(doc, "compute.attention_efficiency.fit_mape: missing");
}

TEST(ProfileJson, CurvesMustBeWellFormed) {
  auto doc = valid_document();
  doc["compute"]["gemm_efficiency"]["tokens"] = {128, 64};
  expect_rejected(doc, "compute.gemm_efficiency.tokens[1]");
  doc = valid_document();
  doc["compute"]["gemm_efficiency"]["efficiency"] = {0.2, 1.5};
  expect_rejected(doc, "compute.gemm_efficiency.efficiency[1]");
  doc = valid_document();
  doc["compute"]["gemm_efficiency"]["efficiency"] = {0.2, 0.5, 0.7};
  expect_rejected(doc, "compute.gemm_efficiency.efficiency: has 3 values for 2");
  doc = valid_document();
  doc["compute"]["attention_efficiency"]["seq_tokens"] = {0, 16384};
  expect_rejected(doc, "compute.attention_efficiency.seq_tokens[0]: must be positive");
  doc = valid_document();
  doc["compute"]["gemm_efficiency"]["tokens"] = nlohmann::json::array();
  doc["compute"]["gemm_efficiency"]["efficiency"] = nlohmann::json::array();
  expect_rejected(doc, "at least one point");
  doc = valid_document();
  doc["compute"]["gemm_efficiency"]["tokens"][0] = "128";
  expect_rejected(doc, "compute.gemm_efficiency.tokens[0]: expected a number");
}

TEST(ProfileJson, ValuesAreRangeChecked) {
  auto doc = valid_document();
  doc["format_version"] = 3;
  expect_rejected(doc, "format_version: unsupported version 3");
  doc = valid_document();
  doc["compute"]["peak_tflops"] = 0;
  expect_rejected(doc, "compute.peak_tflops: must be positive");
  doc = valid_document();
  doc["memory"]["fit_mape"] = -0.1;
  expect_rejected(doc, "memory.fit_mape");
  doc = valid_document();
  doc["memory"]["static_bytes_per_param"]["sharded"] = {0, 12, 14};
  expect_rejected(doc, "memory.static_bytes_per_param.sharded: expected 4 values");
  doc = valid_document();
  doc["provenance"]["calibrated"] = true;
  expect_rejected(doc, "provenance.calibrated: a calibrated profile must name its device and date");
  doc = valid_document();
  doc["gpu"] = 5;
  expect_rejected(doc, "gpu: expected a string");
}

TEST(ProfileJson, CollectivesAreChecked) {
  auto doc = valid_document();
  doc["collectives"][0]["op"] = "broadcast";
  expect_rejected(doc, "collectives[0].op: unknown collective 'broadcast'");
  doc = valid_document();
  doc["collectives"][0]["link"] = "ethernet";
  expect_rejected(doc, "collectives[0].link: unknown link");
  doc = valid_document();
  doc["collectives"][0]["segments"][1]["max_bytes"] = 1e9;
  expect_rejected(doc, "collectives[0].segments[1].max_bytes: the last segment is open-ended");
  doc = valid_document();
  doc["collectives"][0]["segments"][0]["max_bytes"] = nullptr;
  expect_rejected(doc, "collectives[0].segments[0].max_bytes: only the last segment");
  doc = valid_document();
  doc["collectives"][0]["segments"][0]["bus_GBps"] = 0;
  expect_rejected(doc, "collectives[0].segments[0].bus_GBps: must be positive");
  doc = valid_document();
  doc["collectives"][0]["segments"] = nlohmann::json::array();
  expect_rejected(doc, "collectives[0].segments: expected a non-empty array");
  doc = valid_document();
  doc["collectives"][1]["group_size"] = 4;
  expect_rejected(doc, "collectives[1].group_size: send_recv is between 2 GPUs");
  doc = valid_document();
  doc["collectives"][0]["group_size"] = 1;
  expect_rejected(doc, "collectives[0].group_size");
  doc = valid_document();
  doc["collectives"].push_back(doc["collectives"][0]);
  expect_rejected(doc, "collectives[2]: a second all_gather entry on nvlink for group size 8");
  doc = valid_document();
  auto segments = doc["collectives"][0]["segments"];
  doc["collectives"][0]["segments"] = {segments[0], segments[0], segments[1]};
  expect_rejected(doc, "collectives[0].segments[1].max_bytes: must be greater than the previous");
}

TEST(ProfileJson, LoadNamesTheFile) {
  EXPECT_THROW(load_profile("/nonexistent/lcsim/profile.json"), InputError);
  const auto file = std::filesystem::temp_directory_path() / "lcsim_profile_test_bad.json";
  {
    std::FILE* f = std::fopen(file.string().c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("{\"format_version\": 1,", f);
    std::fclose(f);
  }
  try {
    load_profile(file.string());
    ADD_FAILURE() << "accepted truncated JSON";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
  }
  std::filesystem::remove(file);
}

}  // namespace profile_test
}  // namespace lcsim
