// Fuzz target: the scenario loader (traces/scenario.hpp). Seeds: every shipped scenario.
#include "fuzz/fuzz_input.hpp"
#include "traces/scenario.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return lcsim::fuzz::run_on_file(data, size, ".json", [](const std::string& file) { lcsim::load_scenario(file); });
}
