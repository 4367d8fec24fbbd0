#include "calibrate/fit/fit_command.hpp"

#include <cmath>
#include <iomanip>
#include <map>
#include <ostream>
#include <stdexcept>

#include "base/errors.hpp"
#include "base/files.hpp"
#include "calibrate/fit/default_profile.hpp"
#include "calibrate/fit/measurements.hpp"

namespace lcsim {

const char* fit_usage() {
  return "  fit --measurements FILE --out FILE [--prior FILE] [--peak-tflops X]\n"
         "      Refits a profile from a measurements file, without a GPU. --out may be neither the measurements\n"
         "      file nor the prior.\n";
}

double parse_peak_tflops(const std::string& text) {
  double value = 0;
  try {
    std::size_t used = 0;
    value = std::stod(text, &used);
    if (used != text.size()) throw std::invalid_argument(text);
  } catch (const std::logic_error&) {  // std::invalid_argument, std::out_of_range
    throw InputError("--peak-tflops: not a valid number: '" + excerpt(text) + "'");
  }
  if (!std::isfinite(value) || value <= 0)
    throw InputError("--peak-tflops: must be a positive finite number of TFLOP/s, got '" + excerpt(text) + "'");
  return value;
}

void run_fit_command(const std::vector<std::string>& args, std::ostream& out) {
  std::map<std::string, std::string> values;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      out << "usage: lcsim-gpu\n" << fit_usage();
      return;
    }
    if (arg != "--measurements" && arg != "--out" && arg != "--prior" && arg != "--peak-tflops")
      throw InputError("fit: unknown argument '" + excerpt(arg) + "'");
    if (i + 1 >= args.size()) throw InputError("fit: missing value for " + arg);
    values[arg] = args[++i];
  }
  if (!values.count("--measurements") || !values.count("--out"))
    throw InputError("fit: --measurements and --out are required");
  const std::string& file = values["--measurements"];
  const std::string& output = values["--out"];
  const std::string prior_file = values.count("--prior") ? values["--prior"] : "";
  const double peak = values.count("--peak-tflops") ? parse_peak_tflops(values["--peak-tflops"]) : 0;
  check_output_files({{"--out", output}}, {file, prior_file});

  const Measurements m = load_measurements(file);
  const Profile prior = choose_prior(prior_file, m.device.gpu_kind, m.device.name, peak);
  const FittedProfile fitted = fit_profile(m, measured_model(m, file), prior, file);
  print_report(fitted.report, out);
  save_profile(fitted.profile, output);
  out << "wrote " << output << ": " << fitted.profile.gpu << ", " << fitted.profile.label() << "\n";
}

Profile choose_prior(const std::string& file, const std::string& gpu_kind, const std::string& device_name,
                     double peak_tflops) {
  Profile prior;
  if (!file.empty()) {
    prior = load_profile(file);
  } else if (!gpu_kind.empty()) {
    prior = derive_default_profile(named_gpu(gpu_kind));
  } else {
    throw InputError("GPU '" + device_name +
                     "' is not a named kind (H100-SXM, H200, A800): pass --prior FILE with a profile whose priors "
                     "(peak, static memory, interconnect) suit it, and --peak-tflops if its peak differs");
  }
  if (peak_tflops < 0) throw InputError("--peak-tflops must be positive");
  if (peak_tflops > 0) prior.compute.peak_tflops = peak_tflops;
  return prior;
}

void print_report(const std::vector<FitReportLine>& report, std::ostream& out) {
  out << "# fit summary (held-out MAPE: error on points the fit did not use)\n"
      << std::left << std::setw(42) << "# fit" << std::right << std::setw(7) << "points" << std::setw(6) << "held"
      << std::setw(12) << "MAPE"
      << "  result\n";
  for (const auto& line : report) {
    out << std::left << std::setw(42) << ("  " + line.what) << std::right << std::setw(7) << line.points << std::setw(6)
        << line.held_out << std::setw(12)
        << (line.held_out_mape ? std::to_string(*line.held_out_mape * 100).substr(0, 5) + " %" : std::string("n/a"))
        << "  " << line.result << "\n";
  }
}

}  // namespace lcsim
