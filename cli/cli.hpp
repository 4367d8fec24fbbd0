#pragma once
// The `lcsim` command line. Sub-commands throw (InputError for bad input, PlanningError when a policy cannot
// plan); only main() turns exceptions into messages and exit codes.
#include <exception>
#include <ostream>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "cli/progress.hpp"
#include "studies/runner.hpp"

namespace lcsim {

/// A command line that does not parse (unknown sub-command, missing argument); main() prints `usage` after it.
class UsageError : public InputError {
 public:
  UsageError(const std::string& message, std::string usage) : InputError(message), usage_(std::move(usage)) {}
  const std::string& usage() const { return usage_; }

 private:
  std::string usage_;
};

/// The whole `lcsim` program: runs the command line, prints errors and returns the exit code. A program that adds
/// its own policies (register_policy) calls it from main(), and is then `lcsim` with those policies.
int run_main(int argc, char** argv);

std::string main_usage();
/// Runs `lcsim <args>` (args without the program name), printing to `out`.
void run_command_line(const std::vector<std::string>& args, std::ostream& out);

/// `lcsim plan ...` (args after "plan").
void run_plan_command(const std::vector<std::string>& args, std::ostream& out);
/// `lcsim sweep ...` (args after "sweep").
void run_sweep_command(const std::vector<std::string>& args, std::ostream& out);
/// `lcsim simulate ...` (args after "simulate").
void run_simulate_command(const std::vector<std::string>& args, std::ostream& out);
/// `lcsim validate ...` (args after "validate").
void run_validate_command(const std::vector<std::string>& args, std::ostream& out);
/// `lcsim tune ...` (args after "tune").
void run_tune_command(const std::vector<std::string>& args, std::ostream& out);
/// `lcsim list ...` (args after "list").
void run_list_command(const std::vector<std::string>& args, std::ostream& out);
/// `lcsim report INPUT --out FILE` (cli/report_command.cpp).
void run_report_command(const std::vector<std::string>& args, std::ostream& out);
/// `lcsim new FILE [options]`: a scenario for your own case (cli/new_command.cpp).
void run_new_command(const std::vector<std::string>& args, std::ostream& out);

}  // namespace lcsim
