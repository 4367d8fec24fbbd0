#pragma once
// `lcsim-gpu fit`: a profile refitted from a measurements file, without a GPU (host logic, so that its command line
// and its output guard are tested on any machine); the prior and the fit summary `calibrate` shares.
#include <iosfwd>
#include <string>
#include <vector>

#include "calibrate/fit/profile_fit.hpp"

namespace lcsim {

/// The usage lines of `lcsim-gpu fit`.
const char* fit_usage();

/// Runs `lcsim-gpu fit` on the arguments after `fit`: --help prints the usage to `out`. InputError for an unknown
/// option, a missing value, a --peak-tflops that is not a positive finite number, an --out that is the
/// measurements file or the prior, or a bad measurements or prior file.
void run_fit_command(const std::vector<std::string>& args, std::ostream& out);

/// --peak-tflops's value: a positive finite number, else InputError naming the option.
double parse_peak_tflops(const std::string& text);

/// The prior a fit starts from: `file` when given, else the default profile of the GPU kind; a positive
/// `peak_tflops` replaces its peak. Throws InputError for an unnamed GPU kind without a prior file.
Profile choose_prior(const std::string& file, const std::string& gpu_kind, const std::string& device_name,
                     double peak_tflops);

/// Prints the fit summary table.
void print_report(const std::vector<FitReportLine>& report, std::ostream& out);

}  // namespace lcsim
