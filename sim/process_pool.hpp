#pragma once
// A small pool of child processes: `lcsim sweep` and `lcsim validate` run each point as its own `lcsim plan|simulate`
// process (the SimGrid engine is one per process, and processes give --jobs parallelism for free).
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace lcsim {

struct ChildCommand {
  std::vector<std::string> argv;  ///< argv[0] is the executable's path
  std::string log;                ///< stdout and stderr go to this file
};

/// Runs every command, at most `jobs` at a time, calling `progress(done, total)` after each ends. Returns each
/// command's exit status, in order (128 + signal number when a signal ended it). Throws std::runtime_error when a
/// process cannot be started.
std::vector<int> run_children(const std::vector<ChildCommand>& commands, int jobs,
                              const std::function<void(std::size_t, std::size_t)>& progress);

/// The path of the running executable (to start more of itself).
std::string self_executable();

/// The folder a command's children work in: `dir` (created, always kept) or a fresh temporary folder named
/// `prefix`-XXXXXX, removed when this goes out of scope, however the command ends, unless keep() was called (a
/// failed child's log is the evidence). InputError when it cannot be created.
class WorkFolder {
 public:
  WorkFolder(const std::optional<std::string>& dir, const std::string& prefix);
  ~WorkFolder();
  WorkFolder(const WorkFolder&) = delete;
  WorkFolder& operator=(const WorkFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }
  void keep() { remove_ = false; }

 private:
  std::filesystem::path path_;
  bool remove_ = false;
};

/// The last non-empty line of a child's log ("" when there is none): what it said before it failed.
std::string last_line_of(const std::filesystem::path& log);

/// A progress bar on stderr when it is a terminal: "[####....] done/total what".
void print_progress(std::size_t done, std::size_t total, const std::string& what);

}  // namespace lcsim
