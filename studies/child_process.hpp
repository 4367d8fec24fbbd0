#pragma once
// A function run in a forked child process, its progress and its answer read back through a pipe. SimGrid keeps
// one engine per process, so a Runner simulates in children; fork without exec keeps every registered policy,
// those written in Python included, which a fresh `lcsim` process would not have.
#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace lcsim {

/// How this process forks a child that may run the host's code: fork() unless a host with an interpreter installs
/// its own protocol (the Python module: PyOS_BeforeFork and PyOS_AfterFork_*). Install it before any run.
using ForkFunction = pid_t (*)();
void set_fork_function(ForkFunction fork_function);

class ChildProcess {
 public:
  /// Sends one progress record to the parent.
  using Report = std::function<void(const std::string& text)>;
  /// What the child runs: its answer, sent back when it returns. It must not throw (the child catches nothing).
  using Work = std::function<std::string(const Report& report)>;

  /// Forks a child that runs `work` with SIGINT and SIGTERM at their defaults, sends its answer and _exit(0)s.
  /// std::runtime_error when no pipe or process can be made.
  explicit ChildProcess(const Work& work);
  ~ChildProcess();  ///< an unfinished child is killed and reaped
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  /// The pipe to poll for readability.
  int fd() const { return fd_; }
  /// Reads what the pipe holds now (call when poll says it is readable); false once the pipe has ended.
  bool read_available();
  /// The progress records read since the last call.
  std::vector<std::string> take_reports();
  /// After the pipe ended: reaps the child and returns its answer; std::runtime_error when it ended without one
  /// (killed, crashed).
  std::string finish();
  /// Sends `signal` to the child (an interrupted run).
  void signal(int signal) const;
  /// The child's process id (-1 once reaped).
  pid_t pid() const { return pid_; }

 private:
  void parse_records();

  pid_t pid_ = -1;
  int fd_ = -1;
  std::string buffer_;
  std::vector<std::string> reports_;
  std::optional<std::string> answer_;
};

}  // namespace lcsim
