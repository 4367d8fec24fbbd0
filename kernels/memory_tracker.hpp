#pragma once
// Allocation accounting of the layer proxy's device arena: bytes live now, and the high-water mark since the last
// reset -- what torch.cuda.max_memory_allocated reports for PyTorch. Plain C++ so the host tests can check it.
#include <algorithm>
#include <cstddef>
#include <stdexcept>

namespace lcsim::kernels {

class MemoryTracker {
 public:
  /// Sizes are rounded up to this granularity, as the arena hands them out.
  static constexpr std::size_t kGranularity = 512;
  static constexpr std::size_t rounded(std::size_t bytes) {
    return (bytes + kGranularity - 1) / kGranularity * kGranularity;
  }

  void on_allocate(std::size_t bytes) {
    live_ += bytes;
    peak_ = std::max(peak_, live_);
  }
  void on_free(std::size_t bytes) {
    if (bytes > live_) throw std::logic_error("MemoryTracker: freeing more bytes than are live");
    live_ -= bytes;
  }
  /// The high-water mark restarts from what is live now.
  void reset_peak() { peak_ = live_; }

  std::size_t live_bytes() const { return live_; }
  std::size_t peak_bytes() const { return peak_; }

 private:
  std::size_t live_ = 0;
  std::size_t peak_ = 0;
};

}  // namespace lcsim::kernels
