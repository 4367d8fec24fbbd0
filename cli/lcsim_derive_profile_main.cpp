// lcsim-derive-profile: writes the default (uncalibrated) profile of a GPU kind, built from public figures.
//   lcsim-derive-profile --gpu H100-SXM --out calibrate/profiles/h100-sxm-default.json
#include <exception>
#include <iostream>
#include <string>
#include <string_view>

#include "base/errors.hpp"
#include "calibrate/fit/default_profile.hpp"

namespace {

constexpr int kUsageError = 2;

void usage(std::ostream& out) {
  out << "usage: lcsim-derive-profile --gpu NAME --out FILE\n"
         "  Writes the default profile of GPU kind NAME (H100-SXM, H200, A800), derived from public figures and\n"
         "  labelled uncalibrated (see calibrate/PROFILE.md).\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::string gpu;
  std::string out;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      usage(std::cout);
      return 0;
    }
    if ((arg == "--gpu" || arg == "--out") && i + 1 < argc) {
      (arg == "--gpu" ? gpu : out) = argv[++i];
      continue;
    }
    std::cerr << "lcsim-derive-profile: " << (arg == "--gpu" || arg == "--out" ? "missing value for " : "unknown ")
              << "argument '" << arg << "'\n";
    usage(std::cerr);
    return kUsageError;
  }
  if (gpu.empty() || out.empty()) {
    std::cerr << "lcsim-derive-profile: --gpu and --out are required\n";
    usage(std::cerr);
    return kUsageError;
  }
  try {
    const lcsim::Profile profile = lcsim::derive_default_profile(lcsim::named_gpu(gpu));
    lcsim::save_profile(profile, out);
    std::cout << "wrote " << out << ": " << profile.gpu << ", " << profile.label() << "\n";
  } catch (const lcsim::InputError& e) {
    std::cerr << "lcsim-derive-profile: " << e.what() << "\n";
    return kUsageError;
  } catch (const std::exception& e) {
    std::cerr << "lcsim-derive-profile: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
