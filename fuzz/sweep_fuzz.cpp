// Fuzz target: the sweep-file loader and its expansion into points (traces/sweep.hpp). Seeds: scenarios/sweeps.
#include "fuzz/fuzz_input.hpp"
#include "traces/sweep.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return lcsim::fuzz::run_on_file(data, size, ".json",
                                  [](const std::string& file) { lcsim::expand_sweep(lcsim::load_sweep(file)); });
}
