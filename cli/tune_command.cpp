// `lcsim tune`: each policy's best settings and parallel layout. The search is studies/tune_run.hpp's; this file
// parses the options and prints the verdict.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <boost/program_options.hpp>

#include "base/files.hpp"
#include "base/json_reader.hpp"
#include "base/terminal.hpp"
#include "cli/cli.hpp"
#include "cli/command_options.hpp"
#include "cli/progress.hpp"
#include "formats/results_io.hpp"
#include "formats/scenario_loader.hpp"
#include "studies/interrupts.hpp"
#include "studies/sweep.hpp"
#include "studies/sweep_shard.hpp"
#include "studies/tune.hpp"
#include "studies/tune_candidate.hpp"
#include "studies/tune_run.hpp"

namespace lcsim {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr const char* kTuneUsage = "Usage: lcsim tune SCENARIO [options]\n";

po::options_description tune_options() {
  po::options_description options("Options", 110, 60);
  options.add_options()              //
      ("help,h", "print this help")  //
      ("policy,p", po::value<std::vector<std::string>>()->composing()->value_name("LABEL"),
       "tune only the policy with this label (repeatable)")  //
      ("jobs,j", po::value<int>()->default_value(default_jobs())->value_name("N"),
       "candidates run in parallel (threads; simulations: processes); default: the machine's cores")  //
      ("no-prune", "estimate every candidate: no bounds, no pruning (an exhaustive search)")          //
      ("iterations,n", po::value<int>()->value_name("N"),
       "global batches per candidate, overriding training.iterations")  //
      ("budget-s", po::value<double>()->value_name("S"),
       "stop starting estimates after S seconds; the candidates not reached are reported as not run")                 //
      ("json", po::value<std::string>()->value_name("FILE"), "write every candidate and the verdict (lcsim-tune/1)")  //
      ("csv", po::value<std::string>()->value_name("FILE"), "write one row per candidate")                            //
      ("write-scenario", po::value<std::string>()->value_name("FILE"),
       "write the scenario with each tuned policy at its best: its layout as its parallel, its options, the scenario "
       "keys it tuned")  //
      ("shard", po::value<std::string>()->value_name("K/N"),
       "estimate only slice K of N of the candidates (1-based, like SLURM_ARRAY_TASK_ID) into --slice FILE")   //
      ("slice", po::value<std::string>()->value_name("FILE"), "with --shard: where the slice's estimates go")  //
      ("merge", po::value<std::vector<std::string>>()->composing()->value_name("FILE"),
       "take the estimates from the slice files 1..N of --shard runs (repeatable) instead of running them; then "
       "simulate and judge as one machine does")  //
      ("work", po::value<std::string>()->value_name("DIR"),
       "write every estimated candidate's scenario into DIR (default: none)")  //
      ("quiet,q", "do not print the verdict")                                  //
      ("wide", "lines as long as they come (default: the terminal's width, or 120 columns when not a terminal)");
  return options;
}

std::string tune_help() {
  std::ostringstream text;
  text << kTuneUsage
       << "\nFinds each policy's best settings jointly with the parallel layout (DP x CP x TP x PP over the\n"
          "cluster, TP inside a node) on the scenario's model, data and cluster. The scenario's \"tune\" object says\n"
          "which keys are free; what it leaves out takes the default space (docs/tune.md: Skrull's and RR's\n"
          "BucketSize, the packing length, sorted batching's micro-batch tokens, every layout). Every candidate is\n"
          "estimated as `lcsim plan` would, in this process on --jobs threads, unless bounds from its plans prove it\n"
          "runs out of memory or cannot be among its policy's tune.simulate_top + 2 best estimates (--no-prune:\n"
          "estimate all); the most promising of each policy (tune.simulate_top, default 3) are simulated. A\n"
          "candidate with an iteration out of memory is never accepted. Prints per policy the best\n"
          "and runner-up settings with tokens/s, p99 iteration time and memory headroom, each knob's effect around\n"
          "the best, and the winning policy with its margin; results do not depend on --jobs. On many machines:\n"
          "`--shard K/N --slice FILE` for K = 1..N (e.g. a Slurm job array), then `--merge FILE...` gives the\n"
          "one-machine results.\n\n"
       << tune_options();
  return text.str();
}

std::string fixed(double v, int precision) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(precision) << v;
  return s.str();
}

/// "  policy  knob  value:cell ...", broken before a value that would pass `columns` (0: no limit) and carried on
/// under the first value.
std::string sensitivity_line(const std::string& policy, const KnobSensitivity& k, std::size_t columns) {
  std::ostringstream head;
  head << "  " << std::left << std::setw(18) << policy << std::setw(22) << k.knob;
  std::string line = head.str(), out;
  const std::string indent(line.size(), ' ');
  bool first = true;
  for (const auto& [value, cell] : k.values) {
    const std::string item = value + ":" + cell;
    if (!first && columns > 0 && line.size() + 1 + item.size() > columns) {
      out += line + "\n";
      line = indent;
      first = true;
    }
    line += " " + item;
    first = false;
  }
  out += line + "\n";
  // Why each failed value failed: its error without what locates it in the candidate's own scenario file.
  for (const auto& [value, why] : k.failures) {
    std::string reason = why.substr(0, why.find('\n'));
    if (const std::size_t file = reason.find(".json: "); file != std::string::npos) reason = reason.substr(file + 7);
    if (reason.starts_with("policies[")) {
      if (const std::size_t options = reason.find("].options."); options != std::string::npos)
        reason = reason.substr(options + 10);
    }
    out += wrap_lines("    " + value + " failed: " + reason + "\n", columns);
  }
  return out;
}

void print_verdict(const LoadedScenario& base, const TuneSpace& space, const std::vector<TuneOutcome>& outcomes,
                   const TuneVerdict& verdict, double seconds, bool budget_hit, std::ostream& out,
                   std::size_t columns) {
  const Scenario& s = base.scenario;
  int estimated = 0, pruned = 0, simulated = 0, refused = 0;
  for (const auto& o : outcomes) estimated += o.estimated, pruned += o.pruned, simulated += o.simulated;
  for (const auto& [label, n] : space.refused) refused += n;
  out << "tune      " << s.name << " (" << s.file << ")\n";
  out << "dataset   " << base.dataset_label << "\n";
  out << "profile   " << base.profile.label() << "\n";
  std::ostringstream searched;
  searched << "searched  " << space.candidates.size() << " candidates of " << verdict.policies.size()
           << " policies: " << estimated << " estimated (lcsim plan's estimate), " << pruned
           << " pruned (bounds: out of memory, or below the policy's best estimates), " << simulated
           << " simulated (lcsim simulate); " << refused
           << " refused (a layout or setting the policy or scenario cannot take); " << fixed(seconds, 1) << " s"
           << (budget_hit ? " (stopped by --budget-s)" : "") << "\n\n";
  out << wrap_lines(searched.str(), columns);
  const auto row_of = [&](const std::string& what, const std::optional<int>& index) -> std::vector<std::string> {
    if (!index) return {what, "-", "-", "-", "-", "-"};
    const TuneCandidate& c = space.candidates[static_cast<std::size_t>(*index)];
    const TuneOutcome& o = outcomes[static_cast<std::size_t>(*index)];
    return {what,
            describe_settings(c),
            fixed(o.tokens_per_s(), 0) + (o.simulated ? " (sim)" : " (est)"),
            fixed(o.p99_iteration_s, 3),
            fixed(o.capacity_gib - o.peak_gib, 1),
            std::to_string(c.index)};
  };
  std::vector<std::vector<std::string>> rows = {
      {"policy", "settings", "tokens/s", "p99 s", "headroom GiB", "candidate"}};
  for (const auto& v : verdict.policies) {
    rows.push_back(row_of(v.policy, v.best));
    if (v.runner_up) rows.push_back(row_of("  runner-up", v.runner_up));
  }
  print_aligned_rows(rows, out);
  if (verdict.winner) {
    out << "\nwinner    " << *verdict.winner;
    if (verdict.second)
      out << ", " << fixed(verdict.margin, 2) << "x over " << *verdict.second << " (each at its best)";
    out << "\n";
  } else {
    out << "\nwinner    none: no candidate of any policy planned without running out of memory\n";
  }
  out << "\nsensitivity: estimated throughput relative to the best when only that knob moves\n";
  for (const auto& v : verdict.policies) {
    for (const auto& k : v.sensitivity) {
      if (k.values.size() < 2) continue;
      out << sensitivity_line(v.policy, k, columns);
    }
  }
  std::string rejected = "\nCandidates with an OOM iteration were rejected: ";
  bool first = true;
  for (const auto& v : verdict.policies) {
    rejected += (first ? "" : ", ") + v.policy + " " + std::to_string(v.rejected_oom);
    first = false;
  }
  out << wrap_lines(rejected + ".\n", columns);
}

/// --work DIR: every candidate's scenario, for a reader; nothing reads them back.
void write_work_folder(const std::string& dir, const TuneReport& report) {
  std::error_code made;
  fs::create_directories(dir, made);
  if (made) throw InputError(dir + ": cannot create the work folder: " + made.message());
  for (const auto* c : report.estimated)
    write_file_atomically((fs::path(dir) / tune_candidate_name(c->index, ".json")).string(), c->scenario.dump(1));
}

}  // namespace

void run_tune_command(const std::vector<std::string>& args, std::ostream& out) {
  const InterruptScope interrupts;  // Ctrl-C and SIGTERM reach the children, then the command stops
  const auto parsed = parse_file_command("tune", "SCENARIO", args, tune_options(), tune_help(), out);
  if (!parsed) return;
  const po::variables_map& vm = parsed->options;
  TuneSettings settings;
  settings.file = parsed->file;
  settings.jobs = vm["jobs"].as<int>();
  if (settings.jobs < 1)
    throw UsageError("tune: --jobs must be at least 1, got " + std::to_string(settings.jobs), tune_help());
  if (vm.count("budget-s")) {
    settings.budget_s = vm["budget-s"].as<double>();
    if (!(*settings.budget_s > 0)) throw UsageError("tune: --budget-s must be positive", tune_help());
  }
  if (vm.count("policy")) settings.policies = vm["policy"].as<std::vector<std::string>>();
  if (vm.count("shard")) {
    settings.shard = parse_sweep_shard(vm["shard"].as<std::string>());
    if (!settings.shard)
      throw UsageError("tune: --shard expects K/N with 1 <= K <= N, got \"" + vm["shard"].as<std::string>() + "\"",
                       tune_help());
    if (!vm.count("slice")) throw UsageError("tune: --shard needs --slice FILE for its estimates", tune_help());
    for (const char* other : {"merge", "json", "csv", "write-scenario"})
      if (vm.count(other)) throw UsageError(std::string("tune: --shard writes a slice, not --") + other, tune_help());
  } else if (vm.count("slice")) {
    throw UsageError("tune: --slice goes with --shard K/N", tune_help());
  }
  settings.prune = !vm.count("no-prune");
  if (vm.count("iterations")) settings.iterations = vm["iterations"].as<int>();
  if (vm.count("merge")) settings.merge = vm["merge"].as<std::vector<std::string>>();
  const TunePlan plan = plan_tune(settings);

  OutputGuard guard;
  guard.add_inputs(scenario_inputs(plan.base));
  guard.add_inputs(settings.merge);
  for (const auto& output : output_options(vm, {"json", "csv", "slice", "write-scenario"}))
    guard.add_output(output.option, output.file);
  if (vm.count("work")) {
    std::vector<std::string> names;
    for (const auto& c : plan.space.candidates) names.push_back(tune_candidate_name(c.index, ".json"));
    guard.add_folder("--work " + vm["work"].as<std::string>(), vm["work"].as<std::string>(), names);
  }
  guard.check();

  LocalRunner runner;
  const TuneReport report = run_tune(plan, runner, print_progress);
  if (vm.count("work")) write_work_folder(vm["work"].as<std::string>(), report);
  std::vector<std::string> written;
  if (settings.shard) {
    write_output(vm["slice"].as<std::string>(), tune_report_slice_to_json(plan, report).dump(1) + "\n", written);
    if (!vm.count("quiet"))
      out << "tune      slice " << settings.shard->index << "/" << settings.shard->count << ": "
          << report.estimated.size() << " of " << plan.space.candidates.size() << " candidates estimated into "
          << vm["slice"].as<std::string>() << "\n";
    return;
  }
  // Built before anything is written: a verdict that is not one scenario (InputError) writes no file.
  std::optional<std::string> tuned;
  if (vm.count("write-scenario")) tuned = tuned_scenario_text(plan, report, vm["write-scenario"].as<std::string>());
  if (vm.count("json"))
    write_output(vm["json"].as<std::string>(), tune_report_to_json(plan, report).dump(1) + "\n", written);
  if (vm.count("csv")) write_output(vm["csv"].as<std::string>(), tune_to_csv(plan.space, report.outcomes), written);
  if (tuned) write_output(vm["write-scenario"].as<std::string>(), *tuned, written);
  if (!vm.count("quiet"))
    print_verdict(plan.base, plan.space, report.outcomes, report.verdict, report.seconds, report.budget_hit, out,
                  output_columns(vm.count("wide") > 0));
}

}  // namespace lcsim
