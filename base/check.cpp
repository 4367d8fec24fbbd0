#include "base/check.hpp"

#include <string>

namespace lcsim::detail {

void check_failed(const char* file, int line, const char* condition, std::string_view message) {
  std::string what = std::string(file) + ":" + std::to_string(line) + ": check failed: " + condition;
  if (!message.empty()) what += ": " + std::string(message);
  throw InternalError(what);
}

}  // namespace lcsim::detail
