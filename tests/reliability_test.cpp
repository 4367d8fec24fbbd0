// Issue #31's cases that the corpus table cannot express: signals to commands that run children, stale temporary
// files, `lcsim-gpu fit`'s command line, and the bound on a search's candidates.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/errors.hpp"
#include "base/files.hpp"
#include "calibrate/fit/fit_command.hpp"
#include "formats/scenario.hpp"
#include "studies/tune.hpp"
#include "tests/command_run_support.hpp"

namespace reliability_test {

namespace fs = std::filesystem;
using lcsim::testing::contains;
using lcsim::testing::read_file;
using Json = nlohmann::json;
const std::string kSourceDir = LCSIM_SOURCE_DIR;

fs::path fresh_dir(const std::string& what) {
  const fs::path dir = fs::temp_directory_path() / ("lcsim-rel-" + what + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

/// Starts `lcsim ARGS` with TMPDIR=`tmp` and its output in `log`, sends `signal` after `delay`, and returns its
/// exit status (-1 when a signal ended it).
int interrupted_run(const std::vector<std::string>& args, const fs::path& tmp, const fs::path& log, int signal,
                    std::chrono::milliseconds delay) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("TMPDIR", tmp.c_str(), 1);
    if (!std::freopen(log.c_str(), "w", stdout) || ::dup2(STDOUT_FILENO, STDERR_FILENO) < 0) ::_exit(127);
    std::vector<char*> argv{const_cast<char*>(LCSIM_BINARY)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(LCSIM_BINARY, argv.data());
    ::_exit(127);
  }
  std::this_thread::sleep_for(delay);
  ::kill(pid, signal);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// Entries of `dir` whose name starts with `prefix`.
int entries_named(const fs::path& dir, const std::string& prefix) {
  int n = 0;
  for (const auto& entry : fs::directory_iterator(dir)) n += entry.path().filename().string().starts_with(prefix);
  return n;
}

/// Processes whose command line mentions `text` (children left running). The pattern brackets its first
/// character, so that the shell running pgrep, whose command line holds the pattern, does not match it.
int processes_mentioning(const std::string& text) {
  const std::string pattern = "[" + text.substr(0, 1) + "]" + text.substr(1);
  return std::atoi(lcsim::testing::run_command("pgrep -f -c '" + pattern + "'").output.c_str());
}

// The children are forks of the command: their command line is the parent's, --work DIR included, so a child left
// running would mention DIR. Nothing is left in TMPDIR either.
TEST(Signals, SigtermToTuneStopsItsChildrenAndLeavesNoTemporaryFolder) {
  const fs::path dir = fresh_dir("tune-signal");
  const int status = interrupted_run({"tune", kSourceDir + "/scenarios/default.json", "--jobs", "2", "--quiet",
                                      "--work", (dir / "work").string()},
                                     dir, dir / "log", SIGTERM, std::chrono::milliseconds(1500));
  EXPECT_EQ(status, 143) << read_file(dir / "log");
  EXPECT_TRUE(contains(read_file(dir / "log"), "interrupted by SIGTERM"));
  EXPECT_EQ(entries_named(dir, "lcsim-tune"), 0);
  EXPECT_EQ(processes_mentioning((dir / "work").string()), 0);
  fs::remove_all(dir);
}

TEST(Signals, SigintToValidateStopsItsChildrenAndLeavesNoTemporaryFolder) {
  const fs::path dir = fresh_dir("validate-signal");
  const int status = interrupted_run({"validate", "--jobs", "2", "--quiet", "--work", (dir / "work").string()}, dir,
                                     dir / "log", SIGINT, std::chrono::milliseconds(800));
  EXPECT_EQ(status, 130) << read_file(dir / "log");
  EXPECT_EQ(entries_named(dir, "lcsim-validate"), 0);
  EXPECT_EQ(processes_mentioning((dir / "work").string()), 0);
  fs::remove_all(dir);
}

TEST(Signals, SigtermToSweepStopsItsChildren) {
  const fs::path dir = fresh_dir("sweep-signal");
  // Points large enough to outlast the signal (5 s here in all; 1024-4096 GPUs took 0.8 s once the platform was
  // built in one zone).
  std::ofstream(dir / "sw.json") << Json{{"name", "g"},
                                         {"base", kSourceDir + "/scenarios/default.json"},
                                         {"mode", "simulate"},
                                         {"axes", {{{"name", "gpus"}, {"values", {4096, 8192, 16384}}}}}}
                                        .dump();
  const int status = interrupted_run({"sweep", (dir / "sw.json").string(), "--out", (dir / "out").string()}, dir,
                                     dir / "log", SIGTERM, std::chrono::milliseconds(1000));
  EXPECT_EQ(status, 143) << read_file(dir / "log");
  EXPECT_EQ(processes_mentioning((dir / "out").string()), 0);
  EXPECT_FALSE(fs::exists(dir / "out" / "sweep.json"));
  fs::remove_all(dir);
}

TEST(AtomicOutput, StaleTemporaryFilesOfGoneProcessesAreRemovedByTheNextWrite) {
  const fs::path dir = fresh_dir("stale");
  char host_buffer[256] = {};
  ::gethostname(host_buffer, sizeof host_buffer - 1);
  std::string host = host_buffer;
  for (char& c : host)
    if (c == '.' || c == '/') c = '_';
  // A process that has ended: its pid names no process any more.
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  const fs::path stale = dir / (".lcsim-tmp." + host + "." + std::to_string(gone) + ".0.results.json");
  const fs::path alive = dir / (".lcsim-tmp." + host + ".1.0.results.json");  // pid 1 is always running
  const fs::path other_host = dir / (".lcsim-tmp.elsewhere." + std::to_string(gone) + ".0.results.json");
  for (const auto& f : {stale, alive, other_host}) std::ofstream(f) << "partial";
  lcsim::write_file_atomically((dir / "out.json").string(), "{}\n");
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(alive));
  EXPECT_TRUE(fs::exists(other_host));  // another host's run may still be writing into a shared folder
  EXPECT_EQ(read_file(dir / "out.json"), "{}\n");
  fs::remove_all(dir);
}

TEST(AtomicOutput, ATargetNameOf255BytesGetsALegalTemporaryName) {
  const fs::path dir = fresh_dir("long-name");
  const std::string name = std::string(250, 'n') + ".json";
  lcsim::write_file_atomically((dir / name).string(), "{}\n");
  EXPECT_EQ(read_file(dir / name), "{}\n");
  fs::remove_all(dir);
}

TEST(TerminalText, EscapesControlBytesAndCutsLongLines) {
  EXPECT_EQ(lcsim::terminal_text("a\x1B[31mb\x07\nc\td"), "a\\x1B[31mb\\x07\nc\td");
  EXPECT_EQ(lcsim::terminal_text(std::string(12, 'x'), 10), "xxxxxxxxxx... (a line of 12 bytes)");
}

TEST(TerminalText, CutsEveryEchoedValueLongerThan160CharactersAroundAnEllipsis) {
  // #55: a 300-character output name was echoed whole, a 100,000-character --policy in 1,042 characters.
  const std::string name = std::string(300, 'a') + ".json";
  const std::string cut = std::string(100, 'a') + "\xE2\x80\xA6" + std::string(53, 'a') + ".json:";
  EXPECT_EQ(lcsim::terminal_text(name + ": cannot open"), cut + " cannot open");
  EXPECT_EQ(lcsim::terminal_text("--policy " + std::string(100000, 'p') + ": no such label"),
            "--policy " + std::string(100, 'p') + "\xE2\x80\xA6" + std::string(58, 'p') + ": no such label");
  const std::string exactly160(160, 'k');
  EXPECT_EQ(lcsim::terminal_text("key " + exactly160 + " x"), "key " + exactly160 + " x");
  // Cut between characters, never inside one: 200 two-byte characters keep whole characters on both sides.
  std::string accents;
  for (int i = 0; i < 200; ++i) accents += "\xC3\xA9";
  const std::string shown = lcsim::terminal_text(accents);
  EXPECT_EQ(shown.size(), 159u * 2 + 3);
  EXPECT_TRUE(shown.starts_with("\xC3\xA9") && shown.ends_with("\xC3\xA9"));
}

TEST(FitCommand, HelpPrintsTheUsageAndPeakTflopsMustBeAPositiveFiniteNumber) {
  std::ostringstream out;
  lcsim::run_fit_command({"--help"}, out);
  EXPECT_TRUE(contains(out.str(), "fit --measurements FILE --out FILE"));
  for (const char* bad : {"0", "-1", "nan", "inf", "1e999", "fast", ""})
    EXPECT_THROW(lcsim::parse_peak_tflops(bad), lcsim::InputError) << bad;
  EXPECT_DOUBLE_EQ(lcsim::parse_peak_tflops("989.5"), 989.5);
  try {
    lcsim::run_fit_command({"--measurements", "m.json", "--out", "o.json", "--peak-tflops", "nan"}, out);
    ADD_FAILURE() << "no InputError";
  } catch (const lcsim::InputError& e) {
    EXPECT_TRUE(contains(e.what(), "--peak-tflops: must be a positive finite number"));
  }
}

TEST(TuneSpace, MoreThanTheCandidateLimitIsRefusedBeforeAnyIsBuilt) {
  Json doc = Json::parse(read_file(kSourceDir + "/scenarios/default.json"));
  doc["profile"] = kSourceDir + "/calibrate/profiles/h100-sxm-default.json";
  doc.erase("tune");
  const lcsim::Scenario scenario = lcsim::scenario_from_json(doc, "s.json");
  lcsim::TuneSpec spec;
  spec.cp = {8};
  spec.tp = {1};
  spec.pp = {1};
  std::vector<Json> seeds;
  for (int i = 0; i <= static_cast<int>(lcsim::kMaxTuneCandidates); ++i) seeds.push_back(i);
  spec.keys = {{"seed", seeds}};
  const auto started = std::chrono::steady_clock::now();
  try {
    lcsim::expand_tune_space(scenario, doc, spec, {});
    ADD_FAILURE() << "no InputError";
  } catch (const lcsim::InputError& e) {
    EXPECT_TRUE(contains(e.what(), "s.json: tune: more than 100000 candidates"));
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), 5.0);
}

}  // namespace reliability_test
