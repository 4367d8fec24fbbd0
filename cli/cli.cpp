#include "cli/cli.hpp"

namespace lcsim {

std::string main_usage() {
  return "lcsim " LCSIM_VERSION
         " -- compare data-scheduling policies for long-context LLM fine-tuning\n"
         "\n"
         "Usage:\n"
         "  lcsim new FILE [--model NAME] [--gpu NAME] [--nodes N] [--trace FILE | --distribution NAME] ...\n"
         "  lcsim plan SCENARIO [--policy LABEL]... [--iterations N] [--json FILE] [--csv FILE] [--quiet]\n"
         "  lcsim simulate SCENARIO [--policy LABEL]... [--iterations N] [--json FILE] [--csv FILE]\n"
         "                 [--trace FILE] [--report FILE] [--layer-granularity K] [--quiet]\n"
         "  lcsim report RESULTS.json|SCENARIO --out FILE.html\n"
         "  lcsim sweep SWEEP [--jobs N] [--out DIR] [--csv FILE] [--json FILE] [--quiet]\n"
         "  lcsim sweep SWEEP --shard K/N [--jobs N] [--out DIR] [--quiet]\n"
         "  lcsim sweep merge DIR... [--out DIR] [--csv FILE] [--json FILE] [--quiet]\n"
         "  lcsim validate [--catalogue FILE] [--json FILE] [--csv FILE] [--jobs N] [--only ID]... [--work DIR]\n"
         "                 [--profile FILE]...\n"
         "  lcsim tune SCENARIO [--policy LABEL]... [--jobs N] [--budget-s S] [--json FILE] [--csv FILE] [--quiet]\n"
         "             [--shard K/N --slice FILE | --merge FILE...]\n"
         "  lcsim list models|gpus|distributions|policies|finetuning|topologies|profiles\n"
         "  lcsim COMMAND --help\n"
         "  lcsim --help | --version\n"
         "\n"
         "Commands:\n"
         "  new    a scenario for your own case from a few options (then tune, then simulate)\n"
         "  plan   every policy of the scenario plans the same global batches; each plan is validated and timed\n"
         "         by replaying its iteration program without contention; prints a comparison table\n"
         "  simulate the same plans, run in a SimGrid simulation of the cluster (contention, overlap, pipelines,\n"
         "         gradient sync); prints a comparison table and can write a Perfetto timeline\n"
         "  report one self-contained HTML page of a results file or a simulated scenario: table, charts,\n"
         "         per-GPU breakdown, timeline\n"
         "  sweep  every point of a sweep file's axes over a base scenario, --jobs processes at a time; merged\n"
         "         CSV and JSON results; --shard K/N runs slice K of N, `sweep merge` joins the slices\n"
         "  validate every published figure of the validation catalogue against lcsim's prediction: error,\n"
         "         ordering, held-out MAPE\n"
         "  tune   each policy's best settings and parallel layout: every candidate estimated, the best\n"
         "         simulated, out-of-memory plans rejected; the winning policy and its margin\n"
         "  list   the built-in models, GPU kinds, length distributions and policy kinds\n"
         "\n"
         "Scenario format: scenarios/README.md. Exit status: 0 success, 2 bad input (scenario, profile, trace,\n"
         "command line), 3 a policy could not plan, 1 internal error.\n";
}

void run_command_line(const std::vector<std::string>& args, std::ostream& out) {
  if (args.empty()) throw UsageError("no command given", main_usage());
  const std::string& command = args.front();
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (command == "--help" || command == "-h" || command == "help") {
    out << main_usage();
  } else if (command == "--version" || command == "-V") {
    out << "lcsim " LCSIM_VERSION "\n";
  } else if (command == "plan") {
    run_plan_command(rest, out);
  } else if (command == "sweep") {
    run_sweep_command(rest, out);
  } else if (command == "simulate") {
    run_simulate_command(rest, out);
  } else if (command == "validate") {
    run_validate_command(rest, out);
  } else if (command == "tune") {
    run_tune_command(rest, out);
  } else if (command == "list") {
    run_list_command(rest, out);
  } else if (command == "report") {
    run_report_command(rest, out);
  } else if (command == "new") {
    run_new_command(rest, out);
  } else {
    throw UsageError("unknown command \"" + command + "\"", main_usage());
  }
}

}  // namespace lcsim
