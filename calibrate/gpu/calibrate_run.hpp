#pragma once
// The `lcsim-gpu` commands that need a GPU (calibrate, bench-attention) and the offline refit (fit).
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "calibrate/host/profile_fit.hpp"

namespace lcsim::gpu {

struct CalibrateOptions {
  std::string model;
  std::string out;           ///< profile JSON
  std::string measurements;  ///< raw measurements JSON
  std::string prior;         ///< prior profile; empty: the default profile of the detected GPU kind
  double peak_tflops = 0;    ///< overrides the prior's peak when > 0
  bool quick = false;
  std::uint64_t seed = 1;
};

/// Measures, writes the measurements file, fits and writes the profile. Throws NoGpuError without a GPU,
/// InputError for bad options, std::runtime_error (CudaError, NCCL) when the device fails.
void run_calibrate(const CalibrateOptions& options, std::ostream& out);

/// Our attention kernels' TFLOP/s on packed causal sequences of the model's shape (compare with
/// calibrate/sdpa_bench.py, which runs PyTorch's scaled_dot_product_attention on the same shapes).
void run_bench_attention(const std::string& model, const std::vector<int>& seqlens, int pack_tokens, int warmup,
                         int repetitions, std::ostream& out);

/// The prior a fit starts from: `file` when given, else the default profile of the GPU kind; a positive
/// `peak_tflops` replaces its peak. Throws InputError for an unnamed GPU kind without a prior file.
Profile choose_prior(const std::string& file, const std::string& gpu_kind, const std::string& device_name,
                     double peak_tflops);

/// Prints the fit summary table.
void print_report(const std::vector<FitReportLine>& report, std::ostream& out);

}  // namespace lcsim::gpu
