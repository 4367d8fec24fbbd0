#include "python/python_policy.hpp"

#include <pybind11/stl.h>

#include <atomic>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/errors.hpp"
#include "model/plan.hpp"
#include "policies/core/policy.hpp"

namespace py = pybind11;

namespace lcsim::python {
namespace {

std::atomic<bool> any_registered{false};

/// What a Python policy plans with: the layout, the model and the cost model's view of one sequence. It refers to
/// the run's cost model, so it answers only while plan() runs; afterwards it raises instead of reading freed memory.
class PlanningView {
 public:
  PlanningView(const PlanningContext& context, std::shared_ptr<const bool> open)
      : context_(context), scheme_(layout_scheme(context)), open_(std::move(open)) {}

  int dp() const { return context_.layout.dp; }
  int cp() const { return context_.layout.cp; }
  int tp() const { return context_.layout.tp; }
  int pp() const { return context_.layout.pp; }
  int virtual_pp() const { return context_.layout.virtual_pp; }
  std::uint64_t seed() const { return context_.seed; }
  std::string recompute() const { return std::string(to_string(context_.training.recompute)); }
  int layers() const { return cost().model().layers; }
  std::string model() const { return cost().model().name; }

  /// Compute seconds of one sequence spread over `cp` GPUs (default: the layout's CP), every layer and the LM head.
  double sequence_seconds(Tokens tokens, std::optional<int> cp) const {
    if (tokens <= 0) throw InputError("sequence_seconds: tokens must be positive, got " + std::to_string(tokens));
    const SequenceShare share{tokens, cp.value_or(scheme_.cp)};
    if (share.cp < 1) throw InputError("sequence_seconds: cp must be >= 1, got " + std::to_string(share.cp));
    return cost().compute_seconds(std::span(&share, 1), scheme_, LayerSpan{0, cost().model().layers}, true);
  }
  /// Activation bytes one token keeps on a GPU of the layout (every layer and the LM head).
  double activation_bytes_per_token() const {
    return cost().activation_bytes_per_token(scheme_, LayerSpan{0, cost().model().layers}, true);
  }
  /// A GPU's usable memory: its capacity less the profile's reserve.
  double capacity_bytes() const { return cost().capacity_bytes(); }

 private:
  const CostModel& cost() const {
    if (!*open_) throw std::runtime_error("PlanningContext used after plan() returned: it is valid only inside plan()");
    return *context_.cost;
  }
  PlanningContext context_;
  ParallelScheme scheme_;
  std::shared_ptr<const bool> open_;
};

[[noreturn]] void bad_return(const std::string& where, const std::string& what) {
  throw PlanningError("plan() returned " + what + " at " + where +
                      " (expected a list of lcsim.IterationPlan, one per batch: docs/python.md)");
}

py::sequence as_sequence(const py::handle& h, const std::string& where, const char* what) {
  if (!py::isinstance<py::sequence>(h) || py::isinstance<py::str>(h))
    bad_return(where,
               py::str(py::type::of(h).attr("__name__")).cast<std::string>() + " where " + what + " was expected");
  return py::reinterpret_borrow<py::sequence>(h);
}

std::int64_t integer_attr(const py::handle& h, const char* name, const std::string& where) {
  if (!py::hasattr(h, name)) bad_return(where, std::string("an object without '") + name + "'");
  const py::object value = h.attr(name);
  if (!py::isinstance<py::int_>(value) || py::isinstance<py::bool_>(value))
    bad_return(where + "." + name,
               py::str(py::type::of(value).attr("__name__")).cast<std::string>() + " where an integer was expected");
  return value.cast<std::int64_t>();
}

Placement to_placement(const py::handle& h, const std::string& where) {
  Placement p;
  p.sequence_id = integer_attr(h, "sequence_id", where);
  p.tokens = integer_attr(h, "tokens", where);
  if (!py::hasattr(h, "cp_rank")) bad_return(where, "an object without 'cp_rank'");
  p.cp_rank = h.attr("cp_rank").is_none() ? Placement::kSharded : static_cast<int>(integer_attr(h, "cp_rank", where));
  return p;
}

std::vector<IterationPlan> to_plans(const py::handle& returned, const PlanningContext& context) {
  const ParallelScheme scheme = layout_scheme(context);
  std::vector<IterationPlan> plans;
  const py::sequence list = as_sequence(returned, "the top level", "a list of lcsim.IterationPlan");
  for (std::size_t b = 0; b < list.size(); ++b) {
    const std::string where = "plans[" + std::to_string(b) + "]";
    const py::object item = list[b];
    if (!py::hasattr(item, "replicas")) bad_return(where, "an object without 'replicas'");
    IterationPlan plan;
    plan.index = static_cast<int>(b);
    const py::object label = py::getattr(item, "label", py::none());
    plan.label = label.is_none() ? "" : py::str(label).cast<std::string>();
    if (plan.label.empty()) plan.label = "batch " + std::to_string(b);
    const py::sequence replicas = as_sequence(item.attr("replicas"), where + ".replicas", "a list per DP rank");
    if (replicas.size() != static_cast<std::size_t>(context.layout.dp))
      bad_return(where + ".replicas",
                 std::to_string(replicas.size()) + " replicas for a layout of DP " + std::to_string(context.layout.dp));
    plan.replicas = make_homogeneous_replicas(scheme, context.layout.dp);
    for (std::size_t r = 0; r < replicas.size(); ++r) {
      const std::string rank = where + ".replicas[" + std::to_string(r) + "]";
      const py::sequence micro_batches = as_sequence(replicas[r], rank, "a list of micro-batches");
      for (std::size_t m = 0; m < micro_batches.size(); ++m) {
        const std::string mb = rank + "[" + std::to_string(m) + "]";
        MicroBatch micro_batch;
        const py::sequence placements = as_sequence(micro_batches[m], mb, "a list of lcsim.Placement");
        for (std::size_t k = 0; k < placements.size(); ++k)
          micro_batch.placements.push_back(to_placement(placements[k], mb + "[" + std::to_string(k) + "]"));
        plan.replicas[r].micro_batches.push_back(std::move(micro_batch));
      }
    }
    plans.push_back(std::move(plan));
  }
  return plans;
}

class PythonPolicy final : public Policy {
 public:
  PythonPolicy(std::string kind, GilHeld instance) : kind_(std::move(kind)), instance_(std::move(instance)) {}

  std::string kind() const override { return kind_; }

  std::vector<IterationPlan> plan(const PlanningContext& context, std::span<const GlobalBatch> batches) override {
    py::gil_scoped_acquire gil;
    const auto open = std::make_shared<bool>(true);
    // However plan() ends, the view it was handed stops answering.
    const std::unique_ptr<bool, void (*)(bool*)> close(open.get(), [](bool* flag) { *flag = false; });
    // A signal that arrived while C++ code ran (Ctrl-C while the batches were cut) is raised before the call, and one
    // that arrived during it after: KeyboardInterrupt reaches the caller within the call, not after the run.
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    try {
      py::list batch_list;
      for (const GlobalBatch& batch : batches) batch_list.append(py::cast(batch));
      const py::object returned = instance_->attr("plan")(py::cast(PlanningView(context, open)), batch_list);
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      return to_plans(returned, context);
    } catch (py::error_already_set& e) {
      // KeyboardInterrupt, SystemExit and other BaseExceptions that are not Exceptions are the caller's, not the
      // policy's failure: they come through as they are.
      if (!e.matches(PyExc_Exception)) throw;
      throw PlanningError("plan() raised " + std::string(e.what()));
    } catch (const py::cast_error& e) {
      throw PlanningError(std::string("plan() returned a value of the wrong type: ") + e.what());
    }
  }

 private:
  std::string kind_;
  GilHeld instance_;
};

}  // namespace

GilHeld gil_held(py::object object) {
  return GilHeld(new py::object(std::move(object)), [](py::object* held) {
    py::gil_scoped_acquire gil;
    delete held;
  });
}

void bind_policy_types(py::module_& m) {
  py::class_<Sequence>(m, "Sequence", "One sequence of a global batch: its id in the dataset and its tokens.")
      .def(py::init([](std::int64_t id, Tokens tokens) {
             return Sequence{id, tokens};
           }),
           py::arg("id"), py::arg("tokens"))
      .def_readonly("id", &Sequence::id)
      .def_readonly("tokens", &Sequence::tokens)
      .def("__repr__", [](const Sequence& s) {
        return "Sequence(id=" + std::to_string(s.id) + ", tokens=" + std::to_string(s.tokens) + ")";
      });
  py::class_<PlanningView>(m, "PlanningContext",
                           "What a Python policy plans with (valid inside plan() only): the scenario's layout, its "
                           "model, and the cost model's view of a sequence.")
      .def_property_readonly("dp", &PlanningView::dp, "Data-parallel replicas: the plan's replicas, one per rank.")
      .def_property_readonly("cp", &PlanningView::cp, "Context-parallel GPUs of a replica.")
      .def_property_readonly("tp", &PlanningView::tp)
      .def_property_readonly("pp", &PlanningView::pp)
      .def_property_readonly("virtual_pp", &PlanningView::virtual_pp,
                             "Model chunks per pipeline stage (interleaved 1F1B); 1 runs plain 1F1B.")
      .def_property_readonly("seed", &PlanningView::seed, "The scenario's seed, for a policy that draws.")
      .def_property_readonly("recompute", &PlanningView::recompute, "\"none\", \"selective\" or \"full\".")
      .def_property_readonly("layers", &PlanningView::layers)
      .def_property_readonly("model", &PlanningView::model)
      .def("sequence_seconds", &PlanningView::sequence_seconds, py::arg("tokens"), py::arg("cp") = py::none(),
           "Compute seconds of one sequence of `tokens` spread over `cp` GPUs (default: the layout's CP), every "
           "layer and the LM head, as the cost model prices it.")
      .def("activation_bytes_per_token", &PlanningView::activation_bytes_per_token,
           "Activation bytes one token keeps on a GPU of the layout (every layer and the LM head).")
      .def("capacity_bytes", &PlanningView::capacity_bytes, "A GPU's usable memory: capacity less the reserve.");
}

void register_python_policy(const std::string& kind, const py::object& cls) {
  if (!PyCallable_Check(cls.ptr())) throw std::invalid_argument("register_policy: '" + kind + "' needs a class");
  // The class stays referenced for the life of the process: the registry outlives the interpreter's objects.
  auto* held = new py::object(cls);
  register_policy(kind, [kind, held](const PolicySpec& spec) -> std::unique_ptr<Policy> {
    py::gil_scoped_acquire gil;
    try {
      const py::object options = py::module_::import("json").attr("loads")(spec.options.dump());
      return std::make_unique<PythonPolicy>(kind, gil_held((*held)(**options)));
    } catch (py::error_already_set& e) {
      if (!e.matches(PyExc_Exception)) throw;  // KeyboardInterrupt: the caller's
      throw InputError(spec.file + ": " + spec.path + ".options: policy '" + kind + "' refused them: " + e.what());
    }
  });
  any_registered = true;
}

bool python_policies_registered() {
  return any_registered;
}

}  // namespace lcsim::python
