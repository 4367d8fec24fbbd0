// The only place that turns errors into messages and exit codes (report_error, studies/runner.hpp, words them).
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "base/files.hpp"
#include "cli/cli.hpp"
#include "cli/progress.hpp"
#include "studies/interrupts.hpp"

namespace lcsim {

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
