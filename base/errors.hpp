#pragma once
// Typed exceptions. InputError is for anything a user can fix (scenario, profile, trace, flag); its message
// names the file and the field. PlanningError is a policy that cannot produce a plan for a batch. InternalError
// is a broken invariant, a bug in lcsim (LCSIM_CHECK, check.hpp); main() reports it as an internal error.
#include <stdexcept>
#include <string>

namespace lcsim {

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class PlanningError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

}  // namespace lcsim
