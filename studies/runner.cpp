#include "studies/runner.hpp"

#include <poll.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "base/errors.hpp"
#include "base/files.hpp"
#include "base/temporary_files.hpp"
#include "formats/results_io.hpp"
#include "formats/scenario_loader.hpp"
#include "studies/child_process.hpp"
#include "studies/evaluation.hpp"
#include "studies/interrupts.hpp"
#include "studies/simulate_scenario.hpp"

namespace lcsim {
namespace {

/// The outcome, through the pipe: status, error, warning and table, NUL-separated, then the results document.
std::string encode(const RunOutcome& o) {
  return std::to_string(o.status) + '\0' + o.error + '\0' + o.warning + '\0' + o.table + '\0' +
         (o.status == kExitOk ? o.results.dump() : std::string());
}

RunOutcome decode(const std::string& text) {
  RunOutcome o;
  std::size_t at = 0;
  const auto field = [&] {
    const std::size_t end = text.find('\0', at);
    if (end == std::string::npos) throw std::runtime_error("a run's process sent a malformed answer");
    std::string value = text.substr(at, end - at);
    at = end + 1;
    return value;
  };
  o.status = std::stoi(field());
  o.error = field();
  o.warning = field();
  o.table = field();
  if (o.status == kExitOk) o.results = nlohmann::ordered_json::parse(text.substr(at));
  return o;
}

/// Whether the run needs a process of its own: a SimGrid simulation, or a plan with a policy that reads or
/// changes process-wide state. A scenario that does not load runs here, and fails here with its message.
bool needs_child(const RunRequest& request) {
  if (request.mode == RunMode::Simulate) return true;
  try {
    const Scenario scenario = scenario_from_json(request.scenario, request.file);
    return std::any_of(scenario.policies.begin(), scenario.policies.end(),
                       [](const PolicySpec& spec) { return needs_own_process(spec); });
  } catch (const std::exception&) {
    return false;
  }
}

/// Warnings one a line, as RunOutcome::warning holds them.
std::string joined_lines(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += (text.empty() ? "" : "\n") + line;
  return text;
}

PolicyProgress policy_steps(const StepsProgress& steps, const std::string& what) {
  if (!steps) return {};
  return [steps, what](std::size_t done, std::size_t total, const std::string& label) {
    steps(done, total, label.empty() ? what : what + " (now " + label + ")");
  };
}

WorldProgress world_steps(const StepsProgress& steps, const std::string& what) {
  if (!steps) return {};
  return [steps, what](int done, int total) {
    steps(static_cast<std::size_t>(done), static_cast<std::size_t>(total), what);
  };
}

RunOutcome plan_here(const RunRequest& r, const ModelForm& model_form, const StepsProgress& steps) {
  const LoadedScenario loaded = load_and_prepare(r.scenario, r.file, r.iterations);
  const RunResults results = evaluate_with_samples(
      loaded, r.policies, checked_samples(r.samples), model_form, policy_steps(steps, "policies planned"),
      world_steps(steps, "sampled worlds"), r.draw_data, checked_world_jobs(r.world_jobs));
  RunOutcome o;
  o.warning = joined_lines(out_of_memory_warnings(results, loaded));
  o.results = results_to_json(results);
  std::ostringstream table;
  print_results_table(results, table);
  table << own_layouts_line(loaded.scenario);
  o.table = table.str();
  return o;
}

RunOutcome simulate_here(const RunRequest& r, const ModelForm& model_form, const StepsProgress& steps) {
  const LoadedScenario loaded = load_and_prepare(r.scenario, r.file, r.iterations);
  sim::SimulateSettings settings;
  settings.policies = r.policies;
  settings.draw_data = r.draw_data;
  settings.world_jobs = checked_world_jobs(r.world_jobs);
  settings.trace_file = r.trace_file;
  settings.progress = policy_steps(steps, "iterations simulated");
  settings.world_progress = world_steps(steps, "sampled worlds");
  sim::SimulationReport report = sim::simulate_scenario(loaded, settings);
  sim::attach_sampled_worlds(report, loaded, settings, checked_samples(r.samples), model_form);
  RunOutcome o;
  o.warning = joined_lines(out_of_memory_warnings(report.results, loaded));
  o.results = sim::simulation_to_json(report);
  std::ostringstream table;
  sim::print_simulation_table(report, table);
  table << own_layouts_line(loaded.scenario);
  o.table = table.str();
  return o;
}

/// The run here; bad input and a policy that cannot plan are its outcome, any other exception comes through.
RunOutcome run_reporting_own_errors(const RunRequest& r, const ModelForm& model_form, const StepsProgress& steps) {
  try {
    return r.mode == RunMode::Simulate ? simulate_here(r, model_form, steps) : plan_here(r, model_form, steps);
  } catch (const InputError& e) {
    const ErrorReport report = report_error(e);
    return {report.status, report.line, {}, {}, {}};
  } catch (const PlanningError& e) {
    const ErrorReport report = report_error(e);
    return {report.status, report.line, {}, {}, {}};
  }
}

/// Runs `request` in a forked child, its step reports passed to `steps` as "done total what" records.
std::unique_ptr<ChildProcess> start_child(const RunRequest& request, const ModelForm& model_form, bool report_steps) {
  return std::make_unique<ChildProcess>([&request, &model_form, report_steps](const ChildProcess::Report& report) {
    StepsProgress steps;
    if (report_steps)
      steps = [&report](std::size_t done, std::size_t total, const std::string& what) {
        report(std::to_string(done) + ' ' + std::to_string(total) + ' ' + what);
      };
    return encode(run_here(request, model_form, steps));
  });
}

/// A step record ("done total what") back as its three parts.
void forward_step(const std::string& record, const StepsProgress& steps) {
  std::istringstream line(record);
  std::size_t done = 0, total = 0;
  line >> done >> total;
  std::string what;
  std::getline(line >> std::ws, what);
  steps(done, total, what);
}

/// The child's outcome; a child that ended without one (killed, crashed) is an internal error of that run.
RunOutcome finish_child(ChildProcess& child) {
  try {
    return decode(child.finish());
  } catch (const std::exception& e) {
    return {kExitInternal, "lcsim: internal error: " + std::string(e.what()), {}, {}, {}};
  }
}

/// How long a Runner waits on its children's pipes before it looks for a signal again.
constexpr int kSignalPollMs = 200;

/// Ends a child that has not answered (SIGKILL, reaped) and removes the temporary file it was writing (a
/// simulation's trace), which a killed process cannot remove itself.
void abandon_child(std::unique_ptr<ChildProcess>& child, const RunRequest& request) {
  if (child == nullptr) return;
  const pid_t pid = child->pid();
  child.reset();
  if (!request.trace_file.empty() && pid > 0) remove_temporaries_of(request.trace_file, pid);
}

/// Runs requests `indices` in children, `jobs` at a time, waiting on their pipes; SIGINT or SIGTERM (recorded by
/// an InterruptScope) stops every child and throws Interrupted, and so does whatever the host's signal check
/// throws (check_host_signals: KeyboardInterrupt in the Python package).
void run_children(const std::vector<RunRequest>& requests, const std::vector<std::size_t>& indices, int jobs,
                  const ModelForm& model_form, std::vector<RunOutcome>& outcomes, const std::function<void()>& ended) {
  std::vector<std::pair<std::size_t, std::unique_ptr<ChildProcess>>> running;
  const auto abandon_all = [&] {
    for (auto& [index, child] : running) abandon_child(child, requests[index]);
    running.clear();
  };
  std::size_t next = 0;
  try {
    while (next < indices.size() || !running.empty()) {
      if (const int signal = interrupt_signal(); signal != 0) {
        for (auto& [index, child] : running) child->signal(signal);
        abandon_all();
        throw Interrupted(signal);
      }
      check_host_signals();
      while (next < indices.size() && running.size() < static_cast<std::size_t>(jobs)) {
        running.emplace_back(indices[next], start_child(requests[indices[next]], model_form, false));
        ++next;
      }
      std::vector<pollfd> fds;
      for (const auto& [index, child] : running) fds.push_back({child->fd(), POLLIN, 0});
      if (::poll(fds.data(), fds.size(), kSignalPollMs) <= 0) continue;  // a timeout or a signal: look again
      for (std::size_t k = fds.size(); k-- > 0;) {
        if (fds[k].revents == 0 || running[k].second->read_available()) continue;
        outcomes[running[k].first] = finish_child(*running[k].second);
        running.erase(running.begin() + static_cast<std::ptrdiff_t>(k));
        ended();
      }
    }
  } catch (...) {
    abandon_all();
    throw;
  }
}

}  // namespace

ErrorReport report_error(const std::exception& error) {
  const std::string what = terminal_text(error.what());
  if (dynamic_cast<const InputError*>(&error)) return {kExitBadInput, "lcsim: error: " + what};
  if (dynamic_cast<const PlanningError*>(&error)) return {kExitPlanning, "lcsim: error: " + what};
  return {kExitInternal, "lcsim: internal error: " + what};
}

std::string run_error_message(const RunOutcome& outcome) {
  for (const char* prefix : {"lcsim: error: ", "lcsim: internal error: "})
    if (outcome.error.rfind(prefix, 0) == 0) return outcome.error.substr(std::string(prefix).size());
  return outcome.error;
}

std::string run_log_text(const RunOutcome& outcome) {
  std::string text;
  std::istringstream warnings(outcome.warning);
  for (std::string line; std::getline(warnings, line);) text += "lcsim: warning: " + line + "\n";
  return text + (outcome.error.empty() ? "" : outcome.error + "\n");
}

RunOutcome run_here(const RunRequest& request, const ModelForm& model_form, const StepsProgress& steps) {
  try {
    return run_reporting_own_errors(request, model_form, steps);
  } catch (const std::exception& e) {
    const ErrorReport report = report_error(e);
    return {report.status, report.line, {}, {}, {}};
  }
}

LocalRunner::LocalRunner(ModelForm model_form) : model_form_(std::move(model_form)) {}

std::vector<RunOutcome> LocalRunner::run(const std::vector<RunRequest>& requests, int jobs,
                                         const RunsProgress& progress) {
  if (jobs < 1) throw std::invalid_argument("Runner::run: jobs must be at least 1");
  std::vector<RunOutcome> outcomes(requests.size());
  std::vector<std::size_t> in_children, here;
  for (std::size_t i = 0; i < requests.size(); ++i) (needs_child(requests[i]) ? in_children : here).push_back(i);
  std::mutex mutex;  // guards `done` and the progress callback
  std::size_t done = 0;
  const auto ended = [&] {
    const std::lock_guard lock(mutex);
    ++done;
    if (progress) progress(done, requests.size());
  };
  if (progress) progress(0, requests.size());
  // Children first, while this process runs no thread of its own: a fork copies only the forking thread.
  run_children(requests, in_children, jobs, model_form_, outcomes, ended);
  std::size_t next = 0;
  const auto worker = [&] {
    for (;;) {
      std::size_t index = 0;
      {
        const std::lock_guard lock(mutex);
        if (next == here.size() || interrupt_signal() != 0) return;
        index = here[next++];
      }
      outcomes[index] = run_here(requests[index], model_form_, {});
      ended();
    }
  };
  {
    std::vector<std::jthread> threads;
    for (int j = 1; j < jobs && static_cast<std::size_t>(j) < here.size(); ++j) threads.emplace_back(worker);
    worker();
  }
  if (const int signal = interrupt_signal(); signal != 0) throw Interrupted(signal);
  return outcomes;
}

RunOutcome LocalRunner::run_one(const RunRequest& request, const StepsProgress& steps) {
  // Here, only lcsim's own errors are the run's outcome: anything else (an exception `steps` raised, a host's
  // interrupt) is the caller's and comes through.
  if (!needs_child(request)) return run_reporting_own_errors(request, model_form_, steps);
  auto child = start_child(request, model_form_, static_cast<bool>(steps));
  try {
    for (;;) {
      check_host_signals();
      pollfd fd{child->fd(), POLLIN, 0};
      if (::poll(&fd, 1, kSignalPollMs) <= 0) continue;  // a timeout or a signal: look again
      if (!child->read_available()) break;
      if (!steps) continue;
      for (const std::string& record : child->take_reports()) forward_step(record, steps);
    }
  } catch (...) {
    abandon_child(child, request);
    throw;
  }
  return finish_child(*child);
}

}  // namespace lcsim
