// `lcsim simulate`: SimGrid comparison of a scenario's policies.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <sstream>

#include <boost/program_options.hpp>

#include "base/terminal.hpp"
#include "cli/cli.hpp"
#include "cli/command_options.hpp"
#include "cli/progress.hpp"
#include "cli/simulate_command.hpp"
#include "formats/html_report.hpp"
#include "formats/results_io.hpp"
#include "formats/scenario_loader.hpp"
#include "studies/evaluation.hpp"
#include "studies/model_scaling.hpp"
#include "studies/report_data.hpp"
#include "studies/simulate_scenario.hpp"

namespace lcsim {
namespace {

namespace po = boost::program_options;

constexpr const char* kSimulateUsage = "Usage: lcsim simulate SCENARIO [options]\n";

/// print_progress of the iterations simulated, naming the policy of the last one.
void draw_progress(std::size_t done, std::size_t total, const std::string& label) {
  print_progress(done, total, "iterations simulated (" + label + ")");
}

}  // namespace

po::options_description simulate_options(bool with_report) {
  po::options_description options("Options", 110, 60);
  options.add_options()              //
      ("help,h", "print this help")  //
      ("policy,p", po::value<std::vector<std::string>>()->composing()->value_name("LABEL"),
       "simulate only the policy with this label (repeatable); the baseline is always simulated so that "
       "speedups exist")  //
      ("iterations,n", po::value<int>()->value_name("N"),
       "global batches to plan (at most 10000), overriding training.iterations")  //
      ("layers", po::value<int>()->value_name("N"),
       "scale the model down to N layers (the prediction for `lcsim-gpu live --layers N`)")  //
      ("json", po::value<std::string>()->value_name("FILE"),
       "write results JSON (schema lcsim-results/2, mode simulate, with per-GPU busy_s and idle_s) to FILE")       //
      ("csv", po::value<std::string>()->value_name("FILE"), "write one CSV row per policy and iteration to FILE")  //
      ("trace", po::value<std::string>()->value_name("FILE"),
       "write the timeline of every simulated iteration as Chrome trace JSON (open in https://ui.perfetto.dev)")  //
      ("layer-granularity", po::value<int>()->value_name("K")->default_value(0),
       "layers simulated as one block of compute and communication: 1 = every layer, 0 = all layers of a "
       "pipeline stage folded into one block (fastest; per-layer blocks moved the shipped scenarios' times by "
       "under 1%)")  //
      ("all-flows",
       "simulate every collective as flows, even those of groups that have their links to themselves "
       "and are otherwise timed in closed form (same results, slower: to check that)")  //
      ("quiet,q", "do not print the comparison table")                                  //
      ("wide", "print every column (default: the table fits the terminal, or 120 columns when not a terminal)");
  if (with_report)
    options.add_options()("report", po::value<std::string>()->value_name("FILE"),
                          "write the self-contained HTML report page (as `lcsim report`) to FILE");
  add_uncertainty_options(options);
  return options;
}

namespace {

std::string simulate_help() {
  std::ostringstream text;
  text << kSimulateUsage
       << "\nEvery policy of SCENARIO plans the same global batches, exactly as in `lcsim plan`; the plans then run\n"
          "in a SimGrid simulation of the scenario's cluster: one actor per GPU, compute for the cost model's\n"
          "seconds, collectives as flows over NVLink (a star per node) and InfiniBand (a fat-tree, one NIC per GPU)\n"
          "sharing links (a group whose links nothing else uses is timed in closed form, as its flows would run\n"
          "alone), Skrull's overlap, 1F1B pipelines, ZeRO gradient sync and the optimizer step. Prints one\n"
          "row per policy: iteration time (mean, p50, p99), tokens/s, speedup over the baseline, busy time of the\n"
          "busiest and least busy GPU, OOM iterations, the closed-form estimate of the same plans and the wall and\n"
          "CPU time per simulated iteration. A progress bar goes to stderr when it is a terminal.\n"
          "With --samples N above 1 (default 32), N-1 sampled worlds (other data, the profile's fitted fields within\n"
          "their fit error, the model-form term) give each policy p10-p90 intervals and P(beats the baseline): the\n"
          "nominal world is simulated, the others estimated and scaled to it (docs/uncertainty.md).\n\n"
       << simulate_options();
  return text.str();
}

}  // namespace

void run_simulate_command(const std::vector<std::string>& args, std::ostream& out) {
  const auto parsed = parse_file_command("simulate", "SCENARIO", args, simulate_options(), simulate_help(), out);
  if (!parsed) return;
  const po::variables_map& vm = parsed->options;
  if (vm["layer-granularity"].as<int>() < 0)
    throw UsageError(
        "simulate: --layer-granularity must be >= 0, got " + std::to_string(vm["layer-granularity"].as<int>()),
        simulate_help());
  simulate_from_options(vm, parsed->file, vm.count("report") ? vm["report"].as<std::string>() : "", out);
}

void simulate_from_options(const po::variables_map& vm, const std::string& scenario_file,
                           const std::string& report_file, std::ostream& out) {
  const int granularity = vm["layer-granularity"].as<int>();
  if (granularity < 0) throw InputError("--layer-granularity must be >= 0, got " + std::to_string(granularity));
  std::optional<int> iterations;
  if (vm.count("iterations")) iterations = vm["iterations"].as<int>();
  LoadedScenario loaded = load_and_prepare(scenario_file, iterations);
  if (vm.count("layers")) scale_model_layers(loaded, vm["layers"].as<int>());
  print_scenario_notes(loaded);
  std::vector<OutputOption> outputs = output_options(vm, {"trace", "json", "csv"});
  if (!report_file.empty()) outputs.push_back({vm.count("out") ? "--out" : "--report", report_file});
  check_output_files(outputs, command_inputs(vm, loaded));

  sim::SimulateSettings settings;
  if (vm.count("policy")) settings.policies = vm["policy"].as<std::vector<std::string>>();
  settings.program.layers_per_block = granularity;
  settings.exclusive_closed_form = !vm.count("all-flows");
  settings.draw_data = draw_data_option(vm);
  settings.world_jobs = world_jobs_option(vm);
  if (vm.count("trace")) settings.trace_file = vm["trace"].as<std::string>();
  settings.progress = draw_progress;
  ReportSpans spans;
  if (!report_file.empty()) {
    settings.record_spans = true;
    settings.on_outcome = [&spans](std::size_t policy, std::size_t iteration, const program::IterationOutcome& o) {
      spans.add(policy, iteration, o);
    };
  }

  const int samples = samples_option(vm);
  const ModelForm model_form = model_form_option(vm);
  settings.world_progress = [](int done, int total) {
    print_progress(static_cast<std::size_t>(done), static_cast<std::size_t>(total), "worlds estimated");
  };

  sim::SimulationReport report = sim::simulate_scenario(loaded, settings);
  sim::attach_sampled_worlds(report, loaded, settings, samples, model_form);
  for (const std::string& warning : out_of_memory_warnings(report.results, loaded)) print_warning(warning);
  std::vector<std::string> written;
  if (!settings.trace_file.empty()) written.push_back(settings.trace_file);  // simulate_scenario wrote it
  if (vm.count("json"))
    write_output(vm["json"].as<std::string>(), sim::simulation_to_json(report).dump(2) + "\n", written);
  if (vm.count("csv")) write_output(vm["csv"].as<std::string>(), results_to_csv(report.results), written);
  if (!report_file.empty()) {
    const nlohmann::json results = nlohmann::json::parse(sim::simulation_to_json(report).dump());
    nlohmann::ordered_json data = report_data_from_results(results, scenario_file);
    add_report_spans(data, spans);
    write_output(report_file, report_page(data), written);
  }
  if (!vm.count("quiet")) {
    const std::size_t columns = output_columns(vm.count("wide") > 0);
    sim::print_simulation_table(report, out, columns);
    out << wrap_lines(own_layouts_line(loaded.scenario), columns);
  }
}

}  // namespace lcsim
