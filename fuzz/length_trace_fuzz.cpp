// Fuzz target: the length-trace reader (traces/length_trace.hpp). Seeds: fuzz/seeds/length_trace.
#include "fuzz/fuzz_input.hpp"
#include "traces/length_trace.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return lcsim::fuzz::run_on_file(data, size, ".txt",
                                  [](const std::string& file) { lcsim::load_length_trace(file); });
}
