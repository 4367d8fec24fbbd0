// `lcsim plan`: a scenario's policies compared without contention (the iteration programs replayed).
#include <iostream>
#include <sstream>

#include <boost/program_options.hpp>

#include "base/files.hpp"
#include "base/terminal.hpp"
#include "cli/cli.hpp"
#include "cli/command_options.hpp"
#include "cli/progress.hpp"
#include "formats/results_io.hpp"
#include "formats/scenario_loader.hpp"
#include "studies/evaluation.hpp"
#include "studies/sampled_worlds.hpp"

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
       "speedups exist")  //
      ("iterations,n", po::value<int>()->value_name("N"),
       "global batches to plan (at most 10000), overriding training.iterations")                                     //
      ("json", po::value<std::string>()->value_name("FILE"), "write results JSON (schema lcsim-results/2) to FILE")  //
      ("csv", po::value<std::string>()->value_name("FILE"), "write one CSV row per policy and iteration to FILE")    //
      ("quiet,q", "do not print the comparison table")                                                               //
      ("wide", "print every column (default: the table fits the terminal, or 120 columns when not a terminal)");
  add_uncertainty_options(options);
  return options;
}

std::string plan_help() {
  std::ostringstream text;
  text
      << kPlanUsage
      << "\nEvery policy of SCENARIO plans the same global batches (the scenario's dataset, seed and batch size).\n"
         "Each plan is checked (every sequence exactly once, valid GPUs and ranks; a plan that exceeds GPU memory\n"
         "is reported as an OOM iteration), then timed by replaying its iteration program -- the steps the simulator\n"
         "runs -- without contention between flows. Prints one row per policy: iteration time (mean, p50, p99), "
         "tokens/s, speedup\n"
         "over the baseline, HBP balance metrics (DBR, PR, ABR, CR), OOM iterations and planning wall time (the\n"
         "columns that fit the terminal, or 120 columns in a pipe; --wide: all). A policy with an OOM iteration\n"
         "cannot be the winner; when the baseline is one, speedups are over the fastest policy that fits. A progress\n"
         "bar goes to stderr when it is a terminal (docs/commands.md). Limits: docs/robustness.md.\n"
         "With --samples N above 1 (default 32) the comparison is repeated in N-1 sampled worlds (other data, the\n"
         "profile's fitted fields within their fit error, the model-form term): each policy gets p10-p90 intervals of\n"
         "its iteration time and speedup and P(beats the baseline), and the run P(the winner wins).\n\n"
      << plan_options();
  return text.str();
}

}  // namespace

void run_plan_command(const std::vector<std::string>& args, std::ostream& out) {
  const auto parsed = parse_file_command("plan", "SCENARIO", args, plan_options(), plan_help(), out);
  if (!parsed) return;
  const po::variables_map& vm = parsed->options;

  std::optional<int> iterations;
  if (vm.count("iterations")) iterations = vm["iterations"].as<int>();
  const auto labels = vm.count("policy") ? vm["policy"].as<std::vector<std::string>>() : std::vector<std::string>{};

  const LoadedScenario loaded = load_and_prepare(parsed->file, iterations);
  print_scenario_notes(loaded);
  const std::vector<OutputOption> outputs = output_options(vm, {"json", "csv"});
  check_output_files(outputs, command_inputs(vm, loaded));
  const int samples = samples_option(vm);
  const ModelForm model_form = model_form_option(vm);
  const RunResults results = evaluate_with_samples(
      loaded, labels, samples, model_form,
      [](std::size_t done, std::size_t total, const std::string& label) {
        print_progress(done, total, label.empty() ? "policies planned" : "policies planned (now " + label + ")");
      },
      [](int done, int total) {
        print_progress(static_cast<std::size_t>(done), static_cast<std::size_t>(total), "sampled worlds");
      },
      draw_data_option(vm), world_jobs_option(vm));
  for (const std::string& warning : out_of_memory_warnings(results, loaded))
    print_warning(warning);
  std::vector<std::string> written;
  if (vm.count("json")) write_output(vm["json"].as<std::string>(), results_to_json(results).dump(2) + "\n", written);
  if (vm.count("csv")) write_output(vm["csv"].as<std::string>(), results_to_csv(results), written);
  if (!vm.count("quiet")) {
    const std::size_t columns = output_columns(vm.count("wide") > 0);
    print_results_table(results, out, columns);
    out << wrap_lines(own_layouts_line(loaded.scenario), columns);
  }
}

}  // namespace lcsim
