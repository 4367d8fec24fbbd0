// The measurements file lcsim-gpu calibrate writes next to a profile ("lcsim-measurements/1").
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <unistd.h>

#include "base/errors.hpp"
#include "calibrate/fit/measurements.hpp"
#include "tests/calibrate_fixtures.hpp"

namespace lcsim {
namespace calibrate_measurements_test {

nlohmann::json as_json(const Measurements& m) {
  return nlohmann::json::parse(measurements_to_json(m).dump());
}

/// The InputError message of reading `document`, or "" when it reads fine.
std::string read_error(const nlohmann::json& document) {
  try {
    measurements_from_json(document, "m.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(CalibrateMeasurementsJson, RoundTripsPublishedShapesLinksAndMissingBackward) {
  Measurements m = testing::synthetic_measurements(named_model("Qwen2.5-7B"), 2);
  m.published = "docs/published-measurements/SOURCES.md";
  m.gemm.push_back({2048, {1e-3, 1e-3, 0}, std::nullopt, 8192, 8192});
  m.attention.push_back({4096, 4, {2e-3, 2e-3, 0}, std::nullopt, 2048});
  m.collectives.push_back({CollectiveOp::AllToAll, 80, {{1 << 25, 1e-3}, {1 << 26, 2e-3}}, LinkClass::InfiniBand});
  const nlohmann::json j = as_json(m);
  EXPECT_FALSE(j["gemm"].back().contains("backward"));
  EXPECT_FALSE(j["gemm"].front().contains("n"));  // a layer sweep point has no shape of its own
  EXPECT_FALSE(j["collectives"].front().contains("link"));
  const Measurements back = measurements_from_json(j, "m.json");
  EXPECT_EQ(back.published, m.published);
  EXPECT_EQ(back.gemm.back().n, 8192);
  EXPECT_EQ(back.gemm.back().k, 8192);
  EXPECT_FALSE(back.gemm.back().backward);
  EXPECT_TRUE(back.gemm.front().backward);
  EXPECT_EQ(back.attention.back().q_hidden, 2048);
  EXPECT_FALSE(back.attention.back().backward);
  EXPECT_EQ(back.collectives.back().link, LinkClass::InfiniBand);
  EXPECT_EQ(back.collectives.front().link, LinkClass::NvLink);
  // A shape needs both of its sides, and a link must be one lcsim knows.
  nlohmann::json half = j;
  half["gemm"].back().erase("k");
  EXPECT_NE(read_error(half).find("gemm[" + std::to_string(m.gemm.size() - 1) + "].k"), std::string::npos)
      << read_error(half);
  nlohmann::json ethernet = j;
  ethernet["collectives"].back()["link"] = "ethernet";
  EXPECT_NE(read_error(ethernet).find("unknown link 'ethernet'"), std::string::npos) << read_error(ethernet);
}

TEST(CalibrateMeasurementsJson, RoundTripsEveryField) {
  const Measurements m = testing::synthetic_measurements(named_model("Qwen2.5-7B"), 2);
  const Measurements back = measurements_from_json(as_json(m), "m.json");
  EXPECT_EQ(back.device.name, m.device.name);
  EXPECT_EQ(back.device.gpu_kind, "H100-SXM");
  EXPECT_EQ(back.device.count, 2);
  EXPECT_EQ(back.device.date, m.device.date);
  EXPECT_EQ(back.device.nccl, "2.28.9");
  EXPECT_EQ(back.model, "Qwen2.5-7B");
  EXPECT_EQ(back.repetitions, 20);
  ASSERT_EQ(back.gemm.size(), m.gemm.size());
  EXPECT_EQ(back.gemm[3].tokens, m.gemm[3].tokens);
  ASSERT_TRUE(back.gemm[3].backward);
  EXPECT_DOUBLE_EQ(back.gemm[3].backward->kernel_seconds, m.gemm[3].backward->kernel_seconds);
  EXPECT_EQ(back.gemm[3].forward.kernels, 4);
  ASSERT_EQ(back.attention.size(), m.attention.size());
  EXPECT_EQ(back.attention[0].sequences, 256);
  ASSERT_EQ(back.layers.size(), m.layers.size());
  EXPECT_EQ(back.layers[5].seqlens, m.layers[5].seqlens);
  EXPECT_EQ(back.layers[5].recompute, m.layers[5].recompute);
  ASSERT_EQ(back.memory.size(), m.memory.size());
  EXPECT_EQ(back.memory[4].peak_bytes, m.memory[4].peak_bytes);
  ASSERT_EQ(back.collectives.size(), m.collectives.size());
  EXPECT_EQ(back.collectives.back().op, CollectiveOp::SendRecv);
  EXPECT_DOUBLE_EQ(back.collectives[0].samples[7].seconds, m.collectives[0].samples[7].seconds);
  ASSERT_EQ(back.ulysses.size(), 3u);
  EXPECT_EQ(back.optimizer.size(), 5u);
  EXPECT_EQ(as_json(back), as_json(m));
}

TEST(CalibrateMeasurementsJson, FilesRoundTripAndNameTheFileOnErrors) {
  const auto dir = std::filesystem::temp_directory_path() / ("lcsim-measurements-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "m.json").string();
  Measurements m = testing::synthetic_measurements(named_model("Qwen2.5-0.5B"), 1);
  m.warnings = {"skipped: something"};
  save_measurements(m, file);
  const Measurements back = load_measurements(file);
  EXPECT_EQ(back.warnings, m.warnings);
  EXPECT_EQ(back.memory.size(), m.memory.size());
  try {
    load_measurements((dir / "missing.json").string());
    FAIL() << "no error for a missing file";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.json"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(CalibrateMeasurementsJson, UnknownAndMissingKeysAreErrorsWithTheirPath) {
  const nlohmann::json good = as_json(testing::synthetic_measurements(named_model("Qwen2.5-0.5B"), 1));
  EXPECT_EQ(read_error(good), "");
  auto extra = good;
  extra["gemm"][0]["forward"]["median"] = 1;
  EXPECT_NE(read_error(extra).find("m.json: gemm[0].forward.median"), std::string::npos) << read_error(extra);
  auto missing = good;
  missing["device"].erase("date");
  EXPECT_NE(read_error(missing).find("device.date: missing required field"), std::string::npos);
  auto format = good;
  format["format"] = "lcsim-measurements/2";
  EXPECT_NE(read_error(format).find("format"), std::string::npos);
}

TEST(CalibrateMeasurementsJson, ValuesAreChecked) {
  const nlohmann::json good = as_json(testing::synthetic_measurements(named_model("Qwen2.5-0.5B"), 2));
  auto negative = good;
  negative["attention"][2]["backward"]["kernel_s"] = -1e-3;
  EXPECT_NE(read_error(negative).find("attention[2].backward.kernel_s"), std::string::npos);
  auto mode = good;
  mode["layers"][0]["recompute"] = "partial";
  EXPECT_NE(read_error(mode).find("unknown recomputation 'partial'"), std::string::npos);
  auto op = good;
  op["collectives"][0]["op"] = "broadcast";
  EXPECT_NE(read_error(op).find("collectives[0].op: unknown collective 'broadcast'"), std::string::npos);
  auto lengths = good;
  lengths["memory"][1]["peak_bytes"].erase(0);
  EXPECT_NE(read_error(lengths).find("memory[1].peak_bytes: needs one value per entry of layers"), std::string::npos);
  auto seqlen = good;
  seqlen["layers"][3]["seqlens"][0] = 0;
  EXPECT_NE(read_error(seqlen).find("layers[3].seqlens[0]"), std::string::npos);
  auto group = good;
  group["collectives"][0]["group_size"] = 1;
  EXPECT_NE(read_error(group).find("collectives[0].group_size"), std::string::npos);
}

TEST(CalibrateMeasurementsJson, NamesParse) {
  EXPECT_EQ(parse_recompute("selective", "x"), Recompute::Selective);
  EXPECT_EQ(parse_collective_op("all_to_all", "x"), CollectiveOp::AllToAll);
  EXPECT_THROW(parse_collective_op("alltoall", "x"), InputError);
}

}  // namespace calibrate_measurements_test
}  // namespace lcsim
