#pragma once
// A caching device allocator with accounting (MemoryTracker): buffers freed on the host return to a per-size free
// list and are reused by later allocations, which is safe because every user of the arena runs on one stream.
// After warm-up a timed region therefore makes no cudaMalloc calls, and peak_bytes() is the activation high-water
// mark the calibration reports.
#include <cstddef>
#include <map>
#include <vector>

#include "kernels/memory_tracker.hpp"

namespace lcsim::kernels {

class DeviceArena;

/// Move-only owner of one arena allocation; returns it to the arena when destroyed.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }
  explicit operator bool() const { return data_ != nullptr; }
  void reset();

 private:
  friend class DeviceArena;
  DeviceBuffer(DeviceArena* arena, void* data, std::size_t bytes) : arena_(arena), data_(data), bytes_(bytes) {}
  DeviceArena* arena_ = nullptr;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

class DeviceArena {
 public:
  DeviceArena() = default;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  ~DeviceArena();

  /// Throws CudaError when the device is out of memory (after releasing the cache once).
  DeviceBuffer allocate(std::size_t bytes);
  template <class T>
  DeviceBuffer allocate_array(std::size_t count) {
    return allocate(count * sizeof(T));
  }

  const MemoryTracker& tracker() const { return tracker_; }
  void reset_peak() { tracker_.reset_peak(); }
  /// Bytes held from the device (live + cached).
  std::size_t reserved_bytes() const { return reserved_; }
  /// cudaFree every cached (not live) block; the caller synchronises the stream first.
  void release_cached();

 private:
  friend class DeviceBuffer;
  void give_back(void* data, std::size_t bytes);

  MemoryTracker tracker_;
  std::map<std::size_t, std::vector<void*>> free_;
  std::size_t reserved_ = 0;
};

}  // namespace lcsim::kernels
