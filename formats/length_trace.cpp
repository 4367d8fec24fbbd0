#include "formats/length_trace.hpp"

#include <charconv>
#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

#include "base/errors.hpp"
#include "base/files.hpp"

namespace lcsim {

namespace {

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r");
  return text.substr(first, last - first + 1);
}

std::vector<std::string_view> split_commas(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (true) {
    const auto comma = line.find(',', start);
    fields.push_back(
        trim(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) return fields;
    start = comma + 1;
  }
}

/// The token count in `text`, or an explanation of why it is not one.
struct ParsedCount {
  Tokens value = 0;
  std::string error;
};

ParsedCount parse_count(std::string_view text) {
  if (text.empty()) return {0, "empty token count"};
  Tokens value = 0;
  const auto [end, code] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (code == std::errc::result_out_of_range) return {0, "token count '" + excerpt(text) + "' is out of range"};
  if (code != std::errc() || end != text.data() + text.size())
    return {0, "expected a positive integer token count, got '" + excerpt(text) + "'"};
  if (value <= 0) return {0, "token count must be positive, got " + excerpt(text)};
  if (value > kMaxSequenceTokens) {
    return {0, "token count " + excerpt(text) + " is over the limit of " + std::to_string(kMaxSequenceTokens)};
  }
  return {value, ""};
}

class TraceReader {
 public:
  explicit TraceReader(std::string file) : file_(std::move(file)) {}

  Dataset read() {
    const std::string text = read_input_file(file_, kMaxTraceFileBytes);
    std::string_view rest = text;
    while (!rest.empty()) {
      const auto newline = rest.find('\n');
      const std::string_view raw = rest.substr(0, newline);
      rest = newline == std::string_view::npos ? std::string_view() : rest.substr(newline + 1);
      ++line_;
      const std::string_view line = trim(raw);
      if (line.empty() || line.front() == '#') continue;
      if (!format_chosen_) {
        choose_format(line);
        if (csv_) continue;  // the header holds no sequence
      }
      add(csv_ ? csv_count(line) : text_count(line));
    }
    if (sequences_.empty()) throw InputError(file_ + ": length trace has no sequences");
    return Dataset(std::filesystem::path(file_).stem().string(), std::move(sequences_));
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw InputError(file_ + ":" + std::to_string(line_) + ": " + message);
  }

  void choose_format(std::string_view line) {
    format_chosen_ = true;
    const auto count = parse_count(line);
    if (count.error.empty()) return;  // plain text
    // A line that starts like a number was meant as one; say what is wrong with it rather than ask for a header.
    const char first = line.front();
    if ((first >= '0' && first <= '9') || first == '-' || first == '+') fail(count.error);
    if (line.find('"') != std::string_view::npos) fail("quoted CSV fields are not supported");
    const auto header = split_commas(line);
    std::optional<std::size_t> column;
    for (std::size_t i = 0; i < header.size(); ++i) {
      if (header[i] != "tokens") continue;
      if (column) fail("CSV header names the 'tokens' column twice");
      column = i;
    }
    if (!column)
      fail("expected a positive integer token count or a CSV header with a 'tokens' column, got '" + excerpt(line) +
           "'");
    csv_ = true;
    columns_ = header.size();
    tokens_column_ = *column;
  }

  Tokens text_count(std::string_view line) const {
    const auto parsed = parse_count(line);
    if (!parsed.error.empty()) fail(parsed.error);
    return parsed.value;
  }

  Tokens csv_count(std::string_view line) const {
    if (line.find('"') != std::string_view::npos) fail("quoted CSV fields are not supported");
    const auto fields = split_commas(line);
    if (fields.size() != columns_)
      fail("expected " + std::to_string(columns_) + " CSV fields (as in the header), got " +
           std::to_string(fields.size()));
    const auto parsed = parse_count(fields[tokens_column_]);
    if (!parsed.error.empty()) fail("column 'tokens': " + parsed.error);
    return parsed.value;
  }

  void add(Tokens tokens) { sequences_.push_back({static_cast<std::int64_t>(sequences_.size()), tokens}); }

  std::string file_;
  int line_ = 0;
  bool format_chosen_ = false;
  bool csv_ = false;
  std::size_t columns_ = 0;
  std::size_t tokens_column_ = 0;
  std::vector<Sequence> sequences_;
};

}  // namespace

Dataset load_length_trace(const std::string& file) {
  return TraceReader(file).read();
}

void save_length_trace(const Dataset& dataset, const std::string& file) {
  AtomicOutputFile out(file);
  out.stream() << "# lcsim length trace '" << dataset.name() << "': " << dataset.size() << " sequences, "
               << dataset.total_tokens() << " tokens; one token count per line, in epoch order\n";
  for (const auto& sequence : dataset.sequences()) out.stream() << sequence.tokens << '\n';
  out.commit();
}

}  // namespace lcsim
