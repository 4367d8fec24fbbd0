// Runs tests/hostile_corpus.txt (issue #31): each case a shell command on fresh fixtures, with the exit status and
// the words its output must (or must not) hold. Every case's output is also short and free of raw control bytes:
// whatever it quotes, lcsim's messages reach the terminal cut and escaped.
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

  fs::path dir_;
};

TEST_F(HostileCorpus, EveryCaseExitsAsExpectedWithItsWords) {
  const std::vector<CorpusCase> cases = load_corpus();
  ASSERT_GE(cases.size(), 30u);
  for (const CorpusCase& c : cases) {
    SCOPED_TRACE("tests/hostile_corpus.txt:" + std::to_string(c.line) + ": " + c.name);
    const fs::path case_dir = dir_ / c.name;
    write_fixtures(case_dir);
    std::ofstream(case_dir / "case.sh") << expand(c.command, case_dir) << "\n";
    const auto run = lcsim::testing::run_command("cd '" + case_dir.string() + "' && LCSIM='" +
                                                 std::string(LCSIM_BINARY) + "' sh case.sh");
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
}

}  // namespace hostile_corpus_test
