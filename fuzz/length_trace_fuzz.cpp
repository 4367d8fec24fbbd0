// Fuzz target: the length-trace reader (formats/length_trace.hpp). Seeds: fuzz/seeds/length_trace.
#include "formats/length_trace.hpp"
#include "fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return lcsim::fuzz::run_on_file(data, size, ".txt", [](const std::string& file) { lcsim::load_length_trace(file); });
}
