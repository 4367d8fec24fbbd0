// `_lcsim`: the C++ engine behind the Python package `lcsim` (python/lcsim/__init__.py). Thin: scenarios and
// results cross as JSON text, read and written by the same code as the command line's, so nothing is implemented
// twice. Bad input raises lcsim.InputError (a ValueError) naming the file and key; a policy that cannot plan raises
// lcsim.PlanningError.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <signal.h>
#include <unistd.h>

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
#include "base/json_reader.hpp"
#include "formats/results_io.hpp"
#include "formats/scenario.hpp"
#include "formats/scenario_loader.hpp"
#include "model/model.hpp"
#include "model/topology.hpp"
#include "model/workload.hpp"
#include "policies/core/policy.hpp"
#include "python/python_policy.hpp"
#include "studies/child_process.hpp"
#include "studies/interrupts.hpp"
#include "studies/runner.hpp"
#include "studies/sampled_worlds.hpp"
#include "studies/sweep_run.hpp"
#include "studies/tune_run.hpp"
#include "studies/validate.hpp"

namespace py = pybind11;

namespace lcsim {
namespace {

/// A document from Python (the text json.dumps made of a dict the package checked, or of a file read_json_file
/// read): parsed as strictly as a file, under the same size limit; `name` is the file, or "<dict>".
nlohmann::json parse_document(const std::string& text, const std::string& name) {
  if (text.size() > kMaxJsonFileBytes)
    throw InputError(name + ": is " + std::to_string(text.size()) + " bytes of JSON, more than the " +
                     std::to_string(kMaxJsonFileBytes >> 20) + " MiB lcsim reads here (docs/robustness.md)");
  return parse_json_text(text, name);
}

/// The text of the JSON file `file`, read by the command line's reader (a regular file of at most 64 MiB: no
/// device, pipe or directory is opened) and parsed as strictly (duplicate keys, numbers beyond a double, syntax):
/// the package then parses it with Python's json, which keeps the file's order of keys.
std::string read_json_file(const std::string& file) {
  if (file.empty()) throw InputError("the file name is empty");
  if (file.find('\0') != std::string::npos) throw InputError("a file name holds a NUL character");
  std::string text = read_input_file(file, kMaxJsonFileBytes);
  parse_json_text(text, file);
  return text;
}

/// Messages raised into Python as the command line prints them (terminal_text): a long echoed value cut, control
/// bytes escaped. Any byte that is not UTF-8 is replaced rather than lost with the message.
void raise_python(PyObject* type, const std::string& message) {
  const std::string text = terminal_text(message);
  PyObject* value = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
  if (value == nullptr) return;  // the decoder's own error stands
  PyErr_SetObject(type, value);
  Py_DECREF(value);
}

PyObject* g_input_error = nullptr;
PyObject* g_planning_error = nullptr;

/// lcsim's exceptions as Python's: InputError and PlanningError with bounded messages, and an interrupted run
/// (Interrupted: a sweep, validate or tune stopped by SIGINT) as KeyboardInterrupt, as Ctrl-C is anywhere else.
void translate_exception(std::exception_ptr error) {
  try {
    if (error) std::rethrow_exception(error);
  } catch (const InputError& e) {
    raise_python(g_input_error, e.what());
  } catch (const PlanningError& e) {
    raise_python(g_planning_error, e.what());
  } catch (const Interrupted& e) {
    if (e.signal() == SIGINT)
      PyErr_SetNone(PyExc_KeyboardInterrupt);
    else
      raise_python(PyExc_RuntimeError, e.what());
  }
}

/// The host's signal check (studies/interrupts.hpp): runs the interpreter's signal handlers, so that Ctrl-C during a
/// run raises KeyboardInterrupt (or whatever the program's handler raises) within the Runner's poll interval. The
/// error comes through the C++ code as error_already_set; unwinding ends the run's child process.
void check_python_signals() {
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

/// The scenario checked as `lcsim plan` checks it; returns nothing, raises InputError naming the key.
void check_scenario(const std::string& text, const std::string& file) {
  scenario_from_json(parse_document(text, file), file);
}

/// A run's results document (lcsim-results JSON) and the table the command line prints for it.
using DocumentAndTable = std::pair<std::string, std::string>;

/// Where a run reports progress: (done, total, what), as the command line's bar says it. Empty: nowhere.
using ProgressSink = std::function<void(std::size_t, std::size_t, const std::string&)>;

/// Runs ended, as (done, total, what).
RunsProgress runs_progress(const ProgressSink& sink, const std::string& what) {
  if (!sink) return {};
  return [sink, what](std::size_t done, std::size_t total) { sink(done, total, what); };
}

/// A Python callable as a sink, called with the GIL held from whatever thread reports.
ProgressSink python_sink(const py::object& callback) {
  if (callback.is_none()) return {};
  return [held = python::gil_held(callback)](std::size_t done, std::size_t total, const std::string& what) {
    py::gil_scoped_acquire gil;
    (*held)(done, total, what);
  };
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

/// The run of the scenario `text`, read as if from `file`, through the Runner: a plan here, a simulation in a child
/// process (SimGrid runs one engine per process). Its error raises as the command line's would have ended.
DocumentAndTable run(RunMode mode, const std::string& text, const std::string& file, int samples,
                     std::optional<int> iterations, const std::vector<std::string>& policies, bool draw_data, int jobs,
                     const std::string& trace, const ProgressSink& progress) {
  RunRequest request;
  request.mode = mode;
  request.scenario = parse_document(text, file);
  request.file = file;
  request.samples = checked_samples(samples);
  request.iterations = iterations;
  request.policies = policies;
  request.draw_data = draw_data;
  request.world_jobs = checked_world_jobs(jobs);  // the caller's error, raised here
  request.trace_file = trace;
  LocalRunner runner;
  const RunOutcome outcome = runner.run_one(request, progress);
  const std::string message = run_error_message(outcome);
  if (outcome.status == kExitBadInput) throw InputError(message);
  if (outcome.status == kExitPlanning) throw PlanningError(message);
  if (outcome.status != kExitOk) throw std::runtime_error(message);
  return {outcome.results.dump(), outcome.table};
}

/// `lcsim sweep SWEEP --out DIR`: every point through the Runner, `jobs` at a time; the merged document.
std::string sweep(const std::string& sweep_file, const std::string& dir, int jobs, const ProgressSink& progress) {
  record_interrupt_signal(0);  // an earlier run's Ctrl-C was that run's
  const InterruptScope interrupts;
  LocalRunner runner;
  return run_sweep(load_sweep(sweep_file), dir, checked_world_jobs(jobs), runner, runs_progress(progress, "points"))
      .dump();
}

/// `lcsim validate --json`: the lcsim-validation/4 document.
std::string validate(const std::optional<std::string>& catalogue, const std::vector<std::string>& only, int samples,
                     int jobs, const ProgressSink& progress) {
  record_interrupt_signal(0);
  const InterruptScope interrupts;
  ValidateSettings settings;
  if (catalogue) settings.catalogue_file = *catalogue;
  settings.only = only;
  settings.samples = samples;
  settings.jobs = checked_world_jobs(jobs);
  const ValidationPlan plan = plan_validation(settings);
  LocalRunner runner;
  const ValidationReport report = run_validation(plan, runner, runs_progress(progress, "runs"));
  const std::string document = validation_report_to_json(plan, report).dump();
  check_validation_report(plan, report);
  return document;
}

/// `lcsim tune --json` on the scenario `text` read as if from `file`: the lcsim-tune/1 document.
std::string tune(const std::string& text, const std::string& file, int jobs, std::optional<double> budget_s,
                 const ProgressSink& progress) {
  record_interrupt_signal(0);
  const InterruptScope interrupts;
  TuneSettings settings;
  settings.file = file;
  settings.document = parse_document(text, file);
  settings.jobs = checked_world_jobs(jobs);
  if (budget_s && !(*budget_s > 0)) throw InputError("tune: budget_s must be positive");
  settings.budget_s = budget_s;
  const TunePlan plan = plan_tune(settings);
  LocalRunner runner;
  return tune_report_to_json(plan, run_tune(plan, runner, progress)).dump();
}

/// The document `name` with its relative paths (profile, dataset trace) made absolute against `anchor`'s folder.
std::string with_absolute_paths(const std::string& text, const std::string& name, const std::string& anchor) {
  return scenario_with_absolute_paths(parse_document(text, name), anchor).dump();
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
  lcsim::g_input_error = py::register_exception<lcsim::InputError>(m, "InputError", PyExc_ValueError).ptr();
  lcsim::g_planning_error = py::register_exception<lcsim::PlanningError>(m, "PlanningError", PyExc_RuntimeError).ptr();
  py::register_exception_translator(lcsim::translate_exception);  // tried first: the messages bounded
  // A simulation's child process may run policies written in Python: fork as os.fork does.
  lcsim::set_fork_function(lcsim::fork_process);
  // Ctrl-C reaches Python while lcsim's code runs (docs/python.md).
  lcsim::set_host_signal_check(lcsim::check_python_signals);
  m.def("read_json_file", &lcsim::read_json_file, py::arg("file"),
        "The text of a JSON file, read and checked as the command line reads its inputs; raises InputError.");
  m.def(
      "terminal_text", [](const std::string& message) { return lcsim::terminal_text(message); }, py::arg("message"),
      "A message as the command line prints it: long echoed values cut with an ellipsis, control bytes escaped.");
  m.def("check_scenario", &lcsim::check_scenario, py::arg("text"), py::arg("file"),
        "Checks a scenario document (JSON text) as the command line does; raises InputError naming the key.");
  m.def(
      "plan",
      [](const std::string& text, const std::string& file, int samples, std::optional<int> iterations,
         const std::vector<std::string>& policies, bool draw_data, int jobs, const py::object& progress) {
        const lcsim::ProgressSink sink = lcsim::python_sink(progress);
        py::gil_scoped_release release;
        return lcsim::run(lcsim::RunMode::Plan, text, file, samples, iterations, policies, draw_data, jobs, "", sink);
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
        return lcsim::run(lcsim::RunMode::Simulate, text, file, samples, iterations, policies, draw_data, jobs, trace,
                          sink);
      },
      py::arg("text"), py::arg("file"), py::arg("samples"), py::arg("iterations"), py::arg("policies"),
      py::arg("draw_data"), py::arg("jobs"), py::arg("trace"), py::arg("progress"),
      "`lcsim simulate` on a scenario document, in a child process; returns (the results document as JSON text, the "
      "printed table).");
  m.def(
      "sweep",
      [](const std::string& sweep_file, const std::string& dir, int jobs, const py::object& progress) {
        const lcsim::ProgressSink sink = lcsim::python_sink(progress);
        py::gil_scoped_release release;
        return lcsim::sweep(sweep_file, dir, jobs, sink);
      },
      py::arg("sweep_file"), py::arg("dir"), py::arg("jobs"), py::arg("progress"),
      "`lcsim sweep SWEEP --out DIR` in this process (simulations in child processes); the merged document as JSON "
      "text.");
  m.def(
      "validate",
      [](const std::optional<std::string>& catalogue, const std::vector<std::string>& only, int samples, int jobs,
         const py::object& progress) {
        const lcsim::ProgressSink sink = lcsim::python_sink(progress);
        py::gil_scoped_release release;
        return lcsim::validate(catalogue, only, samples, jobs, sink);
      },
      py::arg("catalogue"), py::arg("only"), py::arg("samples"), py::arg("jobs"), py::arg("progress"),
      "`lcsim validate --json`: the lcsim-validation/4 document as JSON text.");
  m.def(
      "tune",
      [](const std::string& text, const std::string& file, int jobs, std::optional<double> budget_s,
         const py::object& progress) {
        const lcsim::ProgressSink sink = lcsim::python_sink(progress);
        py::gil_scoped_release release;
        return lcsim::tune(text, file, jobs, budget_s, sink);
      },
      py::arg("text"), py::arg("file"), py::arg("jobs"), py::arg("budget_s"), py::arg("progress"),
      "`lcsim tune --json` on a scenario document: the lcsim-tune/1 document as JSON text.");
  m.def("with_absolute_paths", &lcsim::with_absolute_paths, py::arg("text"), py::arg("name"), py::arg("anchor"),
        "The scenario document `name` with its relative paths made absolute against the folder of `anchor`.");
  m.def("models", &lcsim::model_names, "Built-in model names.");
  m.def("gpus", &lcsim::gpu_names, "Built-in GPU kinds.");
  m.def("distributions", &lcsim::distribution_names, "Built-in length distributions.");
  m.def("policies", &lcsim::policy_kinds, "Registered policy kinds.");
  m.def("topologies", &lcsim::topology_names, "Registered cluster topologies.");
  lcsim::python::bind_policy_types(m);
  m.def("register_policy", &lcsim::python::register_python_policy, py::arg("kind"), py::arg("cls"),
        "Registers a policy class written in Python under `kind` (lcsim.register_policy wraps it).");
}
