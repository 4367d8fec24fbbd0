#pragma once
// What the GPU runtime helpers report, as plain data: the devices a run saw and the timing of one region. Plain C++
// (no CUDA types), so the host-side measurement files read and write them on any machine.
#include <string>

namespace lcsim {

struct DeviceDescription {
  std::string name;                ///< as the CUDA runtime names it, e.g. "NVIDIA H100 80GB HBM3"
  std::string gpu_kind;            ///< the matching named GPU kind (H100-SXM, H200, A800), "" when none matches
  int count = 0;                   ///< visible GPUs
  std::string compute_capability;  ///< "9.0"
  int multiprocessors = 0;
  double memory_bytes = 0;  ///< device memory of GPU 0
  std::string driver;       ///< NVIDIA driver version
  std::string cuda;         ///< CUDA runtime version
  std::string nccl;         ///< NCCL version, or why it was not loaded
  std::string date;         ///< ISO 8601 UTC time the run started
  std::string host;         ///< host name
};

/// One timed region: medians over the repetitions.
struct KernelTiming {
  double kernel_seconds = 0;  ///< summed durations of the region's kernels (CUPTI), or the event time without CUPTI
  double event_seconds = 0;   ///< CUDA events around the region (launch gaps included)
  int kernels = 0;            ///< kernels per repetition (0 when timed by events only)
};

}  // namespace lcsim
