// lcsim-gpu: calibration on real GPUs. See calibrate/README.md for how to run it on a GPU node.
//   lcsim-gpu calibrate --model Qwen2.5-7B --out calibrate/profiles/h100-qwen2.5-7b.json
//   lcsim-gpu selftest
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/errors.hpp"
#include "base/files.hpp"
#include "calibrate/fit/fit_command.hpp"
#include "calibrate/fit/measurements.hpp"
#include "calibrate/fit/profile_fit.hpp"
#include "calibrate/measure/calibrate_run.hpp"
#include "calibrate/measure/selftest.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/device_info.hpp"
#include "live/gpu/live_command.hpp"
#include "live/gpu/mix_command.hpp"
#include "live/job_check.hpp"
#include "live/live_options.hpp"
#include "live/mix_plan.hpp"

namespace {

constexpr int kInternalError = 1;
constexpr int kUsageError = 2;     // bad input, or no usable GPU
constexpr int kPlanningError = 3;  // live: a policy could not plan

void usage(std::ostream& out) {
  out << "usage: lcsim-gpu COMMAND [options]\n"
         "\n"
         "commands (all but `fit` need a CUDA GPU):\n"
         "  calibrate --model M [--out FILE] [--measurements FILE] [--prior FILE] [--peak-tflops X] [--quick]\n"
         "            [--seed N]\n"
         "      Measures GEMMs, varlen attention, the layer proxy, activation memory, the optimizer step and (with\n"
         "      2+ GPUs) NCCL collectives and the Ulysses all-to-all, then fits a profile. Writes the raw\n"
         "      measurements (default: FILE with .measurements.json) before fitting, then the profile (default:\n"
         "      profile-M.json). --prior: profile supplying what is not measured (default: the default profile of\n"
         "      the detected GPU kind); --quick: fewer points and repetitions (a smoke run).\n"
         "  selftest [--seed N]\n"
         "      Checks the attention kernels, layer ops, GEMM wrapper and layer proxy against references on fresh\n"
         "      random inputs (seed printed; default: from the clock). Exit 1 when a check fails.\n"
         "  bench-attention --model M [--heads H --kv-heads K] [--seqlens L,L,...] [--tokens T] [--warmup N] [--reps "
         "N]\n"
         "      TFLOP/s of the attention kernels on packed causal sequences of the model's shape (default lengths\n"
         "      512,1024,2048,4096,8192,16384, packed to 32768 tokens); calibrate/sdpa_bench.py runs PyTorch's\n"
         "      scaled_dot_product_attention on the same shapes.\n"
      << lcsim::fit_usage() << lcsim::live_usage() << lcsim::mix_usage() << lcsim::check_jobs_usage()
      << "\n"
         "exit status: 0 success; 1 internal error or failed selftest; 2 bad input or no usable GPU; 3 a policy\n"
         "could not plan (live).\n";
}

/// --key value options and --flag switches of one command.
struct Args {
  std::map<std::string, std::string> values;
  std::set<std::string> flags;
  const std::string* get(const std::string& key) const {
    auto it = values.find(key);
    return it == values.end() ? nullptr : &it->second;
  }
};

Args parse(int argc, char** argv, int first, const std::set<std::string>& keys, const std::set<std::string>& flags) {
  Args args;
  for (int i = first; i < argc; ++i) {
    const std::string arg = argv[i];
    if (flags.count(arg)) {
      args.flags.insert(arg);
    } else if (keys.count(arg)) {
      if (i + 1 >= argc) throw lcsim::InputError("missing value for " + arg);
      args.values[arg] = argv[++i];
    } else {
      throw lcsim::InputError("unknown argument '" + arg + "'");
    }
  }
  return args;
}

/// parse(text, &used) must consume all of text; anything else is an InputError naming the option.
template <class Parse>
auto parse_number(const std::string& text, const std::string& what, Parse parse) {
  try {
    std::size_t used = 0;
    const auto v = parse(text, &used);
    if (used == text.size()) return v;
  } catch (const std::logic_error&) {  // std::invalid_argument, std::out_of_range
  }
  throw lcsim::InputError(what + ": not a valid number: '" + text + "'");
}

std::uint64_t parse_seed(const std::string& text) {
  if (!text.empty() && text[0] == '-') throw lcsim::InputError("--seed: must not be negative");
  return parse_number(text, "--seed", [](const std::string& t, std::size_t* used) { return std::stoull(t, used); });
}

int parse_int(const std::string& text, const char* what) {
  const int v = parse_number(text, what, [](const std::string& t, std::size_t* used) { return std::stoi(t, used); });
  if (v < 0) throw lcsim::InputError(std::string(what) + ": must not be negative");
  return v;
}

std::vector<int> parse_list(const std::string& text) {
  std::vector<int> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    out.push_back(parse_int(text.substr(start, end - start), "--seqlens"));
    start = end + 1;
  }
  return out;
}

std::string with_suffix(const std::string& file, const std::string& suffix) {
  const std::string json = ".json";
  const bool has_json = file.size() > json.size() && file.compare(file.size() - json.size(), json.size(), json) == 0;
  return (has_json ? file.substr(0, file.size() - json.size()) : file) + suffix;
}

int calibrate(int argc, char** argv) {
  const Args a =
      parse(argc, argv, 2, {"--model", "--out", "--measurements", "--prior", "--peak-tflops", "--seed"}, {"--quick"});
  lcsim::gpu::CalibrateOptions o;
  if (!a.get("--model")) throw lcsim::InputError("calibrate: --model is required");
  o.model = *a.get("--model");
  lcsim::named_model(o.model);  // a bad name is an input error before the GPU is touched
  o.out = a.get("--out") ? *a.get("--out") : "profile-" + o.model + ".json";
  o.measurements = a.get("--measurements") ? *a.get("--measurements") : with_suffix(o.out, ".measurements.json");
  if (a.get("--prior")) o.prior = *a.get("--prior");
  if (a.get("--peak-tflops")) o.peak_tflops = lcsim::parse_peak_tflops(*a.get("--peak-tflops"));
  if (a.get("--seed")) o.seed = parse_seed(*a.get("--seed"));
  o.quick = a.flags.count("--quick") > 0;
  lcsim::check_output_files({{"--out", o.out}, {"--measurements", o.measurements}}, {o.prior});
  lcsim::gpu::visible_gpus();
  lcsim::gpu::run_calibrate(o, std::cout);
  return 0;
}

int selftest(int argc, char** argv) {
  const Args a = parse(argc, argv, 2, {"--seed"}, {});
  const std::uint64_t seed =
      a.get("--seed") ? parse_seed(*a.get("--seed"))
                      : static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  lcsim::gpu::visible_gpus();
  cudaStream_t stream = nullptr;
  lcsim::kernels::check_cuda(cudaStreamCreate(&stream), "stream");
  const bool ok = lcsim::gpu::run_selftest(seed, stream, std::cout);
  cudaStreamDestroy(stream);
  return ok ? 0 : kInternalError;
}

int bench_attention(int argc, char** argv) {
  const Args a =
      parse(argc, argv, 2, {"--model", "--heads", "--kv-heads", "--seqlens", "--tokens", "--warmup", "--reps"}, {});
  if (!a.get("--model")) throw lcsim::InputError("bench-attention: --model is required");
  lcsim::ModelConfig model = lcsim::named_model(*a.get("--model"));
  // A Ulysses rank runs a few of the model's heads at the whole sequence length: --heads/--kv-heads time that call.
  if (a.get("--heads") || a.get("--kv-heads")) {
    if (!a.get("--heads") || !a.get("--kv-heads")) throw lcsim::InputError("--heads and --kv-heads go together");
    model.heads = parse_int(*a.get("--heads"), "--heads");
    model.kv_heads = parse_int(*a.get("--kv-heads"), "--kv-heads");
    if (model.heads < 1 || model.kv_heads < 1 || model.heads % model.kv_heads != 0) {
      throw lcsim::InputError("--heads must be a positive multiple of --kv-heads");
    }
  }
  const auto seqlens = parse_list(a.get("--seqlens") ? *a.get("--seqlens") : "512,1024,2048,4096,8192,16384");
  const int tokens = a.get("--tokens") ? parse_int(*a.get("--tokens"), "--tokens") : 32768;
  const int warmup = a.get("--warmup") ? parse_int(*a.get("--warmup"), "--warmup") : 5;
  const int reps = a.get("--reps") ? parse_int(*a.get("--reps"), "--reps") : 20;
  if (reps < 1) throw lcsim::InputError("--reps must be >= 1");
  lcsim::gpu::visible_gpus();
  lcsim::gpu::run_bench_attention(model, seqlens, tokens, warmup, reps, std::cout);
  return 0;
}

int fit(int argc, char** argv) {
  lcsim::run_fit_command(std::vector<std::string>(argv + 2, argv + argc), std::cout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(std::cerr);
    return kUsageError;
  }
  const std::string_view command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    usage(std::cout);
    return 0;
  }
  try {
    if (command == "calibrate") return calibrate(argc, argv);
    if (command == "selftest") return selftest(argc, argv);
    if (command == "bench-attention") return bench_attention(argc, argv);
    if (command == "fit") return fit(argc, argv);
    if (command == "check-jobs") {
      lcsim::run_check_jobs_command(std::vector<std::string>(argv + 2, argv + argc), std::cout);
      return 0;
    }
    if (command == "bench-mix") {
      if (argc == 3 && (std::string_view(argv[2]) == "--help" || std::string_view(argv[2]) == "-h")) {
        std::cout << "usage: lcsim-gpu\n" << lcsim::mix_usage() << lcsim::check_jobs_usage();
        return 0;
      }
      lcsim::gpu::run_bench_mix(std::vector<std::string>(argv + 2, argv + argc), std::cout);
      return 0;
    }
    if (command == "live") {
      if (argc == 3 && (std::string_view(argv[2]) == "--help" || std::string_view(argv[2]) == "-h")) {
        std::cout << "usage: lcsim-gpu\n" << lcsim::live_usage();
        return 0;
      }
      lcsim::gpu::run_live(std::vector<std::string>(argv + 2, argv + argc), std::cout);
      return 0;
    }
    std::cerr << "lcsim-gpu: unknown command '" << command << "'\n";
    usage(std::cerr);
    return kUsageError;
  } catch (const lcsim::gpu::NoGpuError& e) {
    std::cerr << "lcsim-gpu: " << e.what() << ".\nlcsim-gpu " << command
              << " needs an NVIDIA GPU with a working driver; run it on a GPU node (calibrate/README.md).\n";
    return kUsageError;
  } catch (const lcsim::InputError& e) {
    std::cerr << "lcsim-gpu: " << lcsim::terminal_text(e.what()) << "\n";
    return kUsageError;
  } catch (const lcsim::PlanningError& e) {
    std::cerr << "lcsim-gpu: planning failed: " << lcsim::terminal_text(e.what()) << "\n";
    return kPlanningError;
  } catch (const std::exception& e) {
    std::cerr << "lcsim-gpu: error: " << lcsim::terminal_text(e.what()) << "\n";
    return kInternalError;
  }
}
