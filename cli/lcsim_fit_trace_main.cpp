// lcsim-fit-trace: a calibration profile from PyTorch profiler (Kineto) traces of the user's own training job,
// on any machine (no GPU, no CUDA): the same fits as lcsim-gpu calibrate, fed by the kernels the traces recorded.
//   lcsim-fit-trace rank0.json.gz rank1.json.gz --out my-cluster.json [--prior PROFILE] [--gpus-per-node N]
#include <exception>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "base/errors.hpp"
#include "base/files.hpp"
#include "base/json_reader.hpp"
#include "base/terminal.hpp"
#include "calibrate/fit/default_profile.hpp"
#include "calibrate/kineto/kineto_fit.hpp"
#include "calibrate/kineto/kineto_kernels.hpp"
#include "model/gpu_kind.hpp"
#include "model/model.hpp"

namespace {

constexpr int kUsageError = 2;

void usage(std::ostream& out) {
  out << "usage: lcsim-fit-trace TRACE... --out FILE [--prior PROFILE] [--model M] [--gpus-per-node N]\n"
         "                       [--kernels FILE] [--measured-json FILE --scenario SCENARIO --policy NAME]\n"
         "                       [--untraced STEPS.json] [--fitted-on ENTRY]...\n"
         "  Fits a calibration profile from PyTorch profiler (Kineto) traces (.json or .json.gz, one per rank):\n"
         "  GEMM and attention efficiency from the kernels' op shapes (record_shapes=True), collective latency and\n"
         "  bus bandwidth from the NCCL metadata, and the per-step GPU idle time. Fields a trace cannot give keep\n"
         "  the prior's values; the report says which, and why (docs/calibration.md).\n"
         "  --model M           the traced model's shape (lcsim list models): fits the element-wise share\n"
         "                      (gemm_work_overhead) and a layer's fixed cost (layer_overhead_us) above the\n"
         "                      element-wise HBM floor, which depends on its widths\n"
         "  --prior PROFILE     profile supplying the peak and every field not fitted (default: the derived default\n"
         "                      of the traces' GPU kind, H100-SXM when the traces do not name a known one)\n"
         "  --gpus-per-node N   a process group within one block of N global ranks is on NVLink (default 8)\n"
         "  --kernels FILE      kernel-family table replacing the built-in calibrate/kineto/kineto_kernels.json\n"
         "  --untraced FILE     the job's step times without the profiler, in the trace's step order (with --model;\n"
         "                      steps[].untraced_seconds, as calibrate/torch_trace_step.py --repeats writes them):\n"
         "                      fits the framework's CPU floor, compute.layer_issue_us\n"
         "  --fitted-on ENTRY   a validation entry that measures this very job: the profile records every field\n"
         "                      fitted here as set from it, so validate counts it as fitted, not held out\n"
         "  --measured-json FILE  also write the traces' step times as a measured run (lcsim-results/1, mode live)\n"
         "                      of policy NAME in SCENARIO (the scenario describing the traced job), for a\n"
         "                      `measured` entry of the validation catalogue (docs/validation.md); with --untraced,\n"
         "                      the untraced step times\n"
         "  --wide              report lines as long as they come (default: the terminal's width, or 120 columns\n"
         "                      when not a terminal)\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> traces;
  std::string out, prior_file, kernels_file, measured_file, scenario_file, policy, untraced_file;
  lcsim::TraceFitOptions options;
  bool wide = false;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string_view arg = argv[i];
      if (arg == "--help" || arg == "-h") {
        usage(std::cout);
        return 0;
      }
      if (arg == "--wide") {
        wide = true;
        continue;
      }
      const bool takes_value = arg == "--out" || arg == "--prior" || arg == "--gpus-per-node" || arg == "--kernels" ||
                               arg == "--measured-json" || arg == "--scenario" || arg == "--policy" ||
                               arg == "--model" || arg == "--untraced" || arg == "--fitted-on";
      if (takes_value) {
        if (i + 1 >= argc) throw lcsim::InputError("missing value for " + std::string(arg));
        const std::string value = argv[++i];
        if (arg == "--out") out = value;
        if (arg == "--prior") prior_file = value;
        if (arg == "--kernels") kernels_file = value;
        if (arg == "--measured-json") measured_file = value;
        if (arg == "--scenario") scenario_file = value;
        if (arg == "--policy") policy = value;
        if (arg == "--model") options.model = lcsim::named_model(value);
        if (arg == "--untraced") untraced_file = value;
        if (arg == "--fitted-on") options.fitted_on.push_back(value);
        if (arg == "--gpus-per-node") {
          std::size_t used = 0;
          int n = 0;
          try {
            n = std::stoi(value, &used);
          } catch (const std::exception&) {
            used = 0;
          }
          if (used != value.size() || n < 1) throw lcsim::InputError("--gpus-per-node: '" + value + "' is not >= 1");
          options.gpus_per_node = n;
        }
        continue;
      }
      if (!arg.empty() && arg[0] == '-') throw lcsim::InputError("unknown argument '" + std::string(arg) + "'");
      traces.emplace_back(arg);
    }
    if (traces.empty() || out.empty()) throw lcsim::InputError("at least one TRACE and --out are required");
    if (measured_file.empty() != scenario_file.empty() || measured_file.empty() != policy.empty()) {
      throw lcsim::InputError("--measured-json, --scenario and --policy go together");
    }
    std::vector<std::string> inputs = traces;
    for (const auto* f : {&prior_file, &kernels_file, &scenario_file, &untraced_file}) {
      if (!f->empty()) inputs.push_back(*f);
    }
    std::vector<lcsim::OutputOption> outputs{{"--out", out}};
    if (!measured_file.empty()) outputs.push_back({"--measured-json", measured_file});
    lcsim::check_output_files(outputs, inputs);
    if (!untraced_file.empty()) options.untraced_steps = lcsim::read_untraced_steps(untraced_file);
    std::string scenario_name;
    if (!scenario_file.empty()) {
      const auto scenario = lcsim::parse_json_file(scenario_file);
      if (!scenario.is_object() || !scenario.contains("name") || !scenario["name"].is_string()) {
        throw lcsim::InputError(scenario_file + ": name: a scenario needs a name (the measured run is matched by it)");
      }
      scenario_name = scenario["name"].get<std::string>();
    }

    const auto classifier =
        kernels_file.empty() ? lcsim::KernelClassifier::builtin() : lcsim::KernelClassifier::load(kernels_file);
    std::vector<lcsim::KinetoTrace> loaded;
    for (const auto& file : traces) {
      loaded.push_back(lcsim::load_kineto_trace(file));
      lcsim::classify_kernels(loaded.back(), classifier);
    }
    lcsim::Profile prior;
    if (!prior_file.empty()) {
      prior = lcsim::load_profile(prior_file);
    } else {
      const std::string kind = lcsim::match_gpu_kind(loaded.front().device_name);
      prior = lcsim::derive_default_profile(lcsim::named_gpu(kind.empty() ? "H100-SXM" : kind));
    }
    const auto fit = lcsim::fit_profile_from_traces(loaded, prior, options);
    const std::size_t columns = lcsim::output_columns(wide);
    std::cout << lcsim::wrap_lines(lcsim::format_trace_fit_report(fit), columns);
    if (fit.fitted_fields == 0) {
      throw lcsim::InputError("no profile field could be fitted from the trace(s) (reasons above); nothing written");
    }
    lcsim::save_profile(fit.profile, out);
    std::vector<std::string> written{out};
    if (!measured_file.empty()) {
      lcsim::write_output(
          measured_file,
          lcsim::trace_steps_results(loaded, scenario_name, scenario_file, policy, options.untraced_steps).dump(2) +
              "\n",
          written);
      std::cout << "wrote " << measured_file << ": the traces' step times as a measured run of " << policy << "\n";
    }
    std::cout << lcsim::wrap_lines("wrote " + out + ": " + std::to_string(fit.fitted_fields) +
                                       " field(s) fitted from " + std::to_string(loaded.size()) +
                                       " trace(s), the rest kept from the prior (" + prior.label() + ")\n",
                                   columns);
  } catch (const lcsim::InputError& e) {
    std::cerr << "lcsim-fit-trace: " << e.what() << "\n";
    if (traces.empty() || out.empty()) usage(std::cerr);
    return kUsageError;
  } catch (const std::exception& e) {
    std::cerr << "lcsim-fit-trace: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
