// `lcsim plan`: closed-form comparison of a scenario's policies.
#include <sstream>

#include <boost/program_options.hpp>

#include "sim/cli.hpp"
#include "traces/evaluation.hpp"
#include "traces/results_io.hpp"
#include "traces/scenario_loader.hpp"

namespace lcsim {
namespace {

namespace po = boost::program_options;

constexpr const char* kPlanUsage = "Usage: lcsim plan SCENARIO [options]\n";

po::options_description plan_options() {
  po::options_description options("Options", 110, 60);
  options.add_options()              //
      ("help,h", "print this help")  //
      ("policy,p", po::value<std::vector<std::string>>()->composing()->value_name("LABEL"),
       "evaluate only the policy with this label (repeatable); the baseline is always evaluated so that "
       "speedups exist")                                                                                             //
      ("iterations,n", po::value<int>()->value_name("N"), "global batches to plan, overriding training.iterations")  //
      ("json", po::value<std::string>()->value_name("FILE"), "write results JSON (schema lcsim-results/1) to FILE")  //
      ("csv", po::value<std::string>()->value_name("FILE"), "write one CSV row per policy and iteration to FILE")    //
      ("quiet,q", "do not print the comparison table");
  return options;
}

std::string plan_help() {
  std::ostringstream text;
  text << kPlanUsage
       << "\nEvery policy of SCENARIO plans the same global batches (the scenario's dataset, seed and batch size).\n"
          "Each plan is checked (every sequence exactly once, valid GPUs and ranks; a plan that exceeds GPU memory\n"
          "is reported as an OOM iteration), then timed with the closed-form cost-model estimate -- no contention\n"
          "or overlap is simulated. Prints one row per policy: iteration time (mean, p50, p99), tokens/s, speedup\n"
          "over the baseline, HBP balance metrics (DBR, PR, ABR, CR), OOM iterations and planning wall time.\n\n"
       << plan_options();
  return text.str();
}

}  // namespace

void run_plan_command(const std::vector<std::string>& args, std::ostream& out) {
  po::options_description hidden;
  hidden.add_options()("scenario", po::value<std::vector<std::string>>());
  po::options_description all;
  all.add(plan_options()).add(hidden);
  po::positional_options_description positional;
  positional.add("scenario", -1);

  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(std::string("plan: ") + e.what(), plan_help());
  }
  if (vm.count("help")) {
    out << plan_help();
    return;
  }
  const auto scenarios =
      vm.count("scenario") ? vm["scenario"].as<std::vector<std::string>>() : std::vector<std::string>{};
  if (scenarios.size() != 1)
    throw UsageError(scenarios.empty() ? "plan: missing SCENARIO file"
                                       : "plan: expected one SCENARIO file, got " + std::to_string(scenarios.size()),
                     plan_help());

  std::optional<int> iterations;
  if (vm.count("iterations")) iterations = vm["iterations"].as<int>();
  const auto labels = vm.count("policy") ? vm["policy"].as<std::vector<std::string>>() : std::vector<std::string>{};

  const LoadedScenario loaded = load_and_prepare(scenarios.front(), iterations);
  const RunResults results = evaluate_plans(loaded, labels);
  if (vm.count("json")) write_results_json(results, vm["json"].as<std::string>());
  if (vm.count("csv")) write_results_csv(results, vm["csv"].as<std::string>());
  if (!vm.count("quiet")) print_results_table(results, out);
}

}  // namespace lcsim
