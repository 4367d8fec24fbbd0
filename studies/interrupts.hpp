#pragma once
// Ctrl-C and SIGTERM during an experiment: recorded while a scope lives, passed on to the experiment's child
// processes, and raised as Interrupted once they have stopped, so that unwinding removes what the run made.
#include <stdexcept>

namespace lcsim {

/// SIGINT or SIGTERM reached an experiment that runs children: they were sent the signal too and waited for.
/// `lcsim` exits 128 + signal (130, 143).
class Interrupted : public std::runtime_error {
 public:
  explicit Interrupted(int signal);
  int signal() const { return signal_; }

 private:
  int signal_;
};

/// While one lives, SIGINT and SIGTERM are recorded instead of ending the process, so that a Runner can pass them
/// on to its children and the experiment can clean up (sweep, tune and validate hold one). A signal the caller
/// ignores stays ignored.
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
/// Records `signal` as if it had arrived (a Runner that saw it through sigwaitinfo or poll); 0 forgets it (a host
/// that runs experiment after experiment in one process, the Python package, starts each afresh).
void record_interrupt_signal(int signal);

/// A host's own check for signals that arrived while lcsim ran its code: the Python module's runs the handlers of
/// the interpreter (PyErr_CheckSignals), so that Ctrl-C raises KeyboardInterrupt there. It throws to stop the run;
/// unwinding ends the run's children and removes what it made. nullptr (the command line): none.
using HostSignalCheck = void (*)();
void set_host_signal_check(HostSignalCheck check);
/// Runs the host's check, if any. Called while a Runner waits on a child, between sampled worlds and between
/// policies, and by a host's code around the calls it makes (a policy written in Python).
void check_host_signals();

}  // namespace lcsim
