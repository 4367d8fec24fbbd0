#include "kernels/kernel_timer.hpp"

#include <cupti.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <utility>

#include "kernels/cuda_check.hpp"

namespace lcsim::gpu {
namespace {

using kernels::check_cuda;

constexpr std::size_t kBufferBytes = 8u << 20;
constexpr std::size_t kBufferAlign = 8;

/// Kernel intervals delivered by CUPTI since the last take().
struct Collector {
  std::mutex mutex;
  std::vector<std::uint64_t> durations_ns;
  std::size_t dropped = 0;
};
Collector& collector() {
  static Collector c;
  return c;
}

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext context, std::uint32_t stream_id, std::uint8_t* buffer, std::size_t,
                               std::size_t valid) {
  Collector& c = collector();
  {
    std::lock_guard lock(c.mutex);
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
      if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
        const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        c.durations_ns.push_back(kernel->end - kernel->start);
      }
    }
    std::size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS) c.dropped += dropped;
  }
  std::free(buffer);
}

std::string cupti_error(CUptiResult result) {
  const char* text = nullptr;
  cuptiGetResultString(result, &text);
  return text != nullptr ? text : "unknown CUPTI error";
}

/// Kernel durations (seconds) and count collected since the last call.
std::pair<double, int> take_kernels(std::size_t& dropped) {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  Collector& c = collector();
  std::lock_guard lock(c.mutex);
  std::uint64_t total = 0;
  for (auto d : c.durations_ns) total += d;
  const auto count = static_cast<int>(c.durations_ns.size());
  c.durations_ns.clear();
  dropped = std::exchange(c.dropped, 0);
  return {static_cast<double>(total) * 1e-9, count};
}

}  // namespace

double median(std::vector<double> values) {
  if (values.empty()) throw std::invalid_argument("median of no values");
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

KernelTimer::KernelTimer(cudaStream_t stream) : stream_(stream) {
  check_cuda(cudaEventCreate(&start_), "KernelTimer: event");
  check_cuda(cudaEventCreate(&stop_), "KernelTimer: event");
  CUptiResult status = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (status == CUPTI_SUCCESS) status = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cupti_ = status == CUPTI_SUCCESS;
  source_ = cupti_ ? "cupti" : "cuda-events (CUPTI unavailable: " + cupti_error(status) + ")";
}

KernelTimer::~KernelTimer() {
  if (cupti_) {
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
  cudaEventDestroy(stop_);
  cudaEventDestroy(start_);
}

KernelTiming KernelTimer::measure(const std::string& what, const std::function<void(int)>& region, int warmup,
                                  int repetitions) {
  if (repetitions < 1) throw std::invalid_argument("KernelTimer: repetitions must be >= 1");
  for (int i = 0; i < warmup; ++i) region(i);
  check_cuda(cudaStreamSynchronize(stream_), "KernelTimer: warm-up of " + what);
  std::size_t dropped = 0;
  if (cupti_) take_kernels(dropped);  // discard the warm-up's records
  std::vector<double> kernel_s, event_s;
  std::vector<int> counts;
  for (int rep = 0; rep < repetitions; ++rep) {
    check_cuda(cudaEventRecord(start_, stream_), "KernelTimer: record");
    region(warmup + rep);
    check_cuda(cudaEventRecord(stop_, stream_), "KernelTimer: record");
    check_cuda(cudaEventSynchronize(stop_), "KernelTimer: " + what);
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, start_, stop_), "KernelTimer: elapsed");
    event_s.push_back(ms * 1e-3);
    if (cupti_) {
      std::size_t lost = 0;
      const auto [seconds, count] = take_kernels(lost);
      dropped += lost;
      kernel_s.push_back(seconds);
      counts.push_back(count);
    }
  }
  KernelTiming t;
  t.event_seconds = median(event_s);
  if (!cupti_) {
    t.kernel_seconds = t.event_seconds;
    return t;
  }
  const bool same_count = std::all_of(counts.begin(), counts.end(), [&](int c) { return c == counts.front(); });
  t.kernel_seconds = median(kernel_s);
  t.kernels = counts.front();
  // One stream runs its kernels one after another: their summed durations cannot exceed the wall time between
  // the events (2 % + 2 us for timer resolution).
  const bool consistent = t.kernel_seconds <= t.event_seconds * 1.02 + 2e-6;
  if (!same_count || dropped > 0 || t.kernels == 0 || !consistent) {
    warnings_.push_back(what + ": CUPTI records unusable (" +
                        (dropped > 0      ? std::to_string(dropped) + " dropped"
                         : !same_count    ? "kernel count changed between repetitions"
                         : t.kernels == 0 ? "no kernel records"
                                          : "kernel time " + std::to_string(t.kernel_seconds * 1e6) +
                                                " us > event time " + std::to_string(t.event_seconds * 1e6) + " us") +
                        "); CUDA event time used");
    t.kernel_seconds = t.event_seconds;
    t.kernels = 0;
  }
  return t;
}

double KernelTimer::measure_events(const std::function<void(int)>& region, int warmup, int repetitions) {
  if (repetitions < 1) throw std::invalid_argument("KernelTimer: repetitions must be >= 1");
  for (int i = 0; i < warmup; ++i) region(i);
  std::vector<double> event_s;
  for (int rep = 0; rep < repetitions; ++rep) {
    check_cuda(cudaEventRecord(start_, stream_), "KernelTimer: record");
    region(warmup + rep);
    check_cuda(cudaEventRecord(stop_, stream_), "KernelTimer: record");
    check_cuda(cudaEventSynchronize(stop_), "KernelTimer: region");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, start_, stop_), "KernelTimer: elapsed");
    event_s.push_back(ms * 1e-3);
  }
  if (cupti_) {
    std::size_t dropped = 0;
    take_kernels(dropped);  // these records are not needed; keep the collector small
  }
  return median(event_s);
}

}  // namespace lcsim::gpu
