#pragma once
// A small pool of child processes: `lcsim sweep` and `lcsim validate` run each point as its own `lcsim plan|simulate`
// process (the SimGrid engine is one per process, and processes give --jobs parallelism for free).
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace lcsim {

struct ChildCommand {
  std::vector<std::string> argv;  ///< argv[0] is the executable's path
  std::string log;                ///< stdout and stderr go to this file
};

/// SIGINT or SIGTERM reached a command that runs children: they were sent the signal too and waited for, and
/// unwinding removes the temporary work folders. run_main exits 128 + signal (130, 143).
class Interrupted : public std::runtime_error {
 public:
  explicit Interrupted(int signal);
  int signal() const { return signal_; }

 private:
  int signal_;
};

/// While one lives, SIGINT and SIGTERM are recorded instead of ending the process, so that run_children can pass
/// them on to the children and the command can clean up (sweep, tune and validate hold one).
class InterruptScope {
 public:
  InterruptScope();
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;
};

/// The signal recorded since the process started (0: none): a command that finished despite a late signal still
/// exits as interrupted.
int interrupt_signal();

/// Runs every command, at most `jobs` at a time, calling `progress(done, total)` after each ends. Returns each
/// command's exit status, in order (128 + signal number when a signal ended it). Throws std::runtime_error when a
/// process cannot be started. On SIGINT or SIGTERM (recorded by an InterruptScope, or arriving while it waits) it
/// sends that signal to every running child, waits for them and throws Interrupted.
std::vector<int> run_children(const std::vector<ChildCommand>& commands, int jobs,
                              const std::function<void(std::size_t, std::size_t)>& progress);

/// What runs a command's children: run_children by default; a host whose executable is not `lcsim` (the Python
/// module) runs each `lcsim MODE ...` command its own way and returns the same exit statuses.
using ChildRunner = std::function<std::vector<int>(const std::vector<ChildCommand>& commands, int jobs,
                                                   const std::function<void(std::size_t, std::size_t)>& progress)>;

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
