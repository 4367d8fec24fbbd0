#include "base/json_reader.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/files.hpp"
#include "base/suggest.hpp"

namespace lcsim {

JsonObjectReader::JsonObjectReader(const nlohmann::json& node, std::string file, std::string path)
    : node_(node), file_(std::move(file)), path_(std::move(path)) {
  if (!node_.is_object()) fail_here("expected an object, got " + json_type_name(node_));
}

void JsonObjectReader::ask(std::string_view key) const {
  if (std::find(asked_.begin(), asked_.end(), key) == asked_.end()) asked_.emplace_back(key);
}

bool JsonObjectReader::has(std::string_view key) const {
  ask(key);
  return node_.contains(key);
}

std::string JsonObjectReader::misspelling_of(std::string_view missing) const {
  std::vector<std::string> unread;
  for (const auto& [key, _] : node_.items())
    if (!read_.contains(key) && std::find(asked_.begin(), asked_.end(), key) == asked_.end()) unread.push_back(key);
  for (const std::string& key : unread)
    if (nearest_name(key, {std::string(missing)}) == missing) return key;
  return "";
}

std::string JsonObjectReader::path(std::string_view key) const {
  // A key is input: a misspelt one may be a megabyte of anything, so messages quote it as an excerpt.
  return path_.empty() ? excerpt(key) : path_ + "." + excerpt(key);
}

void JsonObjectReader::fail(std::string_view key, std::string_view message) const {
  throw InputError(file_ + ": " + path(key) + ": " + std::string(message));
}

void JsonObjectReader::fail_here(std::string_view message) const {
  throw InputError(file_ + ": " + (path_.empty() ? std::string("(top level)") : path_) + ": " + std::string(message));
}

const nlohmann::json& JsonObjectReader::value(std::string_view key) {
  ask(key);
  auto it = node_.find(key);
  if (it == node_.end()) {
    // `context_length` for `context_length_tokens`: the key the user wrote is the one to name.
    if (const std::string written = misspelling_of(key); !written.empty())
      fail(written, "unknown key (did you mean `" + std::string(key) + "`?); `" + std::string(key) + "` is required");
    fail(key, "missing required field");
  }
  read_.emplace(key);
  return *it;
}

template <>
std::string JsonObjectReader::required<std::string>(std::string_view key) {
  const auto& v = value(key);
  if (!v.is_string()) fail(key, "expected a string, got " + json_type_name(v));
  return v.get<std::string>();
}

template <>
bool JsonObjectReader::required<bool>(std::string_view key) {
  const auto& v = value(key);
  if (!v.is_boolean()) fail(key, "expected true or false, got " + json_type_name(v));
  return v.get<bool>();
}

template <>
double JsonObjectReader::required<double>(std::string_view key) {
  const auto& v = value(key);
  if (!v.is_number()) fail(key, "expected a number, got " + json_type_name(v));
  return v.get<double>();
}

template <>
std::int64_t JsonObjectReader::required<std::int64_t>(std::string_view key) {
  const auto& v = value(key);
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    // Range first: casting a double outside int64 is undefined (fuzzing found 2.2e27).
    if (d >= -9.2e18 && d <= 9.2e18 && d == std::trunc(d)) return static_cast<std::int64_t>(d);
    fail(key, "expected an integer, got " + v.dump());
  }
  fail(key, "expected an integer, got " + json_type_name(v));
}

template <>
int JsonObjectReader::required<int>(std::string_view key) {
  const std::int64_t v = required<std::int64_t>(key);
  if (v < INT32_MIN || v > INT32_MAX) fail(key, "integer out of range: " + std::to_string(v));
  return static_cast<int>(v);
}

double JsonObjectReader::positive(std::string_view key) {
  const double v = required<double>(key);
  if (!(v > 0)) fail(key, "must be positive, got " + value(key).dump());
  return v;
}

double JsonObjectReader::number_in(std::string_view key, double lo, double hi) {
  const double v = required<double>(key);
  if (!(v >= lo && v <= hi)) {
    char range[96];
    std::snprintf(range, sizeof range, "must be in [%g, %g], got ", lo, hi);
    fail(key, range + excerpt(value(key).dump()) + " (a range that keeps every time derived from it finite)");
  }
  return v;
}

std::int64_t JsonObjectReader::integer_in(std::string_view key, std::int64_t lo, std::int64_t hi) {
  const std::int64_t v = required<std::int64_t>(key);
  if (v < lo || v > hi)
    fail(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(v));
  return v;
}

JsonObjectReader JsonObjectReader::object(std::string_view key) {
  const auto& v = value(key);
  if (!v.is_object()) fail(key, "expected an object, got " + json_type_name(v));
  return JsonObjectReader(v, file_, path(key));
}

JsonObjectReader JsonObjectReader::child(const nlohmann::json& node, const std::string& child_path) const {
  return JsonObjectReader(node, file_, child_path);
}

void JsonObjectReader::finish() const {
  for (const auto& [key, _] : node_.items()) {
    if (!read_.contains(key)) fail(key, "unknown key" + did_you_mean(key, asked_));
  }
}

std::string json_type_name(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::object:
      return "object";
    case nlohmann::json::value_t::array:
      return "array";
    case nlohmann::json::value_t::string:
      return "string";
    case nlohmann::json::value_t::boolean:
      return "boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float:
      return "number";
    default:
      return "value";
  }
}

namespace {

/// Where the parser is, as a JSON path ("cluster.ib_GBps", "policies[1].kind"), kept up to date by the parse
/// callback: a number too large for a double fails inside the parser, and the path names its key.
class JsonPathTracker {
 public:
  using Event = nlohmann::json::parse_event_t;

  void on(Event event, const nlohmann::json& parsed) {
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        frames_.push_back({event == Event::array_start, "", 0, {}});
        break;
      case Event::object_end:
      case Event::array_end:
        if (!frames_.empty()) frames_.pop_back();
        element_done();
        break;
      case Event::key:
        if (!frames_.empty()) {
          Frame& frame = frames_.back();
          frame.key = parsed.get<std::string>();
          if (!frame.keys.insert(frame.key).second && duplicate_.empty()) duplicate_ = path();
        }
        break;
      case Event::value:
        element_done();
        break;
    }
  }

  /// The path of the value being parsed: the latest key of every open object, the index in every open array.
  std::string path() const {
    std::string out;
    for (const Frame& frame : frames_) {
      if (frame.array)
        out += "[" + std::to_string(frame.index) + "]";
      else if (!frame.key.empty())
        out += (out.empty() ? "" : ".") + frame.key;
    }
    return out;
  }
  /// The path of the first duplicate key, "" when there is none.
  const std::string& duplicate() const { return duplicate_; }

 private:
  struct Frame {
    bool array = false;
    std::string key;        ///< objects: the latest key
    std::size_t index = 0;  ///< arrays: the element being parsed
    std::set<std::string> keys;
  };

  void element_done() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
  }

  std::vector<Frame> frames_;
  std::string duplicate_;
};

}  // namespace

std::string json_error_text(const std::exception& error) {
  // "[json.exception.parse_error.101] parse error at line 1, column 5: ...": the id means nothing to a user.
  std::string_view text = error.what();
  if (text.starts_with("[json.exception.")) {
    const std::size_t end = text.find("] ");
    if (end != std::string_view::npos) text.remove_prefix(end + 2);
  }
  return excerpt(text, 300);
}

nlohmann::json parse_json_text(const std::string& text, const std::string& file) {
  // nlohmann::json keeps the last of duplicate keys without a word: a file that says "seed" twice is ambiguous,
  // so the tracker records the first duplicate.
  JsonPathTracker tracker;
  const auto callback = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    tracker.on(event, parsed);
    return true;
  };
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(text, callback);
  } catch (const nlohmann::json::parse_error& e) {
    // The parser quotes what it last read, which may be long or binary: shown as an excerpt.
    throw InputError(file + ": not valid JSON: " + json_error_text(e));
  } catch (const nlohmann::json::out_of_range&) {
    const std::string where = tracker.path();
    throw InputError(file + ": " + (where.empty() ? std::string("(top level)") : where) +
                     ": number out of range (beyond a double's +-1.8e308)");
  }
  if (!tracker.duplicate().empty()) throw InputError(file + ": " + tracker.duplicate() + ": duplicate key");
  return document;
}

nlohmann::json parse_json_file(const std::string& file, std::uintmax_t max_bytes) {
  return parse_json_text(read_input_file(file, max_bytes), file);
}

}  // namespace lcsim
