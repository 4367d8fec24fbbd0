#pragma once
// Policies written in Python (lcsim.Policy, docs/python.md): the registry holds a factory that instantiates the
// user's class, and the policy's plan() calls its `plan(context, batches)` with the GIL held, then converts what it
// returns into IterationPlans. The validator checks them afterwards as it checks any policy's. Whatever the Python
// code raises (an Exception) or returns wrong becomes a PlanningError naming the policy, never a crash;
// KeyboardInterrupt and the other BaseExceptions come through as they are, and Ctrl-C is looked for before and after
// the call.
#include <pybind11/pybind11.h>

#include <memory>
#include <string>

namespace lcsim::python {

/// A Python object that C++ code may let go on any thread: its last owner drops the reference with the GIL held.
using GilHeld = std::shared_ptr<pybind11::object>;
/// Call with the GIL held.
GilHeld gil_held(pybind11::object object);

/// Binds lcsim.Sequence and lcsim.PlanningContext (the view a Python policy plans with) into `m`.
void bind_policy_types(pybind11::module_& m);

/// Registers `kind` for the class `cls` (a subclass of lcsim.Policy): a scenario's {"kind": kind, "options": {...}}
/// instantiates cls(**options). std::invalid_argument (ValueError) when the kind is taken.
void register_python_policy(const std::string& kind, const pybind11::object& cls);

/// Whether any policy kind was registered from Python in this process (a fork must then follow Python's protocol).
bool python_policies_registered();

}  // namespace lcsim::python
