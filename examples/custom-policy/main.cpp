// lcsim with one more policy: `longest-first`. Every lcsim command works as before (plan, simulate, sweep,
// validate, list), and scenarios may name "kind": "longest-first".
#include "cli/cli.hpp"
#include "longest_first_policy.hpp"

int main(int argc, char** argv) {
  lcsim::register_policy("longest-first", example::make_longest_first);
  return lcsim::run_main(argc, argv);
}
