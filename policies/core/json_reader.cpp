#include "policies/core/json_reader.hpp"

#include <fstream>
#include <set>
#include <sstream>
#include <vector>

namespace lcsim {

JsonObjectReader::JsonObjectReader(const nlohmann::json& node, std::string file, std::string path)
    : node_(node), file_(std::move(file)), path_(std::move(path)) {
  if (!node_.is_object()) fail_here("expected an object, got " + json_type_name(node_));
}

bool JsonObjectReader::has(std::string_view key) const {
  return node_.contains(key);
}

std::string JsonObjectReader::path(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

void JsonObjectReader::fail(std::string_view key, std::string_view message) const {
  throw InputError(file_ + ": " + path(key) + ": " + std::string(message));
}

void JsonObjectReader::fail_here(std::string_view message) const {
  throw InputError(file_ + ": " + (path_.empty() ? std::string("(top level)") : path_) + ": " + std::string(message));
}

const nlohmann::json& JsonObjectReader::value(std::string_view key) {
  auto it = node_.find(key);
  if (it == node_.end()) fail(key, "missing required field");
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
    if (d == static_cast<double>(static_cast<std::int64_t>(d))) return static_cast<std::int64_t>(d);
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
    if (!read_.contains(key)) fail(key, "unknown key");
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

nlohmann::json parse_json_text(const std::string& text, const std::string& file) {
  // nlohmann::json keeps the last of duplicate keys without a word: a file that says "seed" twice is ambiguous,
  // so the parser callback records the first duplicate (with the keys of the objects around it).
  std::vector<std::set<std::string>> keys;  // per open object
  std::vector<std::string> key_of;          // per open object: its latest key
  std::string duplicate;
  const auto callback = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) {
      keys.emplace_back();
      key_of.emplace_back();
    } else if (event == Event::object_end && !keys.empty()) {
      keys.pop_back();
      key_of.pop_back();
    } else if (event == Event::key && !keys.empty()) {
      const auto key = parsed.get<std::string>();
      key_of.back() = key;
      if (!keys.back().insert(key).second && duplicate.empty()) {
        for (std::size_t i = 0; i + 1 < key_of.size(); ++i) duplicate += key_of[i] + ".";
        duplicate += key;
      }
    }
    return true;
  };
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(text, callback);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(file + ": not valid JSON: " + e.what());
  } catch (const nlohmann::json::out_of_range& e) {
    throw InputError(file + ": a number out of range: " + e.what());
  }
  if (!duplicate.empty()) throw InputError(file + ": " + duplicate + ": duplicate key");
  return document;
}

nlohmann::json parse_json_file(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw InputError(file + ": cannot open file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_json_text(text.str(), file);
}

}  // namespace lcsim
