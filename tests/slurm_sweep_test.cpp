// tools/slurm/ on a real, if local, Slurm: a one-node cluster started by tests/slurm_local_sweep.sh (as root, with
// Debian's slurm-wlm and munge: tools/setup.sh --with-slurm) runs a small sweep as a job array plus its merge job,
// and the merged files must be those of the one-machine run. Skipped, saying why, where that cannot run.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/command_run_support.hpp"

namespace slurm_sweep_test {

namespace fs = std::filesystem;
using lcsim::testing::read_file;
using lcsim::testing::run_command;
using lcsim::testing::run_lcsim;

bool on_path(const std::string& program) {
  return run_command("command -v '" + program + "' >/dev/null").exit_code == 0;
}

TEST(SlurmSweep, JobArrayAndMergeJobGiveTheOneMachineFiles) {
  for (const char* program : {"slurmctld", "slurmd", "munged", "munge", "sbatch", "scontrol", "sinfo"})
    if (!on_path(program)) GTEST_SKIP() << "slurm-wlm and munge not installed (tools/setup.sh --with-slurm)";
  if (::geteuid() != 0) GTEST_SKIP() << "the local Slurm cluster needs root (its daemons run as root)";

  const fs::path work = fs::temp_directory_path() / ("lcsim-slurm-test-" + std::to_string(::getpid()));
  fs::remove_all(work);
  fs::create_directories(work);
  const std::string sweep = (work / "sweep.json").string();
  std::ofstream(sweep) << R"({"name": "slurm", "base": ")" << LCSIM_SOURCE_DIR << R"(/scenarios/default.json",
      "mode": "plan", "iterations": 2, "axes": [{"name": "gpus", "values": [8, 16, 32]}]})";

  // Three points in two slices: one slice holds two points, the other one.
  const auto cluster = run_command("'" + std::string(LCSIM_SOURCE_DIR) + "/tests/slurm_local_sweep.sh' '" +
                                   work.string() + "' '" + LCSIM_BINARY + "' '" + sweep + "' 2 120");
  ASSERT_EQ(cluster.exit_code, 0) << cluster.output;
  const fs::path out = work / "out";
  std::string logs;
  for (const auto& entry : fs::directory_iterator(out))
    if (entry.path().filename().string().rfind("slurm-", 0) == 0)
      logs += "--- " + entry.path().string() + "\n" + read_file(entry.path());
  ASSERT_TRUE(fs::exists(out / "sweep.json")) << cluster.output << logs;
  EXPECT_TRUE(fs::exists(out / "shard-1" / "shard.json"));
  EXPECT_TRUE(fs::exists(out / "shard-2" / "shard.json"));

  // The one-machine run into the same folder name, the merged files moved aside first.
  fs::rename(out, work / "merged");
  const auto one = run_lcsim("sweep '" + sweep + "' --out '" + out.string() + "' --quiet");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  for (const char* file : {"sweep.csv", "sweep.json"}) {
    const std::string merged = read_file(work / "merged" / file);
    EXPECT_FALSE(merged.empty()) << file;
    EXPECT_EQ(merged, read_file(out / file)) << file;
  }
  fs::remove_all(work);
}

}  // namespace slurm_sweep_test
