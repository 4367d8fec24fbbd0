#pragma once
// The `lcsim-gpu` commands that need a GPU (calibrate, bench-attention); the offline refit (fit) is host code:
// calibrate/fit/fit_command.hpp.
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "calibrate/fit/fit_command.hpp"
#include "calibrate/fit/profile_fit.hpp"
#include "model/model.hpp"

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

/// Our attention kernels' TFLOP/s on packed causal sequences of the model's attention shape (heads, KV heads,
/// head_dim; compare with calibrate/sdpa_bench.py, which runs PyTorch's scaled_dot_product_attention on them).
void run_bench_attention(const ModelConfig& model, const std::vector<int>& seqlens, int pack_tokens, int warmup,
                         int repetitions, std::ostream& out);

}  // namespace lcsim::gpu
