// lcsim: the only place that maps errors to messages and exit codes.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "policies/core/errors.hpp"
#include "sim/cli.hpp"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    lcsim::run_command_line(args, std::cout);
    std::cout.flush();
    return std::cout ? lcsim::kExitOk : lcsim::kExitInternal;
  } catch (const lcsim::UsageError& e) {
    std::cerr << "lcsim: error: " << e.what() << "\n\n" << e.usage();
    return lcsim::kExitBadInput;
  } catch (const lcsim::InputError& e) {
    std::cerr << "lcsim: error: " << e.what() << '\n';
    return lcsim::kExitBadInput;
  } catch (const lcsim::PlanningError& e) {
    std::cerr << "lcsim: error: " << e.what() << '\n';
    return lcsim::kExitPlanning;
  } catch (const std::exception& e) {
    std::cerr << "lcsim: internal error: " << e.what() << '\n';
    return lcsim::kExitInternal;
  }
}
