#include "kernels/device_info.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <ctime>

#include <cuda_runtime_api.h>

#include "kernels/cuda_check.hpp"
#include "kernels/nccl_library.hpp"
#include "model/gpu_kind.hpp"

namespace lcsim::gpu {
namespace {

using kernels::check_cuda;

std::string version_string(int code) {
  // CUDA encodes X.Y as 1000 X + 10 Y.
  return std::to_string(code / 1000) + "." + std::to_string(code % 1000 / 10);
}

/// The NVIDIA driver version through NVML (dlopen: NVML ships with the driver, not the toolkit).
std::string nvml_driver_version() {
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nvml == nullptr) return "";
  using Init = int (*)();
  using Version = int (*)(char*, unsigned);
  auto init = reinterpret_cast<Init>(dlsym(nvml, "nvmlInit_v2"));
  auto version = reinterpret_cast<Version>(dlsym(nvml, "nvmlSystemGetDriverVersion"));
  auto shutdown = reinterpret_cast<Init>(dlsym(nvml, "nvmlShutdown"));
  std::string out;
  if (init != nullptr && version != nullptr && shutdown != nullptr && init() == 0) {
    std::array<char, 96> buffer{};
    if (version(buffer.data(), static_cast<unsigned>(buffer.size())) == 0) out = buffer.data();
    shutdown();
  }
  dlclose(nvml);
  return out;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::array<char, 32> buffer{};
  std::strftime(buffer.data(), buffer.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer.data();
}

}  // namespace

int visible_gpus() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    const std::string hint = status == cudaErrorInsufficientDriver
                                 ? "; no NVIDIA driver is loaded, or it predates this CUDA runtime (" +
                                       std::to_string(CUDART_VERSION / 1000) + "." +
                                       std::to_string(CUDART_VERSION % 1000 / 10) + ")"
                                 : "";
    throw NoGpuError(std::string("no usable CUDA GPU: cudaGetDeviceCount failed with ") + cudaGetErrorName(status) +
                     " (" + cudaGetErrorString(status) + ")" + hint);
  }
  if (count == 0) throw NoGpuError("no usable CUDA GPU: cudaGetDeviceCount found none");
  return count;
}

DeviceDescription describe_devices() {
  DeviceDescription d;
  d.count = visible_gpus();
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  d.name = prop.name;
  d.gpu_kind = match_gpu_kind(d.name);
  d.compute_capability = std::to_string(prop.major) + "." + std::to_string(prop.minor);
  d.multiprocessors = prop.multiProcessorCount;
  d.memory_bytes = static_cast<double>(prop.totalGlobalMem);
  int driver = 0;
  int runtime = 0;
  check_cuda(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  check_cuda(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  d.driver = nvml_driver_version();
  if (d.driver.empty()) d.driver = "CUDA driver API " + version_string(driver) + " (NVML unavailable)";
  d.cuda = version_string(runtime);
  d.nccl = NcclLibrary::get().version();
  d.date = utc_now();
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) == 0) d.host = host.data();
  return d;
}

double l2_cache_bytes() {
  int bytes = 0;
  check_cuda(cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, 0), "L2 cache size");
  return bytes;
}

}  // namespace lcsim::gpu
