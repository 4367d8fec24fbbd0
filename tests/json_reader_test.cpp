// Parsing JSON files: duplicate keys and numbers out of range are input errors naming the file and the key,
// never a silent last-one-wins or an exception without a file.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "base/errors.hpp"
#include "base/files.hpp"
#include "base/json_reader.hpp"
#include "tests/command_run_support.hpp"

namespace lcsim {
namespace json_reader_test {

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
            "s.json: policies[1].kind: duplicate key");
  // The same key in two objects, or in an object and the one around it, is no duplicate.
  EXPECT_EQ(error_of(R"({"a": {"x": 1}, "b": {"x": 2}, "x": {"x": 3}})"), "");
  EXPECT_EQ(error_of(R"([{"kind": "a"}, {"kind": "a"}])"), "");
}

TEST(JsonParsing, NumbersOutOfRangeNameTheFileAndKey) {
  const std::string message = error_of(R"({"cluster": {"nodes": 4, "ib_GBps": 1e309}})");
  EXPECT_EQ(message.rfind("s.json: cluster.ib_GBps: number out of range", 0), 0u) << message;
  EXPECT_EQ(message.find("json.exception"), std::string::npos) << message;
  EXPECT_EQ(error_of(R"({"a": [{"x": 1}, 2, -1e400]})").rfind("s.json: a[2]: number out of range", 0), 0u);
  EXPECT_EQ(error_of("1e999").rfind("s.json: (top level): number out of range", 0), 0u);
}

TEST(JsonParsing, AFloatBeyondInt64IsNotAnIntegerAndNotUndefined) {
  // Fuzzing found 2.2e27 for an integer key: the range is checked before the cast (UBSan would report it).
  const nlohmann::json doc = {{"n", 2.22222e27}, {"m", 4.0}};
  JsonObjectReader r(doc, "f.json");
  EXPECT_EQ(r.required<std::int64_t>("m"), 4);
  EXPECT_THROW(r.required<std::int64_t>("n"), InputError);
}

TEST(JsonParsing, SyntaxErrorsQuoteAShortPrintableExcerpt) {
  const std::string message = error_of("{\"name\": \"" + std::string(100000, 'x') + "\x01\"}");
  EXPECT_EQ(message.rfind("s.json: not valid JSON: ", 0), 0u) << message;
  EXPECT_LT(message.size(), 500u) << message;
  for (char c : message) EXPECT_TRUE(c >= 0x20 && c < 0x7F) << message;
}

/// A scratch file with `text`, removed with the object.
struct ScratchFile {
  explicit ScratchFile(const std::string& name, const std::string& text = "")
      : path(std::filesystem::temp_directory_path() / ("lcsim-" + std::to_string(::getpid()) + "-" + name)) {
    std::ofstream(path, std::ios::binary) << text;
  }
  ~ScratchFile() {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
  }
  std::filesystem::path path;
};

std::string read_error(const std::string& file, std::uintmax_t max_bytes) {
  try {
    read_input_file(file, max_bytes);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(InputFiles, OnlyRegularFilesUnderTheLimitAreRead) {
  const ScratchFile small("small.json", "\xEF\xBB\xBF{\"a\": 1}");
  EXPECT_EQ(read_input_file(small.path.string(), 100), "{\"a\": 1}");  // the byte-order mark is dropped
  EXPECT_EQ(read_error(small.path.string(), 5),
            small.path.string() + ": is 11 bytes, more than the 5 bytes lcsim reads here (docs/robustness.md)");
  // /proc files report no size: the limit holds while reading.
  EXPECT_EQ(read_error("/proc/self/status", 10),
            "/proc/self/status: holds more than the 10 bytes lcsim reads here (docs/robustness.md)");
  EXPECT_EQ(read_error("/dev/zero", 100), "/dev/zero: is a device, not a regular file; give the path of a file");
  const std::string dir = std::filesystem::temp_directory_path().string();
  EXPECT_EQ(read_error(dir, 100), dir + ": is a directory, not a regular file; give the path of a file");
  EXPECT_NE(read_error("/nonexistent/s.json", 100).find("/nonexistent/s.json: cannot open file"), std::string::npos);
}

TEST(InputFiles, AJsonFileOverTheLimitIsRefusedBeforeReading) {
  ScratchFile big("big.json");
  std::filesystem::resize_file(big.path, kMaxJsonFileBytes + 1);  // sparse: no disk space is used
  try {
    parse_json_file(big.path.string());
    FAIL() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), big.path.string() +
                                         ": is 67108865 bytes, more than the 64 MiB lcsim reads here "
                                         "(docs/robustness.md)");
  }
}

TEST(InputFiles, ExcerptsAreShortAndPrintable) {
  EXPECT_EQ(excerpt("7897"), "7897");
  EXPECT_EQ(excerpt("a\x01\xFF\n"), "a\\x01\\xFF\\x0A");
  EXPECT_EQ(excerpt(std::string(100, 'y'), 4), "yyyy... (100 bytes)");
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

}  // namespace json_reader_test
}  // namespace lcsim
