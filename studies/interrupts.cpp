#include "studies/interrupts.hpp"

#include <signal.h>

#include <atomic>
#include <string>
#include <utility>

namespace lcsim {
namespace {

/// The signal SIGINT or SIGTERM delivered (0: none yet). Atomic: `lcsim tune`'s estimating threads read it while
/// the handler may write it; lock-free, so the handler may.
std::atomic<int> g_interrupt{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void record_interrupt(int signal) {
  g_interrupt = signal;
}

std::atomic<HostSignalCheck> g_host_check{nullptr};

/// The actions an InterruptScope replaced, restored when it ends.
struct sigaction g_previous_int {};
struct sigaction g_previous_term {};

}  // namespace

Interrupted::Interrupted(int signal)
    : std::runtime_error(std::string("interrupted by ") + (signal == SIGINT ? "SIGINT" : "SIGTERM")), signal_(signal) {}

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

void record_interrupt_signal(int signal) {
  g_interrupt = signal;
}

void set_host_signal_check(HostSignalCheck check) {
  g_host_check = check;
}

void check_host_signals() {
  if (const HostSignalCheck check = g_host_check; check != nullptr) check();
}

}  // namespace lcsim
