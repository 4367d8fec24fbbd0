#pragma once
// Always-on internal checks, modelled on google/benchmark's BM_CHECK: unlike assert, never compiled out, so a
// broken invariant stops the run with its place in the code instead of corrupting results in release builds.
#include <string_view>

#include "base/errors.hpp"

namespace lcsim::detail {

/// Throws InternalError("<file>:<line>: check failed: <condition>: <message>").
[[noreturn]] void check_failed(const char* file, int line, const char* condition, std::string_view message);

}  // namespace lcsim::detail

/// Throws lcsim::InternalError naming file, line, the condition and `message` when `cond` is false. `message`
/// (a string literal or std::string) is evaluated only then.
#define LCSIM_CHECK(cond, message)                                         \
  do {                                                                     \
    if (!(cond)) [[unlikely]]                                              \
      ::lcsim::detail::check_failed(__FILE__, __LINE__, #cond, (message)); \
  } while (false)
