// `_lcsim`: the C++ engine behind the Python package `lcsim` (python/lcsim/__init__.py). Thin: scenarios and
// results cross as JSON text, read and written by the same code as the command line's, so nothing is implemented
// twice. Bad input raises lcsim.InputError (a ValueError) naming the file and key; a policy that cannot plan raises
// lcsim.PlanningError.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <optional>
#include <sstream>
#include <utility>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/errors.hpp"
#include "model/model.hpp"
#include "model/topology.hpp"
#include "model/workload.hpp"
#include "policies/core/policy.hpp"
#include "python/python_policy.hpp"
#include "sim/command_options.hpp"
#include "sim/simulate_scenario.hpp"
#include "traces/results_io.hpp"
#include "traces/scenario.hpp"
#include "traces/scenario_loader.hpp"
#include "traces/sweep.hpp"
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

/// `lcsim plan` on the scenario `text` read as if from `file`.
DocumentAndTable plan(const std::string& text, const std::string& file, int samples, std::optional<int> iterations,
                      const std::vector<std::string>& policies, bool draw_data) {
  const LoadedScenario loaded = load_and_prepare(parse_document(text, file), file, iterations);
  const RunResults results =
      evaluate_with_samples(loaded, policies, checked_samples(samples), shipped_model_form(), {}, {}, draw_data);
  std::ostringstream table;
  print_results_table(results, table);
  return {results_to_json(results).dump(), table.str()};
}

DocumentAndTable simulate_here(const std::string& text, const std::string& file, int samples,
                               std::optional<int> iterations, const std::vector<std::string>& policies, bool draw_data,
                               const std::string& trace) {
  const LoadedScenario loaded = load_and_prepare(parse_document(text, file), file, iterations);
  sim::SimulateSettings settings;
  settings.policies = policies;
  settings.draw_data = draw_data;
  settings.trace_file = trace;
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

/// `lcsim simulate`'s results document. SimGrid runs one engine per process, so each simulation runs in a child
/// process; its document, or its error and kind, come back through a pipe.
DocumentAndTable simulate(const std::string& text, const std::string& file, int samples, std::optional<int> iterations,
                          const std::vector<std::string>& policies, bool draw_data, const std::string& trace) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) throw std::runtime_error("simulate: cannot create a pipe");
  std::fflush(nullptr);
  const pid_t child = fork_process();
  if (child < 0) throw std::runtime_error("simulate: cannot fork");
  if (child == 0) {
    close(pipe_fds[0]);
    std::string message;
    char kind = 'O';
    try {
      // The document, then the table after a NUL (neither holds one).
      const auto [document, table] = simulate_here(text, file, samples, iterations, policies, draw_data, trace);
      message = document + '\0' + table;
    } catch (const InputError& e) {
      kind = 'I', message = e.what();
    } catch (const PlanningError& e) {
      kind = 'P', message = e.what();
    } catch (const std::exception& e) {
      kind = 'E', message = e.what();
    }
    message.insert(message.begin(), kind);
    for (std::size_t sent = 0; sent < message.size();) {
      const ssize_t n = write(pipe_fds[1], message.data() + sent, message.size() - sent);
      if (n <= 0) _exit(1);
      sent += static_cast<std::size_t>(n);
    }
    _exit(0);
  }
  close(pipe_fds[1]);
  std::string received;
  char buffer[65536];
  for (;;) {
    const ssize_t n = read(pipe_fds[0], buffer, sizeof buffer);
    if (n > 0) {
      received.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(pipe_fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (received.empty() || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("simulate: the simulation process ended without a result (status " +
                             std::to_string(status) + ")");
  const std::string body = received.substr(1);
  switch (received.front()) {
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
  m.def("plan", &lcsim::plan, py::arg("text"), py::arg("file"), py::arg("samples"), py::arg("iterations"),
        py::arg("policies"), py::arg("draw_data"), py::call_guard<py::gil_scoped_release>(),
        "`lcsim plan` on a scenario document; returns (the results document as JSON text, the printed table).");
  m.def("simulate", &lcsim::simulate, py::arg("text"), py::arg("file"), py::arg("samples"), py::arg("iterations"),
        py::arg("policies"), py::arg("draw_data"), py::arg("trace"), py::call_guard<py::gil_scoped_release>(),
        "`lcsim simulate` on a scenario document, in a child process; returns (the results document as JSON text, the "
        "printed table).");
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
