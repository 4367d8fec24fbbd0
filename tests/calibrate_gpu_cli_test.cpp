// The built `lcsim-gpu` binary, where the build has one (CUDA toolkit found): help, exit codes, the no-GPU error,
// and the offline refit. GPU commands run with CUDA_VISIBLE_DEVICES="" so the no-GPU path is what is tested on
// any machine, with or without a GPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <unistd.h>

#include "calibrate/fit/measurements.hpp"
#include "model/profile.hpp"
#include "tests/calibrate_fixtures.hpp"
#include "tests/command_run_support.hpp"

namespace lcsim {
namespace calibrate_gpu_cli_test {

using GpuRun = testing::CommandRun;
using testing::kGpuBinary;

GpuRun run(const std::string& arguments) {
  return testing::run_lcsim_gpu(arguments);
}

class CalibrateGpuCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kGpuBinary)) {
      GTEST_SKIP() << kGpuBinary << " not built (no CUDA toolkit at configure time)";
    }
    dir_ = std::filesystem::temp_directory_path() / ("lcsim-gpu-cli-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
};

TEST_F(CalibrateGpuCli, HelpListsTheCommands) {
  const GpuRun r = run("--help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* part : {"calibrate --model M", "selftest", "bench-attention", "fit --measurements", "exit status"}) {
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;
  }
}

TEST_F(CalibrateGpuCli, WithoutAGpuEveryGpuCommandSaysSoAndExits2) {
  for (const char* command :
       {"calibrate --model Qwen2.5-0.5B", "selftest --seed 3", "bench-attention --model Qwen2.5-7B"}) {
    const GpuRun r = run(command);
    EXPECT_EQ(r.exit_code, 2) << command << "\n" << r.output;
    EXPECT_NE(r.output.find("no usable CUDA GPU"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("run it on a GPU node"), std::string::npos) << r.output;
  }
}

TEST_F(CalibrateGpuCli, BadInputExits2BeforeTouchingTheGpu) {
  GpuRun r = run("calibrate --model NoSuchModel");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown model 'NoSuchModel'"), std::string::npos) << r.output;
  r = run("calibrate");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--model is required"), std::string::npos) << r.output;
  r = run("calibrate --model Qwen2.5-7B --seed x");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--seed: not a valid number"), std::string::npos) << r.output;
  r = run("frobnicate");
  EXPECT_EQ(r.exit_code, 2);
  r = run("");
  EXPECT_EQ(r.exit_code, 2);
}

TEST_F(CalibrateGpuCli, FitRefitsAProfileFromMeasurementsWithoutAGpu) {
  const auto measurements = (dir_ / "m.json").string();
  const auto profile = (dir_ / "p.json").string();
  save_measurements(testing::synthetic_measurements(named_model("Qwen2.5-7B"), 2), measurements);
  const GpuRun r = run("fit --measurements '" + measurements + "' --out '" + profile + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("held-out MAPE"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("all_reduce nvlink n=2"), std::string::npos) << r.output;
  const Profile p = load_profile(profile);
  EXPECT_TRUE(p.provenance.calibrated);
  EXPECT_EQ(p.gpu, "H100-SXM");
  EXPECT_NEAR(p.compute.layer_overhead_us, 55, 1e-6);
  EXPECT_NEAR(p.compute.gemm_work_overhead, 0.15, 1e-9);

  const GpuRun bad = run("fit --measurements '" + (dir_ / "none.json").string() + "' --out '" + profile + "'");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("none.json"), std::string::npos) << bad.output;
}

}  // namespace calibrate_gpu_cli_test
}  // namespace lcsim
