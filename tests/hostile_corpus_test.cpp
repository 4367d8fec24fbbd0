// Runs tests/hostile_corpus.txt (issue #31): each case a shell command on fresh fixtures, with the exit status and
// the words its output must (or must not) hold. Every case's output is also short and free of raw control bytes:
// whatever it quotes, lcsim's messages reach the terminal cut and escaped. Where the Python package is built, every
// `$LCSIM plan|simulate` case runs again through it (tests/hostile_corpus_python.py, issue #55) and must end the
// same way, with the same words, no traceback and no JSON library id; cases written for the package ($LCSIM_PY)
// run only there. No case may run longer than kCaseSeconds: a hang fails it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/command_run_support.hpp"

namespace hostile_corpus_test {

namespace fs = std::filesystem;
using lcsim::testing::read_file;
using Json = nlohmann::json;
const std::string kSourceDir = LCSIM_SOURCE_DIR;
#ifdef LCSIM_PYTHON_DRIVER
/// The Python package's driver: "PYTHON tests/hostile_corpus_python.py", run with PYTHONPATH=LCSIM_PYTHON_PATH.
const std::string kPythonDriver = LCSIM_PYTHON_DRIVER;
const std::string kPythonPath = LCSIM_PYTHON_PATH;
#else
const std::string kPythonDriver;
const std::string kPythonPath;
#endif
/// What the driver prints for a command line the package has no counterpart for (another option).
const std::string kNotApplicable = "lcsim (python): not applicable";
/// The longest a case may run; `timeout` ends it (exit 124) and the case fails as a hang.
constexpr int kCaseSeconds = 120;

struct CorpusCase {
  std::string name;
  std::string command;
  int exit_status = 0;
  std::vector<std::string> words;
  int line = 0;
};

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(' ');
  const auto last = text.find_last_not_of(' ');
  return first == std::string::npos ? "" : text.substr(first, last - first + 1);
}

/// `text` split at every `separator`, each part trimmed.
std::vector<std::string> split(const std::string& text, const std::string& separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = text.find(separator, start);
    parts.push_back(trimmed(text.substr(start, end == std::string::npos ? std::string::npos : end - start)));
    if (end == std::string::npos) return parts;
    start = end + separator.size();
  }
}

std::vector<CorpusCase> load_corpus() {
  std::ifstream in(kSourceDir + "/tests/hostile_corpus.txt");
  std::vector<CorpusCase> cases;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    // The command may hold " | " itself (a pipe): the name is the first field, the exit and words the last two.
    const std::size_t first = line.find(" | ");
    const std::size_t last = line.rfind(" | ");
    const std::size_t middle = line.rfind(" | ", last - 1);
    if (first == std::string::npos || middle == std::string::npos || middle <= first) {
      ADD_FAILURE() << "tests/hostile_corpus.txt:" << number << ": expected case | command | exit | words";
      continue;
    }
    CorpusCase c;
    c.name = trimmed(line.substr(0, first));
    c.command = trimmed(line.substr(first + 3, middle - first - 3));
    c.exit_status = std::stoi(line.substr(middle + 3, last - middle - 3));
    for (const auto& word : split(line.substr(last + 3), ";;"))
      if (!word.empty()) c.words.push_back(word);
    c.line = number;
    cases.push_back(std::move(c));
  }
  return cases;
}

class HostileCorpus : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lcsim-corpus-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  /// The fixtures every case starts from, in a fresh folder `case_dir`.
  void write_fixtures(const fs::path& case_dir) {
    fs::create_directories(case_dir);
    fs::copy_file(kSourceDir + "/calibrate/profiles/h100-sxm-default.json", case_dir / "p.json");
    std::ofstream(case_dir / "s.json") << base_scenario().dump(2);
    std::ofstream(case_dir / "sw.json") << Json{{"name", "g"},
                                                {"base", "s.json"},
                                                {"mode", "plan"},
                                                {"axes", {{{"name", "gpus"}, {"values", {8, 16}}}}}}
                                               .dump();
  }
  static Json base_scenario() {
    Json doc = Json::parse(read_file(kSourceDir + "/scenarios/default.json"));
    doc["profile"] = "p.json";
    doc["training"]["iterations"] = 1;
    doc["training"]["global_batch_sequences"] = 32;
    doc["policies"] = Json::array({{{"kind", "deepspeed"}}});
    doc.erase("tune");
    return doc;
  }

  /// The command with every {scenario PATCH} and {profile PATCH} replaced by the path of a file written for it.
  std::string expand(std::string command, const fs::path& case_dir) {
    int written = 0;
    for (const std::string kind : {"{scenario ", "{profile "}) {
      for (std::size_t at; (at = command.find(kind)) != std::string::npos;) {
        // The patch is the JSON object after the kind; the fixture ends at the brace that closes it.
        std::size_t end = at + kind.size();
        int depth = 0;
        for (; end < command.size(); ++end) {
          if (command[end] == '{') ++depth;
          if (command[end] == '}' && --depth == 0) break;
        }
        const Json patch = Json::parse(command.substr(at + kind.size(), end + 1 - at - kind.size()));
        Json scenario = base_scenario();
        const std::string name = "fixture-" + std::to_string(written++);
        if (kind == "{profile ") {
          Json profile = Json::parse(read_file(case_dir / "p.json"));
          profile.merge_patch(patch);
          std::ofstream(case_dir / (name + ".profile.json")) << profile.dump(2);
          scenario["profile"] = name + ".profile.json";
        } else {
          scenario.merge_patch(patch);
        }
        std::ofstream(case_dir / (name + ".json")) << scenario.dump(2);
        command.replace(at, end + 2 - at, name + ".json");
      }
    }
    return command;
  }

  /// Runs `command` (a case's, expanded) in a fresh folder `case_dir`, with $LCSIM and $LCSIM_PY set.
  lcsim::testing::CommandRun run_case(const std::string& command, const fs::path& case_dir) {
    write_fixtures(case_dir);
    std::ofstream(case_dir / "case.sh") << expand(command, case_dir) << "\n";
    return lcsim::testing::run_command("cd '" + case_dir.string() + "' && LCSIM='" + std::string(LCSIM_BINARY) +
                                       "' LCSIM_PY='" + kPythonDriver + "' PYTHONPATH='" + kPythonPath +
                                       "' timeout -k 5 " + std::to_string(kCaseSeconds) + " sh case.sh");
  }

  fs::path dir_;
};

/// The case's command with the Python package in place of the command line: every `$LCSIM ` is a `plan` or
/// `simulate`; "" when the case runs another command, or the package already.
std::string through_python(const std::string& command) {
  const std::string cli = "$LCSIM ";
  const std::string package = "$LCSIM_PY ";
  if (command.find("$LCSIM_PY") != std::string::npos) return "";
  std::string out = command;
  std::size_t found = 0;
  for (std::size_t at = 0; (at = out.find(cli, at)) != std::string::npos; ++found) {
    const std::string rest = out.substr(at + cli.size());
    if (!rest.starts_with("plan ") && !rest.starts_with("simulate ")) return "";
    out.replace(at, cli.size(), package);
    at += package.size();
  }
  return found > 0 ? out : "";
}

/// The exit status and the words a case expects of `run`, and what every case's output must be: short, free of
/// raw control bytes, not a hang.
void expect_case(const CorpusCase& c, const lcsim::testing::CommandRun& run) {
  EXPECT_NE(run.exit_code, 124) << "ran longer than " << kCaseSeconds << " s: " << run.output.substr(0, 4000);
  EXPECT_EQ(run.exit_code, c.exit_status) << run.output.substr(0, 4000);
  for (const auto& word : c.words) {
    if (word[0] == '!')
      EXPECT_EQ(run.output.find(word.substr(1)), std::string::npos) << "must not hold " << word << ":\n"
                                                                    << run.output.substr(0, 4000);
    else
      EXPECT_NE(run.output.find(word), std::string::npos) << "must hold " << word << ":\n"
                                                          << run.output.substr(0, 4000);
  }
  EXPECT_LT(run.output.size(), 4000u) << run.output.substr(0, 4000);
  EXPECT_EQ(run.output.find_first_of("\x1B\x07"), std::string::npos) << run.output.substr(0, 4000);
}

TEST_F(HostileCorpus, EveryCaseExitsAsExpectedWithItsWords) {
  const std::vector<CorpusCase> cases = load_corpus();
  ASSERT_GE(cases.size(), 30u);
  int through_package = 0;
  for (const CorpusCase& c : cases) {
    SCOPED_TRACE("tests/hostile_corpus.txt:" + std::to_string(c.line) + ": " + c.name);
    const bool package_case = c.command.find("$LCSIM_PY") != std::string::npos;
    if (package_case && kPythonDriver.empty()) continue;  // the package is not built
    const auto run = run_case(c.command, dir_ / c.name);
    expect_case(c, run);
    if (kPythonDriver.empty()) continue;
    lcsim::testing::CommandRun python = run;
    if (!package_case) {
      const std::string command = through_python(c.command);
      if (command.empty()) continue;
      SCOPED_TRACE("through the Python package: " + command);
      python = run_case(command, dir_ / (c.name + ".py"));
      if (python.output.find(kNotApplicable) != std::string::npos) continue;
      expect_case(c, python);
    }
    ++through_package;
    // Whatever the input, the package raises its own exceptions with the engine's words: never a crash's
    // traceback, never a JSON library's id.
    for (const char* never : {"Traceback", "json.exception", "parse_error."})
      EXPECT_EQ(python.output.find(never), std::string::npos) << python.output.substr(0, 4000);
  }
  if (!kPythonDriver.empty()) {
    EXPECT_GE(through_package, 25);
  }
}

}  // namespace hostile_corpus_test
