// Fuzz target: the scenario loader (formats/scenario.hpp). Seeds: every shipped scenario.
#include "formats/scenario.hpp"
#include "fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return lcsim::fuzz::run_on_file(data, size, ".json", [](const std::string& file) { lcsim::load_scenario(file); });
}
