// The only place that maps errors to messages and exit codes.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "policies/core/errors.hpp"
#include "sim/cli.hpp"

namespace lcsim {

int run_main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    run_command_line(args, std::cout);
    std::cout.flush();
    return std::cout ? kExitOk : kExitInternal;
  } catch (const UsageError& e) {
    std::cerr << "lcsim: error: " << e.what() << "\n\n" << e.usage();
    return kExitBadInput;
  } catch (const InputError& e) {
    std::cerr << "lcsim: error: " << e.what() << '\n';
    return kExitBadInput;
  } catch (const PlanningError& e) {
    std::cerr << "lcsim: error: " << e.what() << '\n';
    return kExitPlanning;
  } catch (const std::exception& e) {
    std::cerr << "lcsim: internal error: " << e.what() << '\n';
    return kExitInternal;
  }
}

}  // namespace lcsim
