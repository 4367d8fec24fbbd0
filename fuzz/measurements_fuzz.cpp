// Fuzz target: the measurements file of `lcsim-gpu fit` (calibrate/fit/measurements.hpp), loaded and fitted into
// a profile as `fit` does. Seeds: the shipped calibrate/profiles/*.measurements.json.
#include "calibrate/fit/default_profile.hpp"
#include "calibrate/fit/measurements.hpp"
#include "calibrate/fit/profile_fit.hpp"
#include "fuzz/fuzz_input.hpp"
#include "model/model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return lcsim::fuzz::run_on_file(data, size, ".json", [](const std::string& file) {
    const lcsim::Measurements m = lcsim::load_measurements(file);
    const lcsim::Profile prior = lcsim::derive_default_profile(lcsim::named_gpu("H100-SXM"));
    lcsim::fit_profile(m, lcsim::measured_model(m, file), prior, file);
  });
}
