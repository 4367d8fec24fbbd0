#pragma once
// Timing of GPU regions. Kernel time comes from CUPTI activity records (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL):
// the summed durations of the kernels a region launched, without launch gaps. CUDA events around the same region
// cross-check it (event time >= kernel time on one stream; a kernel count that changes between repetitions or a
// kernel time above the event time is reported as a warning and that measurement falls back to events). Without
// CUPTI every region is timed by events, and timing_source() says so.
#include <functional>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "kernels/device_records.hpp"

namespace lcsim::gpu {

class KernelTimer {
 public:
  /// One timer per process (CUPTI's activity callbacks are global).
  explicit KernelTimer(cudaStream_t stream);
  ~KernelTimer();
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

  bool cupti() const { return cupti_; }
  /// "cupti" or "cuda-events (CUPTI unavailable: why)".
  const std::string& timing_source() const { return source_; }

  /// Runs region(rep) `warmup` times untimed, then `repetitions` times timed; medians. `what` names the region in
  /// warnings. The region must only enqueue work on the timer's stream.
  KernelTiming measure(const std::string& what, const std::function<void(int)>& region, int warmup, int repetitions);
  /// Median event time alone (regions whose launch gaps are part of what is measured).
  double measure_events(const std::function<void(int)>& region, int warmup, int repetitions);

  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  bool cupti_ = false;
  std::string source_;
  std::vector<std::string> warnings_;
};

/// Median of a non-empty list.
double median(std::vector<double> values);

}  // namespace lcsim::gpu
