// Fuzz target: the Kineto trace reader and the fits of lcsim-fit-trace (calibrate/kineto/kineto_*.hpp), on a trace
// read, classified and fitted as the command does. Seeds: fuzz/seeds/kineto.
#include "calibrate/fit/default_profile.hpp"
#include "calibrate/kineto/kineto_fit.hpp"
#include "calibrate/kineto/kineto_kernels.hpp"
#include "fuzz/fuzz_input.hpp"
#include "model/model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return lcsim::fuzz::run_on_file(data, size, ".json", [](const std::string& file) {
    std::vector<lcsim::KinetoTrace> traces{lcsim::load_kineto_trace(file)};
    lcsim::classify_kernels(traces.front(), lcsim::KernelClassifier::builtin());
    lcsim::fit_profile_from_traces(traces, lcsim::derive_default_profile(lcsim::named_gpu("H100-SXM")));
  });
}
