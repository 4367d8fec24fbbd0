// The only place that maps errors to messages and exit codes.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "base/files.hpp"
#include "sim/cli.hpp"
#include "sim/process_pool.hpp"

namespace lcsim {

ErrorReport report_error(const std::exception& error) {
  const std::string what = terminal_text(error.what());
  if (dynamic_cast<const InputError*>(&error)) return {kExitBadInput, "lcsim: error: " + what};
  if (dynamic_cast<const PlanningError*>(&error)) return {kExitPlanning, "lcsim: error: " + what};
  return {kExitInternal, "lcsim: internal error: " + what};
}

int run_main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    run_command_line(args, std::cout);
    std::cout.flush();
    if (const int signal = interrupt_signal(); signal != 0) return 128 + signal;  // a signal after the last child
    if (!std::cout) {
      std::cerr << "lcsim: error: cannot write the standard output\n";
      return kExitInternal;
    }
    return kExitOk;
  } catch (const Interrupted& e) {
    std::cerr << "lcsim: " << e.what() << ": children stopped, temporary folders removed\n";
    return 128 + e.signal();
  } catch (const UsageError& e) {
    const ErrorReport report = report_error(e);
    std::cerr << report.line << "\n\n" << e.usage();
    return report.status;
  } catch (const std::exception& e) {
    const ErrorReport report = report_error(e);
    std::cerr << report.line << '\n';
    return report.status;
  }
}

}  // namespace lcsim
