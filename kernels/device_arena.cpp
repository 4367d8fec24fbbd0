#include "kernels/device_arena.hpp"

#include <utility>

#include <cuda_runtime_api.h>

#include "kernels/cuda_check.hpp"

namespace lcsim::kernels {

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : arena_(std::exchange(other.arena_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    arena_ = std::exchange(other.arena_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  reset();
}

void DeviceBuffer::reset() {
  if (arena_ != nullptr && data_ != nullptr) arena_->give_back(data_, bytes_);
  arena_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

DeviceArena::~DeviceArena() {
  // Live buffers must not outlive the arena; cached ones are freed here (errors ignored at teardown).
  for (auto& [bytes, blocks] : free_) {
    for (void* p : blocks) cudaFree(p);
  }
}

DeviceBuffer DeviceArena::allocate(std::size_t bytes) {
  const std::size_t size = MemoryTracker::rounded(bytes == 0 ? 1 : bytes);
  auto it = free_.find(size);
  void* data = nullptr;
  if (it != free_.end() && !it->second.empty()) {
    data = it->second.back();
    it->second.pop_back();
  } else {
    cudaError_t status = cudaMalloc(&data, size);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear the sticky-free allocation error, then retry with the cache released
      check_cuda(cudaDeviceSynchronize(), "DeviceArena: synchronising before releasing the cache");
      release_cached();
      status = cudaMalloc(&data, size);
    }
    check_cuda(status, "DeviceArena: cudaMalloc of " + std::to_string(size) + " bytes");
    reserved_ += size;
  }
  tracker_.on_allocate(size);
  return DeviceBuffer(this, data, size);
}

void DeviceArena::give_back(void* data, std::size_t bytes) {
  tracker_.on_free(bytes);
  free_[bytes].push_back(data);
}

void DeviceArena::release_cached() {
  for (auto& [bytes, blocks] : free_) {
    for (void* p : blocks) {
      check_cuda(cudaFree(p), "DeviceArena: cudaFree");
      reserved_ -= bytes;
    }
    blocks.clear();
  }
}

}  // namespace lcsim::kernels
