#pragma once
// Running the built binaries from tests: `lcsim` and `lcsim-gpu` (cli/; lcsim-gpu built only with CUDA).
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

namespace lcsim::testing {

/// The whole text of `file` ("" when it cannot be read): what a command wrote.
inline std::string read_file(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Success when `text` contains `part`; the failure message shows the whole text.
inline ::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << part << "\" not found in:\n" << text;
}

/// A fresh folder for each test, temp/PREFIX-PID-TESTNAME, removed after it: the fixture of the CLI tests.
class FolderTest : public ::testing::Test {
 protected:
  explicit FolderTest(std::string prefix) : prefix_(std::move(prefix)) {}
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / (prefix_ + std::to_string(::getpid()) + "-" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;

 private:
  std::string prefix_;
};

struct CommandRun {
  int exit_code = -1;  ///< -1 when the command could not run or did not exit normally
  std::string output;  ///< stdout and stderr together
};

/// Runs `command` through the shell with stderr folded into stdout. Progress is off (LCSIM_PROGRESS=none) unless
/// the environment or the command sets it: a pipe gets `lcsim-progress` lines once a run passes 2 s, which would
/// make outputs depend on the machine's speed.
inline CommandRun run_command(const std::string& command) {
  CommandRun run;
  const std::string quiet = "LCSIM_PROGRESS=\"${LCSIM_PROGRESS:-none}\"; export LCSIM_PROGRESS; ";
  FILE* pipe = ::popen((quiet + command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) run.output.append(buffer, n);
  const int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

/// `lcsim ARGUMENTS` (arguments are passed to the shell as written: quote paths).
inline CommandRun run_lcsim(const std::string& arguments) {
  return run_command("'" + std::string(LCSIM_BINARY) + "' " + arguments);
}

/// lcsim-gpu sits beside lcsim, in <build>/bin.
inline const std::filesystem::path kGpuBinary = std::filesystem::path(LCSIM_BINARY).parent_path() / "lcsim-gpu";

/// `lcsim-gpu ARGUMENTS` with no GPU visible, as on a machine without one.
inline CommandRun run_lcsim_gpu(const std::string& arguments) {
  return run_command("CUDA_VISIBLE_DEVICES= '" + kGpuBinary.string() + "' " + arguments);
}

}  // namespace lcsim::testing
