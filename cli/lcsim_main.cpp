// lcsim: the command line, with the built-in policies.
#include "cli/cli.hpp"

int main(int argc, char** argv) {
  return lcsim::run_main(argc, argv);
}
