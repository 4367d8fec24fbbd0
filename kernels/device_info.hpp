#pragma once
// The GPUs this process sees, and the software stack, for a profile's provenance.
#include <stdexcept>
#include <string>

#include "kernels/device_records.hpp"

namespace lcsim::gpu {

/// No usable CUDA device (no driver, no GPU, or CUDA_VISIBLE_DEVICES hides them all).
class NoGpuError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Number of visible devices; throws NoGpuError naming the CUDA error when there is none.
int visible_gpus();

/// Name, count, compute capability, multiprocessors and memory of device 0; driver (NVML when it can be loaded,
/// else the CUDA driver API version), CUDA runtime and NCCL versions; UTC date and host name.
DeviceDescription describe_devices();

/// L2 cache bytes of device 0.
double l2_cache_bytes();

}  // namespace lcsim::gpu
