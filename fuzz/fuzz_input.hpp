#pragma once
// libFuzzer harness shared by the loader targets: the input becomes a file (the loaders read files, and their
// size and file checks are part of what is fuzzed), the loader runs, and bad input must end as an InputError.
// Any other exception escapes and libFuzzer reports it as a crash, as it does sanitizer findings.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "base/errors.hpp"

namespace lcsim::fuzz {

/// A per-process scratch file (libFuzzer may run several processes side by side with -jobs).
inline const std::string& scratch_file(const char* suffix) {
  static const std::string file = "/tmp/lcsim-fuzz-" + std::to_string(::getpid()) + suffix;
  return file;
}

template <typename Load>
int run_on_file(const std::uint8_t* data, std::size_t size, const char* suffix, Load load) {
  const std::string& file = scratch_file(suffix);
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    load(file);
  } catch (const InputError&) {
    // Refused with a message: the expected end of bad input.
  }
  return 0;
}

}  // namespace lcsim::fuzz
