// Fuzz target: the calibration-profile loader (model/profile.hpp). Seeds: the shipped profiles.
#include "fuzz/fuzz_input.hpp"
#include "model/profile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return lcsim::fuzz::run_on_file(data, size, ".json", [](const std::string& file) { lcsim::load_profile(file); });
}
