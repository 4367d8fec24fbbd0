// `_lcsim`: the C++ engine behind the Python package `lcsim` (python/lcsim/__init__.py). Thin: scenarios and
// results cross as JSON text, read and written by the same code as the command line's, so nothing is implemented
// twice. Bad input raises lcsim.InputError (a ValueError) naming the file and key; a policy that cannot plan raises
// lcsim.PlanningError.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/errors.hpp"
#include "base/files.hpp"
#include "model/model.hpp"
#include "model/topology.hpp"
#include "model/workload.hpp"
#include "policies/core/policy.hpp"
#include "python/python_policy.hpp"
#include "sim/cli.hpp"
#include "sim/command_options.hpp"
#include "sim/process_pool.hpp"
#include "sim/simulate_scenario.hpp"
#include "traces/results_io.hpp"
#include "traces/scenario.hpp"
#include "traces/scenario_loader.hpp"
#include "traces/sweep.hpp"
#include "traces/sweep_results.hpp"
#include "traces/uncertainty.hpp"

namespace py = pybind11;

namespace lcsim {
namespace {

nlohmann::json parse_document(const std::string& text, const std::string& file) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(file + ": not JSON: " + e.what());
  }
}

ModelForm shipped_model_form() {
  const std::string shipped = shipped_model_form_file();
  return std::filesystem::exists(shipped) ? load_model_form(shipped, kShippedModelFormName) : ModelForm{};
}

/// The scenario checked as `lcsim plan` checks it; returns nothing, raises InputError naming the key.
void check_scenario(const std::string& text, const std::string& file) {
  scenario_from_json(parse_document(text, file), file);
}

/// A run's results document (lcsim-results JSON) and the table the command line prints for it.
using DocumentAndTable = std::pair<std::string, std::string>;

/// Where a run reports progress: (done, total, what), as the command line's bar says it. Empty: nowhere.
using ProgressSink = std::function<void(std::size_t, std::size_t, const std::string&)>;

/// The run's callbacks over `sink`: policies planned or iterations simulated, then sampled worlds.
PolicyProgress step_progress(const ProgressSink& sink, const std::string& what) {
  if (!sink) return {};
  return [sink, what](std::size_t done, std::size_t total, const std::string& label) {
    sink(done, total, label.empty() ? what : what + " (now " + label + ")");
  };
}
WorldProgress world_progress(const ProgressSink& sink) {
  if (!sink) return {};
  return [sink](int done, int total) {
    sink(static_cast<std::size_t>(done), static_cast<std::size_t>(total), "sampled worlds");
  };
}

/// A Python callable as a sink, called with the GIL held from whatever thread reports.
ProgressSink python_sink(const py::object& callback) {
  if (callback.is_none()) return {};
  return [held = python::gil_held(callback)](std::size_t done, std::size_t total, const std::string& what) {
    py::gil_scoped_acquire gil;
    (*held)(done, total, what);
  };
}

/// `lcsim plan` on the scenario `text` read as if from `file`.
DocumentAndTable plan(const std::string& text, const std::string& file, int samples, std::optional<int> iterations,
                      const std::vector<std::string>& policies, bool draw_data, int jobs,
                      const ProgressSink& progress) {
  const LoadedScenario loaded = load_and_prepare(parse_document(text, file), file, iterations);
  const RunResults results = evaluate_with_samples(loaded, policies, checked_samples(samples), shipped_model_form(),
                                                   step_progress(progress, "policies planned"),
                                                   world_progress(progress), draw_data, checked_world_jobs(jobs));
  std::ostringstream table;
  print_results_table(results, table);
  return {results_to_json(results).dump(), table.str()};
}

DocumentAndTable simulate_here(const std::string& text, const std::string& file, int samples,
                               std::optional<int> iterations, const std::vector<std::string>& policies, bool draw_data,
                               int jobs, const std::string& trace, const ProgressSink& progress) {
  const LoadedScenario loaded = load_and_prepare(parse_document(text, file), file, iterations);
  sim::SimulateSettings settings;
  settings.policies = policies;
  settings.draw_data = draw_data;
  settings.world_jobs = checked_world_jobs(jobs);
  settings.trace_file = trace;
  settings.progress = step_progress(progress, "iterations simulated");
  settings.world_progress = world_progress(progress);
  sim::SimulationReport report = sim::simulate_scenario(loaded, settings);
  sim::attach_sampled_worlds(report, loaded, settings, checked_samples(samples), shipped_model_form());
  std::ostringstream table;
  sim::print_simulation_table(report, table);
  return {sim::simulation_to_json(report).dump(), table.str()};
}

/// fork(), following Python's protocol (os.fork's) when the child may run Python code: a policy written in Python.
pid_t fork_process() {
  if (!python::python_policies_registered()) return fork();
  py::gil_scoped_acquire gil;
  PyOS_BeforeFork();
  const pid_t child = fork();
  if (child == 0) {
    PyOS_AfterFork_Child();
  } else {
    PyOS_AfterFork_Parent();
  }
  return child;
}

// The child's messages to the parent: a kind byte, a 64-bit length, the payload. 'p' reports progress ("done total
// what"); the last is 'O' (the document, a NUL, the table) or an error: 'I' input, 'P' planning, 'E' other.
void send_record(int fd, char kind, const std::string& payload) {
  std::string record(1, kind);
  const std::uint64_t size = payload.size();
  record.append(reinterpret_cast<const char*>(&size), sizeof size);
  record += payload;
  for (std::size_t sent = 0; sent < record.size();) {
    const ssize_t n = write(fd, record.data() + sent, record.size() - sent);
    if (n <= 0) _exit(1);
    sent += static_cast<std::size_t>(n);
  }
}

/// Reads exactly `size` bytes; false at the end of the pipe.
bool read_exactly(int fd, char* data, std::size_t size) {
  for (std::size_t got = 0; got < size;) {
    const ssize_t n = read(fd, data + got, size - got);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (n == 0 || errno != EINTR) {
      return false;
    }
  }
  return true;
}

/// `lcsim simulate`'s results document. SimGrid runs one engine per process, so each simulation runs in a child
/// process; its progress, then its document or its error and kind, come back through a pipe.
DocumentAndTable simulate(const std::string& text, const std::string& file, int samples, std::optional<int> iterations,
                          const std::vector<std::string>& policies, bool draw_data, int jobs, const std::string& trace,
                          const ProgressSink& progress) {
  checked_world_jobs(jobs);  // before the fork: the caller's error, raised here
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) throw std::runtime_error("simulate: cannot create a pipe");
  std::fflush(nullptr);
  const pid_t child = fork_process();
  if (child < 0) throw std::runtime_error("simulate: cannot fork");
  if (child == 0) {
    close(pipe_fds[0]);
    const int out = pipe_fds[1];
    ProgressSink report;
    if (progress) {
      report = [out](std::size_t done, std::size_t total, const std::string& what) {
        send_record(out, 'p', std::to_string(done) + ' ' + std::to_string(total) + ' ' + what);
      };
    }
    try {
      const auto [document, table] =
          simulate_here(text, file, samples, iterations, policies, draw_data, jobs, trace, report);
      send_record(out, 'O', document + '\0' + table);
    } catch (const InputError& e) {
      send_record(out, 'I', e.what());
    } catch (const PlanningError& e) {
      send_record(out, 'P', e.what());
    } catch (const std::exception& e) {
      send_record(out, 'E', e.what());
    }
    _exit(0);
  }
  close(pipe_fds[1]);
  char kind = 0;
  std::string body;
  for (;;) {
    std::uint64_t size = 0;
    if (!read_exactly(pipe_fds[0], &kind, 1) || !read_exactly(pipe_fds[0], reinterpret_cast<char*>(&size), 8)) {
      kind = 0;
      break;
    }
    body.assign(size, '\0');
    if (!read_exactly(pipe_fds[0], body.data(), size)) {
      kind = 0;
      break;
    }
    if (kind != 'p') break;
    std::istringstream line(body);
    std::size_t done = 0, total = 0;
    line >> done >> total;
    std::string what;
    std::getline(line >> std::ws, what);
    try {
      progress(done, total, what);
    } catch (...) {  // the caller's progress callback raised: end the child, then let it through
      kill(child, SIGKILL);
      close(pipe_fds[0]);
      waitpid(child, nullptr, 0);
      throw;
    }
  }
  close(pipe_fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (kind == 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("simulate: the simulation process ended without a result (status " +
                             std::to_string(status) + ")");
  switch (kind) {
    case 'O': {
      const std::size_t split = body.find('\0');
      if (split == std::string::npos) throw std::runtime_error("simulate: the simulation process sent no table");
      return {body.substr(0, split), body.substr(split + 1)};
    }
    case 'I':
      throw InputError(body);
    case 'P':
      throw PlanningError(body);
    default:
      throw std::runtime_error(body);
  }
}

/// `lcsim sweep SWEEP --out DIR` run in this process (for policies written in Python, which the command cannot
/// load): each point's scenario and results written into `dir` as the command writes them, the points planned or
/// simulated one after another, the merged lcsim-sweep document returned.
std::string sweep_in_process(const std::string& sweep_file, const std::string& dir, const ProgressSink& progress) {
  const Sweep sweep = load_sweep(sweep_file);
  const std::vector<SweepPoint> points = expand_sweep(sweep);
  std::filesystem::create_directories(dir);
  std::vector<SweepPointResult> results;
  for (std::size_t k = 0; k < points.size(); ++k) {
    const SweepPoint& point = points[k];
    const auto index = static_cast<std::size_t>(point.index);
    const std::string file = sweep_point_path(dir, index, ".json").string();
    write_sweep_point_scenario(dir, point);
    const std::string text = point.scenario.dump();
    const DocumentAndTable run = sweep.mode == "plan"
                                     ? plan(text, file, sweep.samples, std::nullopt, {}, true, 1, {})
                                     : simulate(text, file, sweep.samples, std::nullopt, {}, true, 1, "", {});
    nlohmann::ordered_json document = nlohmann::ordered_json::parse(run.first);
    write_file_atomically(sweep_point_path(dir, index, ".results.json").string(), document.dump(2) + "\n");
    results.push_back({&point, file, std::move(document)});
    if (progress) progress(k + 1, points.size(), "points");
  }
  return sweep_results_to_json(sweep, results).dump();
}

/// One `lcsim plan|simulate CANDIDATE --json FILE --quiet --samples 1 --policy LABEL` of lcsim tune, run here: its
/// results file written, or its message in its log, and the command's exit status returned.
int run_tune_child(const ChildCommand& command) {
  const std::vector<std::string>& argv = command.argv;
  const auto after = [&](const std::string& flag) {
    const auto it = std::find(argv.begin(), argv.end(), flag);
    if (it == argv.end() || it + 1 == argv.end()) throw std::logic_error("tune child without " + flag);
    return *(it + 1);
  };
  if (argv.size() < 3) throw std::logic_error("tune child without mode and scenario");
  const std::string& mode = argv[1];
  const std::string& scenario = argv[2];
  std::string message;
  int status = 0;
  try {
    const std::string text = read_input_file(scenario, kMaxJsonFileBytes);
    const std::vector<std::string> only{after("--policy")};
    const DocumentAndTable run = mode == "simulate" ? simulate(text, scenario, 1, std::nullopt, only, true, 1, "", {})
                                                    : plan(text, scenario, 1, std::nullopt, only, true, 1, {});
    write_file_atomically(after("--json"), run.first + "\n");
  } catch (const InputError& e) {
    status = 2, message = e.what();
  } catch (const PlanningError& e) {
    status = 3, message = e.what();
  } catch (const std::exception& e) {
    status = 1, message = e.what();
  }
  write_file_atomically(command.log, status == 0 ? "" : "lcsim: error: " + message + "\n");
  return status;
}

/// `lcsim tune SCENARIO_FILE --json OUT --jobs N [--budget-s S]` in this process (for policies written in Python):
/// candidates estimated on threads as the command does, its plan and simulate children run here one after another.
void tune_in_process(const std::string& scenario_file, const std::string& out, int jobs,
                     std::optional<double> budget_s) {
  std::vector<std::string> args{scenario_file, "--json", out, "--quiet", "--jobs", std::to_string(jobs)};
  if (budget_s) args.insert(args.end(), {"--budget-s", std::to_string(*budget_s)});
  std::ostringstream ignored;
  run_tune_command(args, ignored, [](const std::vector<ChildCommand>& commands, int, const auto& progress) {
    std::vector<int> statuses;
    for (const ChildCommand& command : commands) {
      statuses.push_back(run_tune_child(command));
      if (progress) progress(statuses.size(), commands.size());
    }
    return statuses;
  });
}

/// The document with its relative paths (profile, dataset trace) made absolute against `file`'s folder.
std::string with_absolute_paths(const std::string& text, const std::string& file) {
  return scenario_with_absolute_paths(parse_document(text, file), file).dump();
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& m : named_models()) names.push_back(m.name);
  return names;
}

std::vector<std::string> gpu_names() {
  std::vector<std::string> names;
  for (const auto& g : named_gpus()) names.push_back(g.name);
  return names;
}

std::vector<std::string> distribution_names() {
  std::vector<std::string> names;
  for (const auto& d : named_distributions()) names.push_back(d.name);
  return names;
}

std::vector<std::string> topology_names() {
  std::vector<std::string> names;
  for (const auto& t : topology_kinds()) names.emplace_back(t.name);
  return names;
}

}  // namespace
}  // namespace lcsim

PYBIND11_MODULE(_lcsim, m) {
  m.doc() = "lcsim's C++ engine; use the package `lcsim`, not this module.";
  m.attr("__version__") = LCSIM_VERSION;
  py::register_exception<lcsim::InputError>(m, "InputError", PyExc_ValueError);
  py::register_exception<lcsim::PlanningError>(m, "PlanningError", PyExc_RuntimeError);
  m.def("check_scenario", &lcsim::check_scenario, py::arg("text"), py::arg("file"),
        "Checks a scenario document (JSON text) as the command line does; raises InputError naming the key.");
  m.def(
      "plan",
      [](const std::string& text, const std::string& file, int samples, std::optional<int> iterations,
         const std::vector<std::string>& policies, bool draw_data, int jobs, const py::object& progress) {
        const lcsim::ProgressSink sink = lcsim::python_sink(progress);
        py::gil_scoped_release release;
        return lcsim::plan(text, file, samples, iterations, policies, draw_data, jobs, sink);
      },
      py::arg("text"), py::arg("file"), py::arg("samples"), py::arg("iterations"), py::arg("policies"),
      py::arg("draw_data"), py::arg("jobs"), py::arg("progress"),
      "`lcsim plan` on a scenario document; returns (the results document as JSON text, the printed table).");
  m.def(
      "simulate",
      [](const std::string& text, const std::string& file, int samples, std::optional<int> iterations,
         const std::vector<std::string>& policies, bool draw_data, int jobs, const std::string& trace,
         const py::object& progress) {
        const lcsim::ProgressSink sink = lcsim::python_sink(progress);
        py::gil_scoped_release release;
        return lcsim::simulate(text, file, samples, iterations, policies, draw_data, jobs, trace, sink);
      },
      py::arg("text"), py::arg("file"), py::arg("samples"), py::arg("iterations"), py::arg("policies"),
      py::arg("draw_data"), py::arg("jobs"), py::arg("trace"), py::arg("progress"),
      "`lcsim simulate` on a scenario document, in a child process; returns (the results document as JSON text, the "
      "printed table).");
  m.def(
      "sweep",
      [](const std::string& sweep_file, const std::string& dir, const py::object& progress) {
        const lcsim::ProgressSink sink = lcsim::python_sink(progress);
        py::gil_scoped_release release;
        return lcsim::sweep_in_process(sweep_file, dir, sink);
      },
      py::arg("sweep_file"), py::arg("dir"), py::arg("progress"),
      "`lcsim sweep SWEEP --out DIR` in this process, point after point; returns the merged document as JSON text.");
  m.def("tune", &lcsim::tune_in_process, py::arg("scenario_file"), py::arg("out"), py::arg("jobs"), py::arg("budget_s"),
        py::call_guard<py::gil_scoped_release>(),
        "`lcsim tune SCENARIO --json OUT` in this process: its plan and simulate children run here.");
  m.def("with_absolute_paths", &lcsim::with_absolute_paths, py::arg("text"), py::arg("file"),
        "The scenario document with its relative paths made absolute against the folder of `file`.");
  m.def("models", &lcsim::model_names, "Built-in model names.");
  m.def("gpus", &lcsim::gpu_names, "Built-in GPU kinds.");
  m.def("distributions", &lcsim::distribution_names, "Built-in length distributions.");
  m.def("policies", &lcsim::policy_kinds, "Registered policy kinds.");
  m.def("topologies", &lcsim::topology_names, "Registered cluster topologies.");
  lcsim::python::bind_policy_types(m);
  m.def("register_policy", &lcsim::python::register_python_policy, py::arg("kind"), py::arg("cls"),
        "Registers a policy class written in Python under `kind` (lcsim.register_policy wraps it).");
}
