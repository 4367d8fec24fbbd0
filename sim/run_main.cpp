// The only place that maps errors to messages and exit codes.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "policies/core/errors.hpp"
#include "policies/core/files.hpp"
#include "sim/cli.hpp"
#include "sim/process_pool.hpp"

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
    std::cerr << "lcsim: error: " << terminal_text(e.what()) << "\n\n" << e.usage();
    return kExitBadInput;
  } catch (const InputError& e) {
    std::cerr << "lcsim: error: " << terminal_text(e.what()) << '\n';
    return kExitBadInput;
  } catch (const PlanningError& e) {
    std::cerr << "lcsim: error: " << terminal_text(e.what()) << '\n';
    return kExitPlanning;
  } catch (const std::exception& e) {
    std::cerr << "lcsim: internal error: " << terminal_text(e.what()) << '\n';
    return kExitInternal;
  }
}

}  // namespace lcsim
