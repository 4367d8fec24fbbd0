#include "policies/core/files.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <system_error>

#include "policies/core/errors.hpp"

namespace lcsim {
namespace {

namespace fs = std::filesystem;

/// "64 MiB" for a whole number of MiB, else "N bytes".
std::string size_text(std::uintmax_t bytes) {
  constexpr std::uintmax_t kMiB = std::uintmax_t{1} << 20;
  return bytes % kMiB == 0 && bytes > 0 ? std::to_string(bytes / kMiB) + " MiB" : std::to_string(bytes) + " bytes";
}

std::string kind_of(const fs::file_status& status) {
  switch (status.type()) {
    case fs::file_type::directory:
      return "a directory";
    case fs::file_type::character:
    case fs::file_type::block:
      return "a device";
    case fs::file_type::fifo:
      return "a pipe";
    case fs::file_type::socket:
      return "a socket";
    default:
      return "not a regular file";
  }
}

/// An existing file that is not a regular one (a device, a pipe): it cannot be replaced by a rename.
bool is_special(const std::string& file) {
  std::error_code error;
  const auto status = fs::status(file, error);
  return !error && fs::exists(status) && !fs::is_regular_file(status);
}

}  // namespace

std::string read_input_file(const std::string& file, std::uintmax_t max_bytes) {
  std::error_code error;
  const auto status = fs::status(file, error);
  if (status.type() == fs::file_type::not_found || error)
    throw InputError(file + ": cannot open file (" +
                     (error ? error.message() : std::string("No such file or directory")) + ")");
  if (!fs::is_regular_file(status))
    throw InputError(file + ": is " + kind_of(status) + ", not a regular file; give the path of a file");
  const std::uintmax_t size = fs::file_size(file, error);
  if (!error && size > max_bytes)
    throw InputError(file + ": is " + std::to_string(size) + " bytes, more than the " + size_text(max_bytes) +
                     " lcsim reads here (docs/robustness.md)");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(file + ": cannot open file (" + std::string(std::strerror(errno)) + ")");
  // Read in chunks rather than trusting the size: a file that grows while it is read is still refused at the
  // limit, and a file that reports no size (/proc) is read whole.
  std::string text;
  if (!error) text.reserve(static_cast<std::size_t>(std::min(size, max_bytes)));
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_bytes)
      throw InputError(file + ": holds more than the " + size_text(max_bytes) +
                       " lcsim reads here (docs/robustness.md)");
  }
  if (in.bad()) throw InputError(file + ": read error");
  if (text.starts_with("\xEF\xBB\xBF")) text.erase(0, 3);
  return text;
}

std::string excerpt(std::string_view text, std::size_t max_chars) {
  std::string out;
  const std::size_t shown = std::min(text.size(), max_chars);
  for (std::size_t i = 0; i < shown; ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte >= 0x20 && byte < 0x7F) {
      out += static_cast<char>(byte);
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02X", byte);
      out += escaped;
    }
  }
  if (shown < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

AtomicOutputFile::AtomicOutputFile(std::string file) : file_(std::move(file)) {
  if (is_special(file_)) {
    out_.open(file_, std::ios::binary);
    if (!out_) throw InputError(file_ + ": cannot open for writing");
    return;
  }
  const fs::path target(file_);
  temporary_ =
      (target.parent_path() / ("." + target.filename().string() + ".tmp." + std::to_string(::getpid()))).string();
  out_.open(temporary_, std::ios::binary | std::ios::trunc);
  if (!out_) throw InputError(file_ + ": cannot open for writing (" + temporary_ + ")");
}

AtomicOutputFile::~AtomicOutputFile() {
  if (committed_ || temporary_.empty()) return;
  out_.close();
  std::error_code ignored;
  fs::remove(temporary_, ignored);
}

void AtomicOutputFile::commit() {
  if (committed_) return;
  committed_ = true;
  if (temporary_.empty()) {
    out_.flush();
    if (!out_) throw InputError(file_ + ": write failed");
    return;
  }
  out_.close();
  std::error_code ignored;
  if (!out_) {
    fs::remove(temporary_, ignored);
    throw InputError(file_ + ": write failed");
  }
  if (std::rename(temporary_.c_str(), file_.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    fs::remove(temporary_, ignored);
    throw InputError(file_ + ": cannot replace: " + reason);
  }
}

void write_file_atomically(const std::string& file, const std::string& text) {
  AtomicOutputFile out(file);
  out.stream() << text;
  out.commit();
}

void write_output(const std::string& file, const std::string& text, std::vector<std::string>& written) {
  try {
    write_file_atomically(file, text);
  } catch (const InputError& e) {
    if (written.empty()) throw;
    std::string list;
    for (const auto& w : written) list += (list.empty() ? "" : ", ") + w;
    throw InputError(std::string(e.what()) + " (already written: " + list + ")");
  }
  written.push_back(file);
}

void check_output_files(const std::vector<OutputOption>& outputs, const std::vector<std::string>& inputs) {
  const auto resolved = [](const std::string& file) {
    std::error_code error;
    const fs::path path = fs::weakly_canonical(fs::absolute(file), error);
    return error ? fs::absolute(file).lexically_normal().string() : path.string();
  };
  std::map<std::string, std::string> input_of;
  for (const auto& input : inputs) input_of.emplace(resolved(input), input);
  std::map<std::string, std::string> output_of;
  for (const auto& [option, file] : outputs) {
    if (is_special(file)) continue;
    const std::string path = resolved(file);
    if (const auto it = input_of.find(path); it != input_of.end())
      throw InputError(option + " " + file + ": is the input " + it->second +
                       "; writing it would overwrite what this run reads");
    if (const auto [it, added] = output_of.emplace(path, option); !added)
      throw InputError(option + " " + file + ": is also the file of " + it->second + "; give each output its own file");
  }
}

}  // namespace lcsim
