// Fuzz target: the sweep-file loader and its expansion into points (studies/sweep.hpp). Seeds: scenarios/sweeps.
#include "fuzz/fuzz_input.hpp"
#include "studies/sweep.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return lcsim::fuzz::run_on_file(data, size, ".json",
                                  [](const std::string& file) { lcsim::expand_sweep(lcsim::load_sweep(file)); });
}
