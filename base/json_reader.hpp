#pragma once
// Strict reading of JSON objects: every key must be known, every value of the right type, every required field
// present. Errors are InputError naming the file and the JSON path (e.g. "scenario.json: cluster.nvlink_GBps:
// expected a number, got string").
#include <cstdint>
#include <exception>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "base/errors.hpp"
#include "base/files.hpp"

namespace lcsim {

class JsonObjectReader {
 public:
  /// `file` names the document for messages; `path` is the JSON path of `node` ("" for the root).
  JsonObjectReader(const nlohmann::json& node, std::string file, std::string path = "");

  bool has(std::string_view key) const;

  template <class T>
  T required(std::string_view key);
  template <class T>
  T optional(std::string_view key, T fallback) {
    return has(key) ? required<T>(key) : fallback;
  }
  template <class T>
  std::optional<T> maybe(std::string_view key) {
    if (!has(key)) return std::nullopt;
    return required<T>(key);
  }

  /// A positive number (> 0).
  double positive(std::string_view key);
  /// A number in [lo, hi] (a physical quantity: its range keeps every time derived from it finite).
  double number_in(std::string_view key, double lo, double hi);
  /// An integer in [lo, hi].
  std::int64_t integer_in(std::string_view key, std::int64_t lo, std::int64_t hi);

  /// The raw value of `key` (required), marked as read; use path(key) in messages about it.
  const nlohmann::json& value(std::string_view key);
  /// A nested object reader for `key` (required).
  JsonObjectReader object(std::string_view key);
  /// A nested reader over an arbitrary element (e.g. an array item); it is not checked for type here.
  JsonObjectReader child(const nlohmann::json& node, const std::string& child_path) const;

  std::string path(std::string_view key) const;
  const std::string& path() const { return path_; }
  const std::string& file() const { return file_; }
  /// The object being read (to iterate over keys that are data, e.g. labels; read each with value()).
  const nlohmann::json& node() const { return node_; }

  /// Throws InputError "file: path: message".
  [[noreturn]] void fail(std::string_view key, std::string_view message) const;
  [[noreturn]] void fail_here(std::string_view message) const;

  /// Errors on any key that was never read, suggesting the nearest key this reader looked for ("did you mean").
  void finish() const;

 private:
  const nlohmann::json& node_;
  std::string file_;
  std::string path_;
  std::set<std::string, std::less<>> read_;
  /// Every key asked for (has, value and the readers over them), present or not: what finish() suggests from.
  mutable std::vector<std::string> asked_;
  void ask(std::string_view key) const;
  /// An unread key of the object near `missing` (a misspelling of a required key), "" when none is.
  std::string misspelling_of(std::string_view missing) const;
};

template <>
std::string JsonObjectReader::required<std::string>(std::string_view key);
template <>
bool JsonObjectReader::required<bool>(std::string_view key);
template <>
double JsonObjectReader::required<double>(std::string_view key);
template <>
std::int64_t JsonObjectReader::required<std::int64_t>(std::string_view key);
template <>
int JsonObjectReader::required<int>(std::string_view key);

/// Parses a JSON file read by read_input_file (base/files.hpp: a regular file of at most `max_bytes`),
/// turning syntax errors, numbers out of range and duplicate keys into InputError naming the file and JSON path.
nlohmann::json parse_json_file(const std::string& file, std::uintmax_t max_bytes = kMaxJsonFileBytes);
nlohmann::json parse_json_text(const std::string& text, const std::string& file);

/// A JSON library error as a message may show it: without the library's "[json.exception.parse_error.101]" id,
/// keeping the line and column, cut to an excerpt (the parser quotes what it last read, which may be binary).
std::string json_error_text(const std::exception& error);

/// Human name of a JSON value's type ("number", "string", ...), for messages.
std::string json_type_name(const nlohmann::json& value);

}  // namespace lcsim
