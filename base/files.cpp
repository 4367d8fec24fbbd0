#include "base/files.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <system_error>
#include <utility>

#include "base/errors.hpp"
#include "base/temporary_files.hpp"

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

std::string resolved_path(const std::string& file) {
  std::error_code error;
  const fs::path path = fs::weakly_canonical(fs::absolute(file), error);
  return error ? fs::absolute(file).lexically_normal().string() : path.string();
}

/// Temporary outputs are named ".lcsim-tmp.HOST.PID.N.NAME" (NAME cut to 40 bytes, so that a legal 255-byte
/// target name still has a legal temporary one): a killed run's file is recognizable, and the next run into the
/// folder removes it once its process is gone (only its own host's: a shared folder may hold other hosts' runs).
constexpr std::string_view kTemporaryPrefix = ".lcsim-tmp.";

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "host";
  std::string host(name);
  for (char& c : host)
    if (c == '.' || c == '/') c = '_';
  return host.empty() ? "host" : host;
}

std::string temporary_name(const std::string& target) {
  static std::atomic<unsigned> counter{0};
  return std::string(kTemporaryPrefix) + host_name() + "." + std::to_string(::getpid()) + "." +
         std::to_string(counter++) + "." + target.substr(0, 40);
}

/// Removes the temporary files of this host's runs that are gone, once per folder and process.
void remove_stale_temporaries(const fs::path& dir) {
  static std::mutex mutex;
  static std::set<std::string> swept;
  const std::lock_guard lock(mutex);
  if (std::getenv("LCSIM_CHILD") != nullptr) return;  // a sweep's child: its parent swept the folder
  const fs::path folder = dir.empty() ? fs::path(".") : dir;
  if (!swept.insert(resolved_path(folder.string())).second) return;
  const std::string mine = std::string(kTemporaryPrefix) + host_name() + ".";
  std::error_code error;
  for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(mine)) continue;
    const std::string rest = name.substr(mine.size());
    const std::size_t dot = rest.find('.');
    if (dot == std::string::npos || dot == 0 || rest.find_first_not_of("0123456789") < dot) continue;
    const long pid = std::strtol(rest.substr(0, dot).c_str(), nullptr, 10);
    if (pid <= 0 || pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    std::error_code ignored;
    fs::remove(it->path(), ignored);
  }
}

}  // namespace

void remove_temporaries_of(const std::string& target, pid_t pid) {
  const fs::path folder = fs::path(target).parent_path().empty() ? fs::path(".") : fs::path(target).parent_path();
  const std::string prefix = std::string(kTemporaryPrefix) + host_name() + "." + std::to_string(pid) + ".";
  std::error_code error;
  for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
    if (!it->path().filename().string().starts_with(prefix)) continue;
    std::error_code ignored;
    fs::remove(it->path(), ignored);
  }
}

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

std::string folder_and_name(const std::string& file) {
  const std::filesystem::path path(file);
  return (path.parent_path().filename() / path.filename()).string();
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

namespace {

/// The longest run of non-blank characters a message shows whole: a value it echoes (a file name, an option's value,
/// a JSON path) is such a run, and anything longer was the user's, not lcsim's wording.
// 160, not 80: a deep but real path (a temporary folder, a project tree) stays whole and can be copied; a
// 300-character name or a 100,000-character option value is still cut.
constexpr std::size_t kMaxEchoedChars = 160;

/// Code points of `text` (UTF-8; a stray byte counts as one).
std::size_t code_points(std::string_view text) {
  return static_cast<std::size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

/// Byte offset of code point `n` of `text` (its size when there are fewer).
std::size_t code_point_offset(std::string_view text, std::size_t n) {
  std::size_t seen = 0;
  for (std::size_t i = 0; i < text.size(); ++i)
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80 && seen++ == n) return i;
  return text.size();
}

/// `message` with every run of non-blank characters longer than kMaxEchoedChars cut to its first 100 and last 59
/// characters around an ellipsis: a 300-character file name or a 100,000-character option value is echoed in 160
/// characters that still show how it begins and ends (the end of a path is its name).
std::string bounded_values(std::string_view message) {
  std::string out;
  std::size_t at = 0;
  while (at < message.size()) {
    const std::size_t start = message.find_first_not_of(" \t\n", at);
    out.append(message.substr(at, std::min(start, message.size()) - at));
    if (start == std::string_view::npos) break;
    const std::size_t end = std::min(message.find_first_of(" \t\n", start), message.size());
    const std::string_view run = message.substr(start, end - start);
    const std::size_t count = code_points(run);
    if (count <= kMaxEchoedChars) {
      out.append(run);
    } else {
      constexpr std::size_t kHead = 100;
      constexpr std::size_t kTail = kMaxEchoedChars - kHead - 1;
      out.append(run.substr(0, code_point_offset(run, kHead)));
      out.append("\xE2\x80\xA6");  // U+2026, the ellipsis
      out.append(run.substr(code_point_offset(run, count - kTail)));
    }
    at = end;
  }
  return out;
}

}  // namespace

std::string terminal_text(std::string_view raw_message, std::size_t max_line) {
  const std::string bounded = bounded_values(raw_message);
  const std::string_view message = bounded;
  std::string out;
  std::size_t line_start = 0;
  while (line_start <= message.size()) {
    const std::size_t end = std::min(message.find('\n', line_start), message.size());
    const std::string_view line = message.substr(line_start, end - line_start);
    for (std::size_t i = 0; i < std::min(line.size(), max_line); ++i) {
      const auto byte = static_cast<unsigned char>(line[i]);
      if (byte < 0x20 && byte != '\t') {
        char escaped[8];
        std::snprintf(escaped, sizeof escaped, "\\x%02X", byte);
        out += escaped;
      } else if (byte == 0x7F) {
        out += "\\x7F";
      } else {
        out += static_cast<char>(byte);
      }
    }
    if (line.size() > max_line) out += "... (a line of " + std::to_string(line.size()) + " bytes)";
    if (end == message.size()) break;
    out += '\n';
    line_start = end + 1;
  }
  return out;
}

AtomicOutputFile::AtomicOutputFile(std::string file) : file_(std::move(file)) {
  if (is_special(file_)) {
    out_.open(file_, std::ios::binary);
    if (!out_) throw InputError(file_ + ": cannot open for writing");
    return;
  }
  const fs::path target(file_);
  remove_stale_temporaries(target.parent_path());
  temporary_ = (target.parent_path() / temporary_name(target.filename().string())).string();
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

namespace {

/// Device and inode of an existing file; nullopt when it does not exist.
std::optional<std::pair<std::uintmax_t, std::uintmax_t>> file_identity(const std::string& file) {
  struct stat info {};
  if (::stat(file.c_str(), &info) != 0) return std::nullopt;
  return std::pair<std::uintmax_t, std::uintmax_t>{info.st_dev, info.st_ino};
}

}  // namespace

void OutputGuard::add_input(const std::string& file) {
  if (!file.empty()) inputs_.push_back(file);
}

void OutputGuard::add_inputs(const std::vector<std::string>& files) {
  for (const auto& file : files) add_input(file);
}

void OutputGuard::add_output(const std::string& option, const std::string& file) {
  outputs_.push_back({option, file});
}

void OutputGuard::add_folder(const std::string& option, const std::string& dir, std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  folders_.push_back({option, resolved_path(dir), std::move(names)});
}

void OutputGuard::check() const {
  std::map<std::string, std::string> input_of;
  std::map<std::pair<std::uintmax_t, std::uintmax_t>, std::string> input_of_identity;
  for (const auto& input : inputs_) {
    input_of.emplace(resolved_path(input), input);
    if (const auto identity = file_identity(input)) input_of_identity.emplace(*identity, input);
  }
  const auto overwrites = [](const std::string& what, const std::string& input) {
    return InputError(what + ": is the input " + input + "; writing it would overwrite what this run reads");
  };
  // A folder's generated names are many (a sweep of 100,000 points): look each input up among them instead.
  const auto folder_file = [&](const std::string& path) -> const Folder* {
    const fs::path p(path);
    for (const auto& folder : folders_)
      if (p.parent_path() == fs::path(folder.dir) &&
          std::binary_search(folder.names.begin(), folder.names.end(), p.filename().string()))
        return &folder;
    return nullptr;
  };
  for (const auto& [path, input] : input_of)
    if (const Folder* folder = folder_file(path))
      throw InputError(folder->option + ": this run writes " + path + " there, which is the input " + input +
                       "; writing it would overwrite what this run reads");
  std::map<std::string, std::string> output_of;
  for (const auto& [option, file] : outputs_) {
    if (is_special(file)) continue;
    if (file.empty()) throw InputError(option + ": the file name is empty");
    const std::string path = resolved_path(file);
    if (const auto it = input_of.find(path); it != input_of.end()) throw overwrites(option + " " + file, it->second);
    if (const auto identity = file_identity(file))
      if (const auto it = input_of_identity.find(*identity); it != input_of_identity.end())
        throw overwrites(option + " " + file, it->second);
    if (const auto [it, added] = output_of.emplace(path, option); !added)
      throw InputError(option + " " + file + ": is also the file of " + it->second + "; give each output its own file");
    if (const Folder* folder = folder_file(path))
      throw InputError(option + " " + file + ": is also a file that " + folder->option +
                       " holds for this run; give the output a name of its own");
  }
}

void check_output_files(const std::vector<OutputOption>& outputs, const std::vector<std::string>& inputs) {
  OutputGuard guard;
  guard.add_inputs(inputs);
  for (const auto& [option, file] : outputs) guard.add_output(option, file);
  guard.check();
}

}  // namespace lcsim
