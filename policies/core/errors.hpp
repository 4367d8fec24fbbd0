#pragma once
// Typed exceptions. InputError is for anything a user can fix (scenario, profile, trace, flag); its message
// names the file and the field. PlanningError is a policy that cannot produce a plan for a batch.
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

}  // namespace lcsim
