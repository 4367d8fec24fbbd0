#pragma once
// CUDA runtime error checks: every call's status is checked, and a failure throws with the call's purpose.
#include <stdexcept>
#include <string>

#include <cuda_runtime_api.h>

namespace lcsim::kernels {

/// A CUDA runtime or library failure on the device side.
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An allocation the device could not satisfy (cudaErrorMemoryAllocation): `lcsim-gpu live` reports it as the
/// plan's out-of-memory instead of failing.
class CudaOutOfMemory : public CudaError {
 public:
  using CudaError::CudaError;
};

inline void check_cuda(cudaError_t status, const std::string& what) {
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it so that the device stays usable
    throw CudaOutOfMemory(what + ": " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
  }
  if (status != cudaSuccess) {
    throw CudaError(what + ": " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
  }
}

/// After a kernel launch: the launch's own error (bad configuration, missing kernel image).
inline void check_launch(const std::string& what) {
  check_cuda(cudaGetLastError(), what + " launch");
}

}  // namespace lcsim::kernels
