// Sweeps cut into slices (`lcsim sweep --shard K/N`) and merged (`lcsim sweep merge`): K/N parsing, the round-robin
// slices, the slice manifest's checks, and end to end, that the merge writes the one-machine run's files byte for
// byte and reports a missing, duplicated or foreign slice naming its folder.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/errors.hpp"
#include "studies/sweep_shard.hpp"
#include "tests/command_run_support.hpp"

namespace lcsim {
namespace sweep_shard_test {

using Json = nlohmann::json;
using testing::contains;
using testing::read_file;
using testing::run_lcsim;
namespace fs = std::filesystem;
const std::string kDefaultScenario = std::string(LCSIM_SOURCE_DIR) + "/scenarios/default.json";

TEST(SweepShard, ParsesOneBasedKOfN) {
  const auto one = parse_sweep_shard("1/1");
  ASSERT_TRUE(one);
  EXPECT_EQ(one->index, 1);
  EXPECT_EQ(one->count, 1);
  const auto last = parse_sweep_shard("12/12");
  ASSERT_TRUE(last);
  EXPECT_EQ(last->index, 12);
  for (const char* bad : {"0/4", "5/4", "4", "/4", "4/", "1/0", "-1/2", "+1/2", " 1/2", "1/2 ", "1/2/3", "a/b", "1.0/2",
                          "99999999999/99999999999"})
    EXPECT_FALSE(parse_sweep_shard(bad)) << bad;
}

TEST(SweepShard, SlicesAreRoundRobinAndCoverEveryPointOnce) {
  for (int n = 1; n <= 7; ++n)
    for (std::size_t i = 0; i < 20; ++i) {
      int owners = 0;
      for (int k = 1; k <= n; ++k) owners += in_sweep_shard(i, SweepShard{k, n}) ? 1 : 0;
      EXPECT_EQ(owners, 1) << i << " of " << n;
      EXPECT_TRUE(in_sweep_shard(i, SweepShard{static_cast<int>(i % static_cast<std::size_t>(n)) + 1, n}));
    }
}

SweepShardManifest manifest_of(int k, int n, int total) {
  SweepShardManifest m;
  m.sweep_file = "s.json";
  m.sweep_digest = "fnv1a64:0000000000000001";
  m.shard = {k, n};
  m.points_total = total;
  m.sweep = Json{{"name", "t"}};
  for (int i = k - 1; i < total; i += n) m.points.push_back({i, 0, "fnv1a64:0000000000000002"});
  return m;
}

std::string merge_error(const std::vector<SweepShardFolder>& slices) {
  try {
    check_sweep_shards(slices);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no InputError";
}

TEST(SweepShard, ManifestRoundTripsAndRefusesPointsOfOtherSlices) {
  const SweepShardManifest m = manifest_of(2, 3, 7);
  const Json doc = Json::parse(shard_manifest_to_json(m).dump());
  const SweepShardManifest back = shard_manifest_from_json(doc, "d/shard.json");
  EXPECT_EQ(back.sweep_file, "s.json");
  EXPECT_EQ(back.shard.index, 2);
  EXPECT_EQ(back.shard.count, 3);
  ASSERT_EQ(back.points.size(), 2U);  // points 1 and 4
  EXPECT_EQ(back.points[1].index, 4);
  EXPECT_EQ(back.sweep, m.sweep);

  Json foreign = doc;
  foreign["points"][0]["index"] = 0;
  const auto error = [](const Json& d) {
    try {
      shard_manifest_from_json(d, "d/shard.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no InputError");
  };
  EXPECT_TRUE(contains(error(foreign), "d/shard.json: points[0].index: point 0 is not in slice 2 of 3"));
  Json twice = doc;
  twice["points"][1]["index"] = 1;
  EXPECT_TRUE(contains(error(twice), "point 1 is listed twice"));
  Json k_beyond_n = doc;
  k_beyond_n["shard"] = 4;
  EXPECT_TRUE(contains(error(k_beyond_n), "d/shard.json: shard: must be in [1, 3]"));
  Json schema = doc;
  schema["schema"] = "lcsim-sweep/1";
  EXPECT_TRUE(contains(error(schema), "expected \"lcsim-sweep-shard/1\""));
}

TEST(SweepShard, MergeChecksNameTheFolders) {
  const std::vector<SweepShardFolder> whole = {
      {"a", manifest_of(1, 3, 7)}, {"b", manifest_of(2, 3, 7)}, {"c", manifest_of(3, 3, 7)}};
  EXPECT_EQ(merge_error(whole), "no InputError");
  EXPECT_EQ(merge_error({whole[2], whole[0]}),
            "sweep merge: slice 2 of 3 missing: no folder given holds it "
            "(a slice's folder has shard.json once its run ends)");
  EXPECT_TRUE(contains(merge_error({whole[0]}), "slices 2, 3 of 3 missing"));
  EXPECT_EQ(merge_error({whole[0], whole[1], {"b2", whole[1].manifest}, whole[2]}),
            "b2 (slice 2 of 3): duplicated, b is slice 2 of 3 too");
  EXPECT_TRUE(contains(merge_error({whole[0], {"x", manifest_of(2, 4, 7)}}),
                       "x (slice 2 of 4): the sweep was cut into 4 slices there, but into 3 in a"));
  SweepShardManifest other = manifest_of(2, 3, 7);
  other.sweep_digest = "fnv1a64:00000000000000ff";
  EXPECT_TRUE(
      contains(merge_error({whole[0], {"y", other}, whole[2]}), "y (slice 2 of 3): a slice of a different sweep"));
  other = manifest_of(2, 3, 7);
  other.sweep_file = "./s.json";
  EXPECT_TRUE(contains(merge_error({whole[0], {"z", other}, whole[2]}), "give every slice the same SWEEP path"));
  other = manifest_of(2, 3, 7);
  other.points.pop_back();
  EXPECT_EQ(merge_error({whole[0], {"w", other}, whole[2]}),
            "w (slice 2 of 3): point 4 of 7 is missing from its shard.json");
}

class SweepShardCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lcsim-shard-test-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    // Five points, so that three slices are uneven and seven leave two empty.
    std::ofstream(path("sweep.json")) << R"({"name": "t", "base": ")" << kDefaultScenario
                                      << R"(", "mode": "plan", "iterations": 2, "axes": [
        {"name": "gpus", "values": [8, 16, 32, 64, 128]}]})";
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string sweep() const { return "'" + path("sweep.json") + "'"; }
  // Slices 1..n of the sweep into DIR/shard-K.
  void run_slices(int n) {
    for (int k = 1; k <= n; ++k) {
      const auto run = run_lcsim("sweep " + sweep() + " --shard " + std::to_string(k) + "/" + std::to_string(n) +
                                 " --out '" + path("shard-" + std::to_string(k)) + "'");
      ASSERT_EQ(run.exit_code, 0) << run.output;
    }
  }
  std::string slice_folders(std::vector<int> ks) const {
    std::string folders;
    for (int k : ks) folders += " '" + path("shard-" + std::to_string(k)) + "'";
    return folders;
  }
  fs::path dir_;
};

// The one-machine run into OUT, its files kept aside; then the merge into the same OUT must write the same bytes.
TEST_F(SweepShardCli, MergedSlicesAreTheOneMachineRunByteForByte) {
  const auto one = run_lcsim("sweep " + sweep() + " --out '" + path("out") + "' --jobs 2");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  fs::rename(path("out"), path("one"));
  for (int n : {3, 7}) {
    SCOPED_TRACE(n);
    fs::remove_all(path("out"));
    for (int k = 1; k <= 7; ++k) fs::remove_all(path("shard-" + std::to_string(k)));
    run_slices(n);
    if (n == 7) {
      EXPECT_TRUE(contains(read_file(path("shard-6/shard.json")), "\"points\": []"));
    }
    std::vector<int> reversed;
    for (int k = n; k >= 1; --k) reversed.push_back(k);
    const auto merged = run_lcsim("sweep merge" + slice_folders(reversed) + " --out '" + path("out") + "'");
    ASSERT_EQ(merged.exit_code, 0) << merged.output;
    EXPECT_EQ(merged.output, one.output);  // the summary table, and "wrote OUT/sweep.csv and OUT/sweep.json"
    for (const char* file : {"sweep.csv", "sweep.json", "point-0000.json", "point-0004.results.json", "point-0003.log"})
      EXPECT_EQ(read_file(path(std::string("out/") + file)), read_file(path(std::string("one/") + file))) << file;
    EXPECT_FALSE(read_file(path("out/sweep.json")).empty());
  }
}

TEST_F(SweepShardCli, DefaultFoldersNestTheSlicesUnderTheSweepsOutFolder) {
  const std::string in_dir = "cd '" + dir_.string() + "' && '" + std::string(LCSIM_BINARY) + "' ";
  for (const char* k : {"1/2", "2/2"}) {
    const auto run = testing::run_command(in_dir + "sweep sweep.json --quiet --shard " + k);
    ASSERT_EQ(run.exit_code, 0) << run.output;
  }
  EXPECT_TRUE(fs::exists(path("sweep.out/shard-2/shard.json")));
  const auto merged = testing::run_command(in_dir + "sweep merge sweep.out/shard-1 sweep.out/shard-2 --quiet");
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  const auto json = Json::parse(read_file(path("sweep.out/sweep.json")));
  EXPECT_EQ(json["sweep_file"], "sweep.json");
  EXPECT_EQ(json["points"][4]["scenario_file"], "sweep.out/point-0004.json");
  EXPECT_EQ(json["points"][4]["results"]["scenario_file"], "sweep.out/point-0004.json");
}

TEST_F(SweepShardCli, MissingDuplicatedOrForeignSlicesAreReported) {
  run_slices(3);
  auto run = run_lcsim("sweep merge" + slice_folders({1, 3}) + " --out '" + path("out") + "'");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, "slice 2 of 3 missing"));
  EXPECT_FALSE(fs::exists(path("out/sweep.csv")));

  fs::copy(path("shard-2"), path("shard-9"));
  run = run_lcsim("sweep merge" + slice_folders({1, 2, 9, 3}));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, path("shard-9") + " (slice 2 of 3): duplicated, " + path("shard-2")));

  // A slice folder that never finished (no shard.json), and one of a differently cut sweep.
  fs::remove(path("shard-9/shard.json"));
  run = run_lcsim("sweep merge" + slice_folders({1, 2, 3, 9}));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, path("shard-9") + ": no shard.json"));
  ASSERT_EQ(run_lcsim("sweep " + sweep() + " --shard 2/2 --quiet --out '" + path("half") + "'").exit_code, 0);
  run = run_lcsim("sweep merge" + slice_folders({1}) + " '" + path("half") + "'");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, path("half") + " (slice 2 of 2): the sweep was cut into 2 slices there"));

  // The same sweep file whose base changed between slices is another sweep.
  std::ofstream(path("sweep.json")) << R"({"name": "t", "base": ")" << kDefaultScenario
                                    << R"(", "mode": "plan", "iterations": 3, "axes": [
      {"name": "gpus", "values": [8, 16, 32, 64, 128]}]})";
  ASSERT_EQ(run_lcsim("sweep " + sweep() + " --shard 2/3 --quiet --out '" + path("shard-2") + "'").exit_code, 0);
  run = run_lcsim("sweep merge" + slice_folders({1, 2, 3}));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, "a slice of a different sweep"));

  // A point's scenario edited after its slice ran.
  ASSERT_EQ(run_lcsim("sweep " + sweep() + " --shard 1/1 --quiet --out '" + path("all") + "'").exit_code, 0);
  auto scenario = Json::parse(read_file(path("all/point-0001.json")));
  scenario["training"]["iterations"] = 1;
  std::ofstream(path("all/point-0001.json")) << scenario.dump(2) << "\n";
  run = run_lcsim("sweep merge '" + path("all") + "' --out '" + path("out") + "'");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, path("all/point-0001.json") + ": not the scenario that"));
}

TEST_F(SweepShardCli, BadShardOptionsAreUsageErrors) {
  for (const char* bad : {"0/2", "3/2", "2", "x/2", "1/0"}) {
    const auto run = run_lcsim("sweep " + sweep() + " --shard " + bad + " --out '" + path("x") + "'");
    EXPECT_EQ(run.exit_code, 2) << bad;
    EXPECT_TRUE(contains(run.output, "--shard expects K/N with 1 <= K <= N")) << bad;
  }
  auto run = run_lcsim("sweep " + sweep() + " --shard 1/2 --csv '" + path("x.csv") + "'");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, "written by `lcsim sweep merge`"));
  run = run_lcsim("sweep merge");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, "no slice folders given"));
  run = run_lcsim("sweep --help");
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_TRUE(contains(run.output, "1-based like SLURM_ARRAY_TASK_ID"));
  run_slices(1);
  run = run_lcsim("sweep merge" + slice_folders({1}) + " --out '" + path("shard-1") + "'");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, "is the slice folder"));
}

// A point whose process fails: the slice reports it as the one-machine run does, and the merge reports the same
// message with the same exit status.
TEST_F(SweepShardCli, FailedPointsCarryThroughTheMerge) {
  auto base = Json::parse(read_file(kDefaultScenario));
  base["profile"] = path("missing-profile.json");
  std::ofstream(path("base.json")) << base.dump();
  std::ofstream(path("sweep.json")) << R"({"name": "t", "base": "base.json", "mode": "plan",
      "axes": [{"name": "gpus", "values": [8, 16, 32]}]})";
  const auto one = run_lcsim("sweep " + sweep() + " --out '" + path("out") + "'");
  ASSERT_NE(one.exit_code, 0);
  EXPECT_TRUE(contains(one.output, "point 2: exit"));
  fs::rename(path("out"), path("one"));
  for (int k = 1; k <= 2; ++k) {
    const auto slice = run_lcsim("sweep " + sweep() + " --shard " + std::to_string(k) + "/2 --out '" +
                                 path("shard-" + std::to_string(k)) + "'");
    EXPECT_EQ(slice.exit_code, one.exit_code);
    EXPECT_TRUE(contains(slice.output, "points failed"));
    EXPECT_TRUE(fs::exists(path("shard-" + std::to_string(k) + "/shard.json")));
  }
  const auto merged = run_lcsim("sweep merge" + slice_folders({1, 2}) + " --out '" + path("out") + "'");
  EXPECT_EQ(merged.exit_code, one.exit_code);
  EXPECT_EQ(merged.output, one.output);
  EXPECT_EQ(read_file(path("out/point-0002.log")), read_file(path("one/point-0002.log")));
  EXPECT_FALSE(fs::exists(path("out/sweep.csv")));
}

}  // namespace sweep_shard_test
}  // namespace lcsim
