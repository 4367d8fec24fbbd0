// Parsing JSON files: duplicate keys and numbers out of range are input errors naming the file and the key,
// never a silent last-one-wins or an exception without a file.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "policies/core/errors.hpp"
#include "policies/core/json_reader.hpp"
#include "tests/command_run_support.hpp"

namespace lcsim {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_json_text(text, "s.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(JsonParsing, DuplicateKeysAreErrorsNamingTheirPath) {
  EXPECT_EQ(error_of(R"({"seed": 1, "seed": 2})"), "s.json: seed: duplicate key");
  EXPECT_EQ(error_of(R"({"training": {"iterations": 1, "seed": 3, "iterations": 2}})"),
            "s.json: training.iterations: duplicate key");
  EXPECT_EQ(error_of(R"({"policies": [{"kind": "a"}, {"kind": "b", "kind": "c"}]})"),
            "s.json: policies.kind: duplicate key");
  // The same key in two objects, or in an object and the one around it, is no duplicate.
  EXPECT_EQ(error_of(R"({"a": {"x": 1}, "b": {"x": 2}, "x": {"x": 3}})"), "");
  EXPECT_EQ(error_of(R"([{"kind": "a"}, {"kind": "a"}])"), "");
}

TEST(JsonParsing, NumbersOutOfRangeNameTheFile) {
  const std::string message = error_of(R"({"cluster": {"ib_GBps": 1e309}})");
  EXPECT_EQ(message.rfind("s.json: ", 0), 0u) << message;
  EXPECT_NE(message.find("out of range"), std::string::npos) << message;
}

TEST(JsonParsing, AScenarioWithADuplicateKeyExits2) {
  const auto file =
      std::filesystem::temp_directory_path() / ("lcsim-duplicate-" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << R"({"seed": 1, "seed": 2})";
  const auto run = testing::run_lcsim("plan '" + file.string() + "'");
  std::filesystem::remove(file);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("seed: duplicate key"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace lcsim
