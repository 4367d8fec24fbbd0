// `lcsim tune`: each policy's best settings and parallel layout. Every candidate of the search space
// (traces/tune.hpp) is estimated in this process, as `lcsim plan` would, on --jobs threads, unless its bounds
// already lose (pruning, traces/tune.hpp); the most promising of each policy are then simulated (`lcsim simulate`
// child processes: SimGrid runs one simulation per process); plans that run out of memory are never accepted.
// A candidate's result depends on nothing else and pruning is decided once all estimates are in, so --jobs
// changes no result.
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
#include "sim/cli.hpp"
#include "sim/command_options.hpp"
#include "sim/process_pool.hpp"
#include "traces/results_io.hpp"
#include "traces/scenario_loader.hpp"
#include "traces/sweep.hpp"
#include "traces/sweep_shard.hpp"
#include "traces/tune.hpp"
#include "traces/tune_candidate.hpp"

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
       "keep every candidate's scenario, results and log in DIR (default: a temporary folder, removed at the end)")  //
      ("quiet,q", "do not print the verdict");
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

/// A candidate's file in the work folder: "candidate-00042.plan.json".
std::string candidate_file_name(int index, const char* suffix) {
  std::ostringstream name;
  name << "candidate-" << std::setw(5) << std::setfill('0') << index << suffix;
  return name.str();
}

/// The tuned policy's figures from a results file (lcsim-results/2).
void read_results(const Json& results, const std::string& label, bool simulated, TuneOutcome& o) {
  for (const auto& p : results.at("policies")) {
    if (p.at("name") != label) continue;
    const double tokens_per_s = p.at("tokens_per_s").get<double>();
    (simulated ? o.simulated_tokens_per_s : o.estimate_tokens_per_s) = tokens_per_s;
    (simulated ? o.simulated : o.estimated) = true;
    o.p99_iteration_s = p.at("p99_iteration_s").get<double>();
    o.oom_iterations = std::max(o.oom_iterations, p.at("oom_iterations").get<int>());
    for (const auto& it : p.at("iterations")) o.peak_gib = std::max(o.peak_gib, it.at("peak_GiB").get<double>());
    return;
  }
  o.failed = "no results for policy " + label;
}

std::string fixed(double v, int precision) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(precision) << v;
  return s.str();
}

void print_verdict(const LoadedScenario& base, const TuneSpace& space, const std::vector<TuneOutcome>& outcomes,
                   const TuneVerdict& verdict, double seconds, bool budget_hit, std::ostream& out) {
  const Scenario& s = base.scenario;
  int estimated = 0, pruned = 0, simulated = 0, refused = 0;
  for (const auto& o : outcomes) estimated += o.estimated, pruned += o.pruned, simulated += o.simulated;
  for (const auto& [label, n] : space.refused) refused += n;
  out << "tune      " << s.name << " (" << s.file << ")\n";
  out << "dataset   " << base.dataset_label << "\n";
  out << "profile   " << base.profile.label() << "\n";
  out << "searched  " << space.candidates.size() << " candidates of " << verdict.policies.size()
      << " policies: " << estimated << " estimated (lcsim plan's estimate), " << pruned
      << " pruned (bounds: out of memory, or below the policy's best estimates), " << simulated
      << " simulated (lcsim simulate); " << refused
      << " refused (a layout or setting the policy or scenario cannot take); " << fixed(seconds, 1) << " s"
      << (budget_hit ? " (stopped by --budget-s)" : "") << "\n\n";
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
      out << "  " << std::left << std::setw(18) << v.policy << std::setw(22) << k.knob << std::right;
      for (const auto& [value, cell] : k.values) out << " " << value << ":" << cell;
      out << "\n";
    }
  }
  out << "\nCandidates with an OOM iteration were rejected: ";
  bool first = true;
  for (const auto& v : verdict.policies) {
    out << (first ? "" : ", ") << v.policy << " " << v.rejected_oom;
    first = false;
  }
  out << ".\n";
}

/// What a candidate that fails in process is recorded as: the words its `lcsim plan` would have ended with.
std::string plan_failure(const std::exception& error) {
  const ErrorReport report = report_error(error);
  return "plan exited " + std::to_string(report.status) + ": " + report.line;
}

/// Estimates `order` (candidates of `space`) in this process, each on whichever of `jobs` threads is free, its
/// scenario named `file_of(index)` in messages. The prune threshold of each policy follows the accepted estimates
/// as they come (those already in `outcomes` included). Stops starting candidates on SIGINT or SIGTERM (then
/// throws Interrupted once the running ones end) or after `budget` seconds since `started`; returns whether the
/// budget stopped it.
bool estimate_in_threads(const TuneSpace& space, const std::vector<const TuneCandidate*>& order, int jobs,
                         CandidateBounds bounds, int keep, std::optional<double> budget,
                         std::chrono::steady_clock::time_point started, const std::function<std::string(int)>& file_of,
                         std::vector<TuneOutcome>& outcomes) {
  std::mutex mutex;  // guards everything below and `outcomes`
  std::map<std::string, std::vector<double>> accepted;
  for (const auto& c : space.candidates)
    if (const TuneOutcome& o = outcomes[static_cast<std::size_t>(c.index)]; o.accepted())
      accepted[c.policy].push_back(o.estimate_tokens_per_s);
  std::size_t next = 0, done = 0;
  bool budget_hit = false;
  const auto worker = [&] {
    for (;;) {
      const TuneCandidate* c = nullptr;
      {
        const std::lock_guard lock(mutex);
        if (interrupt_signal() != 0 || next == order.size() || budget_hit) return;
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        if (budget && elapsed > *budget) {
          budget_hit = true;
          return;
        }
        c = order[next++];
      }
      const auto threshold = [&] {
        const std::lock_guard lock(mutex);
        return prune_threshold(accepted[c->policy], keep);
      };
      TuneOutcome o = estimate_candidate(*c, file_of(c->index), bounds, threshold, plan_failure);
      const std::lock_guard lock(mutex);
      if (o.accepted()) accepted[c->policy].push_back(o.estimate_tokens_per_s);
      o.capacity_gib = outcomes[static_cast<std::size_t>(c->index)].capacity_gib;
      outcomes[static_cast<std::size_t>(c->index)] = std::move(o);
      print_progress(++done, order.size(), "candidates estimated or pruned");
    }
  };
  {
    std::vector<std::jthread> helpers;
    for (int j = 1; j < jobs && static_cast<std::size_t>(j) < order.size(); ++j) helpers.emplace_back(worker);
    worker();
  }
  if (const int signal = interrupt_signal(); signal != 0) throw Interrupted(signal);
  return budget_hit;
}

}  // namespace

void run_tune_command(const std::vector<std::string>& args, std::ostream& out, const ChildRunner& children) {
  const ChildRunner run_commands = children ? children : ChildRunner(run_children);
  const InterruptScope interrupts;  // Ctrl-C and SIGTERM reach the children, then the work folders go
  const auto parsed = parse_file_command("tune", "SCENARIO", args, tune_options(), tune_help(), out);
  if (!parsed) return;
  const po::variables_map& vm = parsed->options;
  const int jobs = vm["jobs"].as<int>();
  if (jobs < 1) throw UsageError("tune: --jobs must be at least 1, got " + std::to_string(jobs), tune_help());
  std::optional<double> budget;
  if (vm.count("budget-s")) {
    budget = vm["budget-s"].as<double>();
    if (!(*budget > 0)) throw UsageError("tune: --budget-s must be positive", tune_help());
  }
  const auto labels = vm.count("policy") ? vm["policy"].as<std::vector<std::string>>() : std::vector<std::string>{};
  std::optional<SweepShard> shard;
  if (vm.count("shard")) {
    shard = parse_sweep_shard(vm["shard"].as<std::string>());
    if (!shard)
      throw UsageError("tune: --shard expects K/N with 1 <= K <= N, got \"" + vm["shard"].as<std::string>() + "\"",
                       tune_help());
    if (!vm.count("slice")) throw UsageError("tune: --shard needs --slice FILE for its estimates", tune_help());
    for (const char* other : {"merge", "json", "csv", "write-scenario"})
      if (vm.count(other)) throw UsageError(std::string("tune: --shard writes a slice, not --") + other, tune_help());
  } else if (vm.count("slice")) {
    throw UsageError("tune: --slice goes with --shard K/N", tune_help());
  }
  const auto started = std::chrono::steady_clock::now();

  Json document = scenario_with_absolute_paths(parse_json_file(parsed->file), parsed->file);
  if (vm.count("iterations")) document["training"]["iterations"] = vm["iterations"].as<int>();
  const LoadedScenario base = load_and_prepare(document, parsed->file);
  const Scenario& scenario = base.scenario;
  for (const auto& label : labels) {
    bool known = false;
    for (const auto& p : scenario.policies) known = known || p.label == label;
    if (!known) throw InputError(parsed->file + ": --policy: no policy labelled \"" + label + "\"");
  }
  std::vector<std::string> policies;
  for (const auto& p : scenario.policies)
    if (labels.empty() || std::find(labels.begin(), labels.end(), p.label) != labels.end()) policies.push_back(p.label);
  const bool prune = !vm.count("no-prune");
  const int keep = exact_estimates(scenario.tune.simulate_top);
  // What makes two runs the same search: the scenario as run, the policies tuned, and whether it prunes.
  const std::string digest = scenario_digest(Json{{"scenario", document}, {"policies", labels}, {"prune", prune}});

  const TuneSpace space = expand_tune_space(scenario, document, scenario.tune, labels);
  std::vector<TuneOutcome> outcomes(space.candidates.size());
  const double capacity_gib = base.cost->capacity_bytes() / (1024.0 * 1024 * 1024);
  for (auto& o : outcomes) o.capacity_gib = capacity_gib;

  OutputGuard guard;
  guard.add_inputs(scenario_inputs(base));
  if (vm.count("merge")) guard.add_inputs(vm["merge"].as<std::vector<std::string>>());
  for (const auto& output : output_options(vm, {"json", "csv", "slice", "write-scenario"}))
    guard.add_output(output.option, output.file);
  if (vm.count("work")) {
    std::vector<std::string> names;
    for (const auto& c : space.candidates)
      for (const char* suffix : {".json", ".plan.json", ".plan.log", ".sim.json", ".sim.log"})
        names.push_back(candidate_file_name(c.index, suffix));
    guard.add_folder("--work " + vm["work"].as<std::string>(), vm["work"].as<std::string>(), names);
  }
  guard.check();

  const WorkFolder work(vm.count("work") ? std::optional<std::string>(vm["work"].as<std::string>()) : std::nullopt,
                        "lcsim-tune");
  const fs::path& dir = work.path();
  const auto name_of = [&](int i, const char* suffix) { return dir / candidate_file_name(i, suffix); };
  const std::string exe = self_executable();
  const auto command = [&](const TuneCandidate& c, const char* mode) {
    const bool sim = std::string(mode) == "simulate";
    // One world per candidate: the search compares nominal figures (an interval per candidate would cost
    // --samples times the search).
    return ChildCommand{{exe, mode, name_of(c.index, ".json").string(), "--json",
                         name_of(c.index, sim ? ".sim.json" : ".plan.json").string(), "--quiet", "--samples", "1",
                         "--policy", c.policy},
                        name_of(c.index, sim ? ".sim.log" : ".plan.log").string()};
  };
  const auto collect = [&](const TuneCandidate& c, int status, bool sim) {
    TuneOutcome& o = outcomes[static_cast<std::size_t>(c.index)];
    if (status != 0) {
      o.failed = std::string(sim ? "simulate" : "plan") + " exited " + std::to_string(status) + ": " +
                 last_line_of(name_of(c.index, sim ? ".sim.log" : ".plan.log"));
      return;
    }
    read_results(parse_json_file(name_of(c.index, sim ? ".sim.json" : ".plan.json").string(), kMaxResultsFileBytes),
                 c.policy, sim, o);
  };

  // Estimate every candidate (of this slice; none when merging slices). A policy that plans only in its own
  // process gets `lcsim plan` children, in chunks so that --budget-s can stop between them; the others run in this
  // process, the cheapest first (the most replicas: a replica's program grows with the GPUs and micro-batches it
  // holds), so that the incumbents that prune the costly ones come early.
  std::vector<const TuneCandidate*> mine;
  if (vm.count("merge")) {
    std::vector<std::pair<std::string, TuneSlice>> slices;
    for (const auto& file : vm["merge"].as<std::vector<std::string>>())
      slices.emplace_back(file, tune_slice_from_json(parse_json_file(file), file));
    outcomes = merge_tune_slices(slices, digest, space.candidates.size());
    for (auto& o : outcomes) o.capacity_gib = capacity_gib;
  } else {
    for (const auto& c : space.candidates)
      if (!shard || in_sweep_shard(static_cast<std::size_t>(c.index), *shard)) mine.push_back(&c);
  }
  for (const auto* c : mine) write_file_atomically(name_of(c->index, ".json").string(), c->scenario.dump(1));
  std::vector<const TuneCandidate*> own_process, in_process;
  for (const auto* c : mine) (c->own_process ? own_process : in_process).push_back(c);
  bool budget_hit = false;
  const std::size_t chunk = static_cast<std::size_t>(jobs) * 8;
  for (std::size_t first = 0; first < own_process.size(); first += chunk) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (budget && elapsed > *budget) {
      budget_hit = true;
      break;
    }
    const std::size_t last = std::min(own_process.size(), first + chunk);
    std::vector<ChildCommand> commands;
    for (std::size_t i = first; i < last; ++i) commands.push_back(command(*own_process[i], "plan"));
    const auto status = run_commands(commands, jobs, [&](std::size_t done, std::size_t) {
      print_progress(first + done, own_process.size(), "candidates estimated (own processes)");
    });
    for (std::size_t i = first; i < last; ++i) collect(*own_process[i], status[i - first], false);
  }
  std::stable_sort(in_process.begin(), in_process.end(),
                   [](const TuneCandidate* a, const TuneCandidate* b) { return a->layout.dp > b->layout.dp; });
  // A slice cannot prune, the incumbents being spread over the slices: it bounds every candidate for the merge.
  const CandidateBounds bounds = !prune ? CandidateBounds::None : shard ? CandidateBounds::All : CandidateBounds::Prune;
  if (!budget_hit)
    budget_hit = estimate_in_threads(
        space, in_process, jobs, bounds, keep, budget, started,
        [&](int index) { return name_of(index, ".json").string(); }, outcomes);
  if (shard) {
    TuneSlice slice{digest, shard->index, shard->count, static_cast<int>(space.candidates.size()), {}};
    for (const auto* c : mine) slice.estimates.emplace_back(c->index, outcomes[static_cast<std::size_t>(c->index)]);
    std::vector<std::string> written;
    write_output(vm["slice"].as<std::string>(), tune_slice_to_json(slice).dump(1) + "\n", written);
    if (!vm.count("quiet"))
      out << "tune      slice " << shard->index << "/" << shard->count << ": " << mine.size() << " of "
          << space.candidates.size() << " candidates estimated into " << vm["slice"].as<std::string>() << "\n";
    return;
  }

  if (prune) prune_candidates(space, outcomes, keep);

  // Simulate the most promising candidates of each policy.
  std::vector<const TuneCandidate*> to_simulate;
  for (const auto& label : policies)
    for (int i : most_promising(space.candidates, outcomes, label, scenario.tune.simulate_top))
      to_simulate.push_back(&space.candidates[static_cast<std::size_t>(i)]);
  std::vector<ChildCommand> commands;
  for (const auto* c : to_simulate) commands.push_back(command(*c, "simulate"));
  const auto status = run_commands(commands, jobs, [&](std::size_t done, std::size_t total) {
    print_progress(done, total, "candidates simulated");
  });
  for (std::size_t i = 0; i < to_simulate.size(); ++i) collect(*to_simulate[i], status[i], true);

  const TuneVerdict verdict = judge_tune(space, outcomes, policies);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  // Built before anything is written: a verdict that is not one scenario (InputError) writes no file.
  std::optional<std::string> tuned;
  if (vm.count("write-scenario")) {
    const std::string file = vm["write-scenario"].as<std::string>();
    const Json original = scenario_with_absolute_paths(parse_json_file(parsed->file), parsed->file);
    const Json doc = tuned_scenario(original, scenario, space, verdict);
    scenario_from_json(doc, file);  // lcsim can read what it writes
    tuned = scenario_with_paths_relative_to(doc, file).dump(2) + "\n";
  }
  std::vector<std::string> written;
  if (vm.count("json"))
    write_output(vm["json"].as<std::string>(),
                 tune_to_json(scenario, base.profile.label(), base.dataset_label, space, outcomes, verdict,
                              prune ? std::optional<int>(keep) : std::nullopt)
                         .dump(1) +
                     "\n",
                 written);
  if (vm.count("csv")) write_output(vm["csv"].as<std::string>(), tune_to_csv(space, outcomes), written);
  if (tuned) write_output(vm["write-scenario"].as<std::string>(), *tuned, written);
  if (!vm.count("quiet")) print_verdict(base, space, outcomes, verdict, seconds, budget_hit, out);
}

}  // namespace lcsim
