#include "studies/child_process.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "studies/interrupts.hpp"

namespace lcsim {
namespace {

pid_t plain_fork() {
  return ::fork();
}

ForkFunction g_fork = plain_fork;

// A record: a kind byte ('p' progress, 'A' the answer), a 64-bit length, the payload.
constexpr std::size_t kHeaderBytes = 1 + sizeof(std::uint64_t);

void send_record(int fd, char kind, const std::string& payload) {
  std::string record(1, kind);
  const std::uint64_t size = payload.size();
  record.append(reinterpret_cast<const char*>(&size), sizeof size);
  record += payload;
  for (std::size_t sent = 0; sent < record.size();) {
    const ssize_t n = ::write(fd, record.data() + sent, record.size() - sent);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(1);  // the parent is gone: nobody to answer
    sent += static_cast<std::size_t>(n);
  }
}

}  // namespace

void set_fork_function(ForkFunction fork_function) {
  g_fork = fork_function != nullptr ? fork_function : plain_fork;
}

ChildProcess::ChildProcess(const Work& work) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(std::string("cannot create a pipe: ") + std::strerror(errno));
  std::fflush(nullptr);  // nothing buffered is written twice
  pid_ = g_fork();
  if (pid_ < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error(std::string("cannot fork: ") + std::strerror(errno));
  }
  if (pid_ == 0) {
    ::close(fds[0]);
    // The parent's InterruptScope records signals; the child must stop when the parent passes one on.
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    set_host_signal_check(nullptr);  // the host's check (Python's handlers) is the parent's, as is its interpreter
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, nullptr);
    const int out = fds[1];
    const std::string answer = work([out](const std::string& text) { send_record(out, 'p', text); });
    send_record(out, 'A', answer);
    _exit(0);
  }
  ::close(fds[1]);
  fd_ = fds[0];
}

ChildProcess::~ChildProcess() {
  if (fd_ >= 0) ::close(fd_);
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int ignored = 0;
    while (::waitpid(pid_, &ignored, 0) < 0 && errno == EINTR) {
    }
  }
}

bool ChildProcess::read_available() {
  char chunk[65536];
  const ssize_t n = ::read(fd_, chunk, sizeof chunk);
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  if (n == 0) return false;
  buffer_.append(chunk, static_cast<std::size_t>(n));
  parse_records();
  return true;
}

void ChildProcess::parse_records() {
  std::size_t at = 0;
  while (buffer_.size() - at >= kHeaderBytes) {
    std::uint64_t size = 0;
    std::memcpy(&size, buffer_.data() + at + 1, sizeof size);
    if (buffer_.size() - at - kHeaderBytes < size) break;
    std::string payload = buffer_.substr(at + kHeaderBytes, size);
    if (buffer_[at] == 'p')
      reports_.push_back(std::move(payload));
    else
      answer_ = std::move(payload);
    at += kHeaderBytes + size;
  }
  buffer_.erase(0, at);
}

std::vector<std::string> ChildProcess::take_reports() {
  std::vector<std::string> out;
  out.swap(reports_);
  return out;
}

std::string ChildProcess::finish() {
  while (read_available()) {
  }
  ::close(fd_);
  fd_ = -1;
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  if (!answer_ || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error(
        "the run's process ended without an answer (" +
        (WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status)) : "status " + std::to_string(status)) +
        ")");
  return *answer_;
}

void ChildProcess::signal(int signal) const {
  if (pid_ > 0) ::kill(pid_, signal);
}

}  // namespace lcsim
