#include "studies/simulate_scenario.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "base/errors.hpp"
#include "base/files.hpp"
#include "formats/results_io.hpp"
#include "formats/timeline.hpp"
#include "model/metrics.hpp"
#include "model/plan_demand.hpp"
#include "program/estimate.hpp"
#include "program/outcome.hpp"
#include "studies/evaluation.hpp"

namespace lcsim::sim {
namespace {

std::vector<int> used_gpus(const IterationPlan& plan, int world) {
  std::vector<char> used(static_cast<std::size_t>(world), 0);
  for (const auto& replica : plan.replicas)
    for (int g : replica.gpus)
      if (g >= 0 && g < world) used[static_cast<std::size_t>(g)] = 1;
  std::vector<int> out;
  for (int g = 0; g < world; ++g)
    if (used[static_cast<std::size_t>(g)]) out.push_back(g);
  return out;
}

/// One policy's iteration from the simulation, in the results schema.
IterationResult simulated_iteration(const IterationPlan& plan, std::size_t index,
                                    const program::IterationOutcome& outcome, const CostModel& cost) {
  const int world = cost.cluster().world_size();
  program::check_finite(outcome);
  IterationEstimate simulated;  // the simulated figures, in the shape compute_metrics reads
  simulated.seconds = outcome.seconds;
  simulated.busy_seconds = outcome.busy_seconds;
  simulated.peak_bytes = outcome.peak_bytes;
  simulated.propagation_end_s = outcome.propagation_end_s;
  const double capacity = cost.capacity_bytes();
  simulated.oom_gpus = static_cast<int>(
      std::count_if(outcome.peak_bytes.begin(), outcome.peak_bytes.end(), [&](double b) { return b > capacity; }));
  IterationResult result = iteration_result(plan, static_cast<int>(index), simulated, world);
  result.static_bytes = plan_static_bytes(plan, cost);
  return result;
}

std::string format(const char* spec, double value) {
  char text[64];
  std::snprintf(text, sizeof text, spec, value);
  return text;
}

}  // namespace

SimulationReport simulate_scenario(const LoadedScenario& loaded, const SimulateSettings& settings) {
  const CostModel& cost = *loaded.cost;
  const int world = loaded.scenario.cluster.world_size();
  if (world > kMaxSimulatedGpus)
    throw InputError(loaded.scenario.file + ": cluster.nodes: " + std::to_string(loaded.scenario.cluster.nodes) +
                     " nodes of " + std::to_string(loaded.scenario.cluster.gpus_per_node) + " GPUs are " +
                     std::to_string(world) + " GPUs; lcsim simulate takes at most " +
                     std::to_string(kMaxSimulatedGpus) +
                     " (docs/robustness.md), `lcsim plan` estimates larger clusters");
  SimulationReport report;
  report.results = results_header(loaded, "simulate");
  report.layers_per_block = settings.program.layers_per_block;
  report.world_size = world;

  std::vector<PolicyPlans> planned;
  for (const PolicySpec* spec : select_policies(loaded.scenario, settings.policies))
    planned.push_back(plan_policy(loaded, *spec));

  // All plans of all policies, in order, and where each one belongs.
  std::vector<const IterationPlan*> plans;
  std::vector<std::pair<std::size_t, std::size_t>> owner;  // (policy, iteration)
  for (std::size_t p = 0; p < planned.size(); ++p) {
    PolicyResult result;
    result.label = planned[p].spec->label;
    result.kind = planned[p].kind;
    result.planning_ms = planned[p].planning_ms;
    report.results.policies.push_back(std::move(result));
    report.extras.emplace_back();
    for (std::size_t i = 0; i < planned[p].plans.size(); ++i) {
      plans.push_back(&planned[p].plans[i]);
      owner.emplace_back(p, i);
    }
  }

  std::unique_ptr<TimelineWriter> timeline;
  if (!settings.trace_file.empty())
    timeline = std::make_unique<TimelineWriter>(settings.trace_file, loaded.scenario.cluster,
                                                nlohmann::ordered_json{{"scenario", report.results.scenario},
                                                                       {"mode", "simulate"},
                                                                       {"profile", report.results.profile_label},
                                                                       {"dataset", report.results.dataset_label}});

  SimulationOptions options;
  options.program = settings.program;
  options.record_spans = timeline != nullptr || settings.record_spans;
  options.exclusive_closed_form = settings.exclusive_closed_form;
  // The estimate's programs fold each stage's layers: with the same blocks, the simulated programs are the
  // estimate's, and each is built once for both.
  options.estimate = settings.program.layers_per_block <= 0;
  std::vector<double> estimate_s(planned.size(), 0.0);
  std::size_t done = 0;
  simulate(plans, cost, options, [&](program::IterationOutcome&& outcome) {
    const auto [p, i] = owner[outcome.index];
    const IterationPlan& plan = *plans[outcome.index];
    PolicyResult& result = report.results.policies[p];
    SimulatedPolicyExtras& extra = report.extras[p];
    extra.wall_s += outcome.wall_s;
    extra.cpu_s += outcome.cpu_s;
    extra.build_cpu_s += outcome.build_cpu_s;
    estimate_s[p] += outcome.estimate_s;
    result.iterations.push_back(simulated_iteration(plan, i, outcome, cost));
    std::vector<double> idle;
    for (double busy : outcome.busy_seconds) idle.push_back(std::max(0.0, outcome.seconds - busy));
    extra.idle_seconds.push_back(std::move(idle));
    const std::vector<int> used = used_gpus(plan, world);
    double busy_max = 0, busy_min = used.empty() ? 0 : outcome.busy_seconds[static_cast<std::size_t>(used[0])];
    for (int g : used) {
      busy_max = std::max(busy_max, outcome.busy_seconds[static_cast<std::size_t>(g)]);
      busy_min = std::min(busy_min, outcome.busy_seconds[static_cast<std::size_t>(g)]);
    }
    extra.busy_max_mean_s += busy_max;
    extra.busy_min_mean_s += busy_min;
    if (timeline) timeline->add_iteration(result.label, i, plan, outcome);
    if (settings.on_outcome) settings.on_outcome(p, i, outcome);
    if (settings.progress) settings.progress(++done, plans.size(), result.label);
  });
  if (timeline) timeline->close();

  for (std::size_t p = 0; p < planned.size(); ++p) {
    PolicyResult& result = report.results.policies[p];
    SimulatedPolicyExtras& extra = report.extras[p];
    summarize(result);
    const auto n = static_cast<double>(std::max<std::size_t>(1, result.iterations.size()));
    extra.busy_max_mean_s /= n;
    extra.busy_min_mean_s /= n;
    double estimate = estimate_s[p];
    if (!options.estimate) {
      program::Estimator estimator(cost);
      for (const auto& plan : planned[p].plans) estimate += estimator.estimate(plan).seconds;
    }
    extra.estimate_mean_s = estimate / n;
  }
  apply_baseline(report.results);
  return report;
}

nlohmann::ordered_json simulation_to_json(const SimulationReport& report) {
  nlohmann::ordered_json j = results_to_json(report.results);
  auto& policies = j["policies"];
  for (std::size_t p = 0; p < report.extras.size(); ++p) {
    auto& iterations = policies[p]["iterations"];
    for (std::size_t i = 0; i < report.extras[p].idle_seconds.size(); ++i) {
      // Same rounding as every other number of the file: identical runs write identical bytes.
      nlohmann::ordered_json idle = nlohmann::ordered_json::array();
      for (double s : report.extras[p].idle_seconds[i]) idle.push_back(std::strtod(format("%.9g", s).c_str(), nullptr));
      iterations[i]["idle_s"] = std::move(idle);
    }
  }
  return j;
}

void write_simulation_json(const SimulationReport& report, const std::string& file) {
  write_file_atomically(file, simulation_to_json(report).dump(2) + "\n");
}

void print_simulation_table(const SimulationReport& report, std::ostream& out, std::size_t max_columns) {
  const RunResults& r = report.results;
  std::ostringstream header_lines;
  print_results_header(
      r,
      "simulate (SimGrid: " + std::to_string(report.world_size) + " GPUs, " +
          (report.layers_per_block > 0 ? std::to_string(report.layers_per_block) + " layer(s) per simulated block"
                                       : std::string("each stage's layers folded into one block")) +
          ")",
      header_lines);
  out << wrap_lines(header_lines.str(), max_columns);

  std::vector<std::vector<std::string>> rows;
  const bool sampled = r.uncertainty.samples > 1;
  std::vector<std::string> header{"policy", "mean s", "p50 s", "p99 s", "tokens/s", "speedup"};
  std::vector<int> drop{0, 0, 2, 2, 0, 0};
  if (sampled) {
    header.insert(header.end(), interval_headers().begin(), interval_headers().end());
    drop.insert(drop.end(), {1, 0, 0});
  }
  for (const char* column :
       {"busy max s", "busy min s", "OOM iters", "estimate s", "wall ms/iter", "cpu ms/iter", "build ms/iter"})
    header.push_back(column);
  drop.insert(drop.end(), {3, 3, 0, 4, 5, 5, 5});
  rows.push_back(std::move(header));
  for (std::size_t p = 0; p < r.policies.size(); ++p) {
    const PolicyResult& pr = r.policies[p];
    const SimulatedPolicyExtras& ex = report.extras[p];
    const double iterations = static_cast<double>(std::max<std::size_t>(1, pr.iterations.size()));
    std::vector<std::string> row{pr.label,
                                 format("%.4f", pr.mean_iteration_s),
                                 format("%.4f", pr.p50_iteration_s),
                                 format("%.4f", pr.p99_iteration_s),
                                 format("%.0f", pr.tokens_per_s),
                                 format("%.2fx", pr.speedup_vs_baseline)};
    if (sampled) {
      const std::vector<std::string> cells = interval_cells(pr, speedup_reference(r));
      row.insert(row.end(), cells.begin(), cells.end());
    }
    for (std::string cell :
         {format("%.4f", ex.busy_max_mean_s), format("%.4f", ex.busy_min_mean_s), oom_cell(pr),
          format("%.4f", ex.estimate_mean_s), format("%.3f", 1e3 * ex.wall_s / iterations),
          format("%.3f", 1e3 * ex.cpu_s / iterations), format("%.3f", 1e3 * ex.build_cpu_s / iterations)})
      row.push_back(std::move(cell));
    rows.push_back(std::move(row));
  }
  const std::vector<std::string> left_out = print_fitting_rows(rows, drop, max_columns, out);
  const auto shown = [&](const char* column) {
    return std::find(left_out.begin(), left_out.end(), column) == left_out.end();
  };
  std::string notes = speedup_line(r);
  if (shown("busy max s"))
    notes +=
        "; busy max/min: busiest and least busy GPU of the plan (compute + collectives; waits and pipeline "
        "transfers are idle), mean over iterations";
  if (shown("estimate s")) notes += "; estimate s: the same programs without contention (lcsim plan)";
  if (shown("wall ms/iter"))
    notes +=
        "; wall ms/iter, cpu ms/iter: wall and CPU time to simulate one iteration -- build its program from the "
        "plan, then run it (the CPU time is the wall time on a dedicated core); build ms/iter: the building part of "
        "the CPU time; none is written to files";
  if (left_out.empty()) {
    // Every column: the notes exactly as they always read.
    out << speedup_line(r)
        << "; busy max/min: busiest and least busy GPU of the plan (compute + collectives; waits and pipeline\n"
           "transfers are idle), mean over iterations; estimate s: the same programs without contention (lcsim "
           "plan);\n"
           "wall ms/iter, cpu ms/iter: wall and CPU time to simulate one iteration -- build its program from the "
           "plan,\n"
           "then run it (the CPU time is the wall time on a dedicated core); build ms/iter: the building part of the "
           "CPU\n"
           "time; none is written to files\n";
  } else {
    out << wrap_lines(notes + "\n", max_columns);
  }
  out << wrap_lines(out_of_memory_lines(r), max_columns);
  out << wrap_lines(left_out_line(left_out), max_columns);
  std::ostringstream tail;
  if (sampled)
    tail << "sampled worlds: the nominal world is simulated; worlds 1..N-1 are the estimate's, scaled to it: "
            "t_sim(w) = t_sim(0) t_est(w) / t_est(0)\n";
  print_uncertainty_lines(r, tail);
  out << wrap_lines(tail.str(), max_columns);
}

void attach_sampled_worlds(SimulationReport& report, const LoadedScenario& loaded, const SimulateSettings& settings,
                           int samples, const ModelForm& model_form) {
  RunResults& results = report.results;
  std::vector<std::vector<WorldFigures>> worlds(results.policies.size());
  for (std::size_t p = 0; p < results.policies.size(); ++p) worlds[p].push_back(world_figures(results.policies[p]));
  if (samples > 1) {
    const auto estimated = estimate_worlds(loaded, settings.policies, samples, settings.world_progress,
                                           settings.draw_data, settings.world_jobs);
    if (estimated.size() != worlds.size()) throw std::logic_error("simulate: sampled worlds of other policies");
    for (std::size_t p = 0; p < worlds.size(); ++p)
      for (int w = 1; w < samples; ++w)
        worlds[p].push_back(transfer_world(worlds[p][0], estimated[p][0], estimated[p][static_cast<std::size_t>(w)]));
  }
  attach_intervals(results, worlds, sampled_sources(loaded, settings.draw_data),
                   model_form.for_profile(loaded.profile));
}

}  // namespace lcsim::sim
