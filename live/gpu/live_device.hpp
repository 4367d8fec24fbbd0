#pragma once
// One GPU of `lcsim-gpu live`: runs DeviceJobs (live/live_work.hpp) -- the layer proxy over a step's
// sequences with the LM head between its forward and backward, or the optimizer step -- with the GPU's static
// bytes reserved as one block beside them, so that what runs out of memory is what would on the planned GPU.
//
// Memory: at construction, what the device has free beyond `usable_bytes` (the plan's capacity: the GPU kind's
// memory minus the profile's reserve) is held back, so a larger GPU does not hide an out-of-memory. A job's
// activation peak is the arena's high-water mark above what was live before it, its batch input and output
// gradient included; the proxy's one layer of weights and the LM head's weights are not counted (the static
// block stands for every parameter). An allocation failure is a JobResult with oom set, never an exception.
#include <memory>
#include <string>

#include <cuda_runtime_api.h>

#include "kernels/device_arena.hpp"
#include "kernels/gemm.hpp"
#include "kernels/layer_proxy.hpp"
#include "live/live_compose.hpp"
#include "live/live_work.hpp"

namespace lcsim::gpu {

/// Events around one run: start, after the forward (and the LM head's forward), end. Any may be null.
struct JobEvents {
  cudaEvent_t start = nullptr;
  cudaEvent_t mid = nullptr;
  cudaEvent_t end = nullptr;
};

class LiveDevice {
 public:
  /// Makes `device` current on the calling thread and creates its stream, arena and GEMM runner.
  LiveDevice(int device, double usable_bytes, std::uint64_t seed);
  ~LiveDevice();
  LiveDevice(const LiveDevice&) = delete;
  LiveDevice& operator=(const LiveDevice&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  /// Bytes held back at construction (0 when the device has no more than `usable_bytes` free), and free then.
  double held_back_bytes() const { return held_back_; }
  double free_bytes_at_start() const { return free_at_start_; }

  /// Holds `bytes` of static memory (a no-op when that much is held). Returns false when it does not fit.
  bool reserve_static(double bytes);
  /// The static block (for communication buffers carved from the gradients it stands for), and its size.
  void* static_block() const { return static_; }
  std::size_t static_size() const { return static_bytes_; }

  /// warmup + repetitions runs of `job` (a probe: one run), timed with CUDA events; the static block is resized to
  /// the job's first. Synchronises.
  JobResult measure(const DeviceJob& job, int warmup, int repetitions);
  /// Enqueues one run on the stream (the batch upload synchronises it first) and returns its activation peak in
  /// bytes; CudaOutOfMemory propagates. The static block must already be reserved.
  double enqueue(const DeviceJob& job, const JobEvents& events);

  /// Frees cached arena blocks (synchronises first).
  void release_cached();

 private:
  kernels::LayerProxy& proxy_for(const ModelConfig& shard);
  double run_layers(const ProxyShape& shape, const JobEvents& events);
  double run_optimizer(double parameters, const JobEvents& events);
  void fill_optimizer_states(char* base, std::int64_t chunk);

  int device_;
  std::uint64_t seed_;
  cudaStream_t stream_ = nullptr;
  void* held_ = nullptr;
  double held_back_ = 0;
  double free_at_start_ = 0;
  void* static_ = nullptr;
  std::size_t static_bytes_ = 0;
  bool static_filled_ = false;
  // Destroyed in reverse order: buffers and the proxy before the arena.
  std::unique_ptr<kernels::DeviceArena> arena_;
  std::unique_ptr<kernels::GemmRunner> gemm_;
  std::unique_ptr<kernels::LayerProxy> proxy_;
  std::string proxy_key_;
  kernels::DeviceBuffer head_weight_, head_grad_;
  std::string head_key_;
};

}  // namespace lcsim::gpu
