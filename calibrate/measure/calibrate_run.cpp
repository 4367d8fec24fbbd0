#include "calibrate/measure/calibrate_run.hpp"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <ostream>
#include <sstream>

#include <cuda_runtime_api.h>

#include "base/errors.hpp"
#include "calibrate/fit/default_profile.hpp"
#include "calibrate/measure/compute_bench.hpp"
#include "calibrate/measure/measurement_plan.hpp"
#include "calibrate/measure/nccl_bench.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/device_info.hpp"
#include "kernels/kernel_timer.hpp"

namespace lcsim::gpu {
namespace {

using kernels::check_cuda;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

/// One progress line per sweep: "[3/8] attention: 9 points ... 12.4 s".
class Progress {
 public:
  Progress(std::ostream& out, int total) : out_(out), total_(total) {}
  template <class Fn>
  auto step(const std::string& what, std::size_t points, Fn fn) {
    ++done_;
    out_ << "[" << done_ << "/" << total_ << "] " << what << ": " << points << " point(s)" << std::endl;
    const auto start = std::chrono::steady_clock::now();
    auto result = fn();
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    out_ << "[" << done_ << "/" << total_ << "] " << what << " done in " << std::fixed << std::setprecision(1)
         << elapsed.count() << " s" << std::defaultfloat << "\n"
         << std::endl;
    return result;
  }

 private:
  std::ostream& out_;
  int total_;
  int done_ = 0;
};

struct Stream {
  cudaStream_t handle = nullptr;
  Stream() { check_cuda(cudaStreamCreateWithFlags(&handle, cudaStreamNonBlocking), "stream"); }
  ~Stream() { cudaStreamDestroy(handle); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
};

}  // namespace

void run_calibrate(const CalibrateOptions& options, std::ostream& out) {
  const DeviceDescription device = describe_devices();
  const ModelConfig& model = named_model(options.model);
  const Profile prior = choose_prior(options.prior, device.gpu_kind, device.name, options.peak_tflops);
  if (options.out.empty() || options.measurements.empty()) throw InputError("calibrate: output files not set");

  check_cuda(cudaSetDevice(0), "cudaSetDevice");
  Stream stream;
  KernelTimer timer(stream.handle);
  kernels::DeviceArena arena;
  kernels::GemmRunner gemm(stream.handle);
  std::size_t free_bytes = 0, total_bytes = 0;
  check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  const MeasurementPlan plan =
      plan_measurements(model, {static_cast<double>(free_bytes), device.count, options.quick, options.seed});

  out << "lcsim-gpu calibrate --model " << model.name << (options.quick ? " --quick" : "") << "\n"
      << "device: " << device.name << " x" << device.count << " (" << device.gpu_kind << ", cc "
      << device.compute_capability << ", " << device.multiprocessors << " SMs, " << std::fixed << std::setprecision(1)
      << device.memory_bytes / kGiB << " GiB, " << static_cast<double>(free_bytes) / kGiB << " GiB free)"
      << std::defaultfloat << "\n"
      << "driver " << device.driver << ", CUDA " << device.cuda << ", NCCL " << device.nccl << "\n"
      << "kernel timing: " << timer.timing_source() << "; " << plan.warmup << " warm-up + " << plan.repetitions
      << " timed repetitions, medians\n"
      << "prior: " << prior.gpu << ", " << prior.label() << ", peak " << prior.compute.peak_tflops << " TFLOP/s\n";
  for (const auto& s : plan.skipped) out << "skipped: " << s << "\n";
  out << std::endl;

  Measurements m;
  m.device = device;
  m.model = model.name;
  m.timing = timer.timing_source();
  m.warmup = plan.warmup;
  m.repetitions = plan.repetitions;
  const GpuContext gpu{stream.handle, &arena,           &gemm,       &timer, l2_cache_bytes(),
                       plan.warmup,   plan.repetitions, options.seed};
  const bool multi = device.count >= 2;
  Progress progress(out, multi ? 7 : 5);
  m.gemm = progress.step("GEMM sweep", plan.gemm_tokens.size(),
                         [&] { return measure_gemms(gpu, model, plan.gemm_tokens, out); });
  m.attention = progress.step("attention sweep", plan.attention.size(),
                              [&] { return measure_attention(gpu, model, plan.attention, out); });
  m.layers = progress.step("layer proxy sweep", plan.layer_batches.size() * plan.layer_recompute.size(),
                           [&] { return measure_layers(gpu, model, plan.layer_batches, plan.layer_recompute, out); });
  m.memory =
      progress.step("activation memory", plan.memory.size(), [&] { return measure_memory(gpu, plan.memory, out); });
  m.optimizer = progress.step("optimizer step", plan.optimizer_parameters.size(),
                              [&] { return measure_optimizer(gpu, plan.optimizer_parameters, out); });
  if (multi) {
    m.collectives = progress.step("NCCL collectives", plan.collectives.size(), [&] {
      return measure_collectives(plan.collectives, plan.warmup, plan.repetitions, out);
    });
    m.ulysses = progress.step("Ulysses all-to-all", plan.ulysses.size(),
                              [&] { return measure_ulysses(model, plan.ulysses, plan.warmup, plan.repetitions, out); });
  }
  for (const auto& s : plan.skipped) m.warnings.push_back("skipped: " + s);
  for (const auto& w : timer.warnings()) m.warnings.push_back(w);
  // The raw data first: a fit that fails still leaves the measurements to inspect or refit.
  save_measurements(m, options.measurements);
  out << "wrote " << options.measurements << "\n";
  for (const auto& w : timer.warnings()) out << "warning: " << w << "\n";

  const FittedProfile fitted = fit_profile(m, model, prior, options.measurements);
  print_report(fitted.report, out);
  save_profile(fitted.profile, options.out);
  out << "wrote " << options.out << ": " << fitted.profile.gpu << ", " << fitted.profile.label() << "\n";
}

void run_bench_attention(const ModelConfig& model, const std::vector<int>& seqlens, int pack_tokens, int warmup,
                         int repetitions, std::ostream& out) {
  const DeviceDescription device = describe_devices();
  if (model.head_dim != 64 && model.head_dim != 128) {
    throw InputError("model " + model.name + ": head_dim " + std::to_string(model.head_dim) + " is not supported");
  }
  if (pack_tokens < 1) throw InputError("--tokens must be positive");
  std::vector<AttentionPoint> points;
  for (int s : seqlens) {
    if (s < 1) throw InputError("--seqlens: lengths must be positive");
    points.push_back({s, std::max(1, pack_tokens / s)});
  }
  check_cuda(cudaSetDevice(0), "cudaSetDevice");
  Stream stream;
  KernelTimer timer(stream.handle);
  kernels::DeviceArena arena;
  kernels::GemmRunner gemm(stream.handle);
  out << "lcsim-gpu bench-attention on " << device.name << ", kernel timing: " << timer.timing_source() << "\n";
  const GpuContext gpu{stream.handle, &arena, &gemm, &timer, l2_cache_bytes(), warmup, repetitions, 1};
  measure_attention(gpu, model, points, out);
  for (const auto& w : timer.warnings()) out << "warning: " << w << "\n";
  std::ostringstream lens;
  for (std::size_t i = 0; i < seqlens.size(); ++i) lens << (i ? "," : "") << seqlens[i];
  out << "same shapes through PyTorch: python3 calibrate/sdpa_bench.py --heads " << model.heads << " --kv-heads "
      << model.kv_heads << " --head-dim " << model.head_dim << " --seqlens " << lens.str() << " --tokens "
      << pack_tokens << "\n";
}

}  // namespace lcsim::gpu
