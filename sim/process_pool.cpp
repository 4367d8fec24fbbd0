#include "sim/process_pool.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "base/errors.hpp"

extern char** environ;

namespace lcsim {
namespace {

/// The signal SIGINT or SIGTERM delivered (0: none yet). Atomic: `lcsim tune`'s estimating threads read it while
/// the handler may write it; lock-free, so the handler may.
std::atomic<int> g_interrupt{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void record_interrupt(int signal) {
  g_interrupt = signal;
}

/// Blocks SIGCHLD, SIGINT and SIGTERM while children run, so that sigwaitinfo sees each without a race.
class BlockedSignals {
 public:
  BlockedSignals() {
    sigemptyset(&set_);
    for (int s : {SIGCHLD, SIGINT, SIGTERM}) sigaddset(&set_, s);
    pthread_sigmask(SIG_BLOCK, &set_, &previous_);
  }
  ~BlockedSignals() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  BlockedSignals(const BlockedSignals&) = delete;
  BlockedSignals& operator=(const BlockedSignals&) = delete;
  const sigset_t& set() const { return set_; }

 private:
  sigset_t set_{};
  sigset_t previous_{};
};

pid_t spawn(const ChildCommand& command) {
  std::vector<std::string> strings = command.argv;
  std::vector<char*> argv;
  for (auto& a : strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, command.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  // The child starts with no signal blocked (run_children blocks them while it waits); exec resets the caught ones
  // to their default action and keeps the ignored ones ignored.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  // LCSIM_CHILD: the parent already removed the stale temporary files of the folders its children write into
  // (base/files.cpp); each of thousands of children listing a large folder again would cost O(n^2).
  std::vector<char*> environment;
  for (char** e = environ; *e != nullptr; ++e)
    if (!std::string_view(*e).starts_with("LCSIM_CHILD=")) environment.push_back(*e);
  std::string child_mark = "LCSIM_CHILD=1";
  environment.push_back(child_mark.data());
  environment.push_back(nullptr);
  const int rc = posix_spawn(&pid, argv.front(), &actions, &attributes, argv.data(), environment.data());
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + command.argv.front() + ": " + std::strerror(rc));
  return pid;
}

}  // namespace

Interrupted::Interrupted(int signal)
    : std::runtime_error(std::string("interrupted by ") + (signal == SIGINT ? "SIGINT" : "SIGTERM")), signal_(signal) {}

namespace {

/// The actions an InterruptScope replaced, restored when it ends.
struct sigaction g_previous_int {};
struct sigaction g_previous_term {};

}  // namespace

InterruptScope::InterruptScope() {
  struct sigaction action {};
  action.sa_handler = record_interrupt;
  sigemptyset(&action.sa_mask);
  for (auto [signal, previous] : {std::pair{SIGINT, &g_previous_int}, std::pair{SIGTERM, &g_previous_term}}) {
    sigaction(signal, nullptr, previous);
    // A signal the caller ignores (a background job of a script ignores SIGINT) stays ignored, as its children's.
    if (previous->sa_handler != SIG_IGN) sigaction(signal, &action, nullptr);
  }
}

InterruptScope::~InterruptScope() {
  sigaction(SIGINT, &g_previous_int, nullptr);
  sigaction(SIGTERM, &g_previous_term, nullptr);
}

int interrupt_signal() {
  return g_interrupt;
}

std::vector<int> run_children(const std::vector<ChildCommand>& commands, int jobs,
                              const std::function<void(std::size_t, std::size_t)>& progress) {
  if (jobs < 1) throw std::invalid_argument("run_children: jobs must be at least 1");
  const BlockedSignals blocked;
  std::map<pid_t, std::size_t> running;
  std::vector<int> status(commands.size(), -1);
  std::size_t next = 0, done = 0;
  // Passes the signal on to every child still running and waits for them, so that none outlives the command.
  const auto stop_children = [&](int signal) {
    for (const auto& [pid, index] : running) ::kill(pid, signal);
    for (const auto& [pid, index] : running) {
      int ignored = 0;
      while (::waitpid(pid, &ignored, 0) < 0 && errno == EINTR) {
      }
    }
    throw Interrupted(signal);
  };
  if (progress) progress(0, commands.size());
  while (done < commands.size()) {
    if (g_interrupt != 0) stop_children(g_interrupt);
    while (next < commands.size() && running.size() < static_cast<std::size_t>(jobs)) {
      running[spawn(commands[next])] = next;
      ++next;
    }
    int wstatus = 0;
    const pid_t pid = waitpid(-1, &wstatus, WNOHANG);
    if (pid < 0 && errno != EINTR) throw std::runtime_error(std::string("waitpid failed: ") + std::strerror(errno));
    if (pid <= 0) {
      // Nothing ended yet: sleep until a child ends or SIGINT or SIGTERM arrives.
      siginfo_t info{};
      if (sigwaitinfo(&blocked.set(), &info) > 0 && (info.si_signo == SIGINT || info.si_signo == SIGTERM))
        g_interrupt = info.si_signo;
      continue;
    }
    const auto it = running.find(pid);
    if (it == running.end()) continue;
    status[it->second] = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    running.erase(it);
    ++done;
    if (progress) progress(done, commands.size());
  }
  return status;
}

std::string self_executable() {
  return std::filesystem::read_symlink("/proc/self/exe").string();
}

void print_progress(std::size_t done, std::size_t total, const std::string& what) {
  if (total == 0) return;
  // LCSIM_PROGRESS=lines: a line per update, `lcsim-progress DONE TOTAL WHAT`, for a program that runs lcsim
  // through a pipe and shows the progress its own way (the Python package).
  static const bool lines = [] {
    const char* mode = std::getenv("LCSIM_PROGRESS");
    return mode != nullptr && std::string_view(mode) == "lines";
  }();
  if (lines) {
    std::cerr << "lcsim-progress " << done << ' ' << total << ' ' << what << '\n' << std::flush;
    return;
  }
  if (!isatty(STDERR_FILENO)) return;
  constexpr int kWidth = 40;
  const auto filled = static_cast<int>(kWidth * done / total);
  std::cerr << "\r[" << std::string(static_cast<std::size_t>(filled), '#')
            << std::string(static_cast<std::size_t>(kWidth - filled), '.') << "] " << done << "/" << total << " "
            << what << (done == total ? "\n" : "") << std::flush;
}

WorkFolder::WorkFolder(const std::optional<std::string>& dir, const std::string& prefix) {
  if (dir) {
    path_ = *dir;
    std::error_code made;
    std::filesystem::create_directories(path_, made);
    if (made) throw InputError(path_.string() + ": cannot create the work folder: " + made.message());
    return;
  }
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (!::mkdtemp(pattern.data())) throw InputError(pattern + ": cannot create a temporary folder");
  path_ = pattern;
  remove_ = true;
}

WorkFolder::~WorkFolder() {
  std::error_code ignored;
  if (remove_) std::filesystem::remove_all(path_, ignored);
}

std::string last_line_of(const std::filesystem::path& log) {
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

}  // namespace lcsim
