#include "live/gpu/live_device.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <vector>

#include "base/errors.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/kernel_timer.hpp"
#include "kernels/layer_ops.hpp"
#include "kernels/lm_head.hpp"

namespace lcsim::gpu {
namespace {

using kernels::bf16;
using kernels::check_cuda;

/// AdamW's state per parameter: FP32 master weight, two moments and gradient, and the BF16 weight.
constexpr double kOptimizerBytesPerParam = 4 * 4 + 2;
/// Below this many parameters' worth of static block, the optimizer step gets its own scratch.
constexpr std::int64_t kMinOptimizerChunk = 1 << 20;
constexpr std::int64_t kScratchOptimizerChunk = 1 << 24;

double elapsed(cudaEvent_t from, cudaEvent_t to) {
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, from, to), "live: event time");
  return static_cast<double>(ms) * 1e-3;
}

void record(cudaEvent_t event, cudaStream_t stream) {
  if (event != nullptr) check_cuda(cudaEventRecord(event, stream), "live: event record");
}

std::string shard_key(const ModelConfig& m) {
  return std::to_string(m.hidden) + "/" + std::to_string(m.heads) + "/" + std::to_string(m.kv_heads) + "/" +
         std::to_string(m.head_dim) + "/" + std::to_string(m.ffn);
}

}  // namespace

LiveDevice::LiveDevice(int device, double usable_bytes, std::uint64_t seed) : device_(device), seed_(seed) {
  check_cuda(cudaSetDevice(device), "live: cudaSetDevice");
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "live: stream");
  arena_ = std::make_unique<kernels::DeviceArena>();
  gemm_ = std::make_unique<kernels::GemmRunner>(stream_);
  std::size_t free = 0, total = 0;
  check_cuda(cudaMemGetInfo(&free, &total), "live: cudaMemGetInfo");
  free_at_start_ = static_cast<double>(free);
  if (static_cast<double>(free) > usable_bytes) {
    const auto hold = static_cast<std::size_t>(static_cast<double>(free) - usable_bytes);
    check_cuda(cudaMalloc(&held_, hold), "live: holding back memory beyond the planned GPU's capacity");
    held_back_ = static_cast<double>(hold);
  }
}

LiveDevice::~LiveDevice() {
  cudaSetDevice(device_);
  cudaStreamSynchronize(stream_);
  head_weight_.reset();
  head_grad_.reset();
  proxy_.reset();
  gemm_.reset();
  arena_.reset();
  cudaFree(static_);
  cudaFree(held_);
  cudaStreamDestroy(stream_);
}

void LiveDevice::release_cached() {
  check_cuda(cudaStreamSynchronize(stream_), "live: synchronise");
  arena_->release_cached();
}

bool LiveDevice::reserve_static(double bytes) {
  const auto want = static_cast<std::size_t>(std::llround(bytes));
  if (want == static_bytes_ && (want == 0 || static_ != nullptr)) return true;
  release_cached();
  check_cuda(cudaFree(static_), "live: freeing the static block");
  static_ = nullptr;
  static_bytes_ = 0;
  static_filled_ = false;
  if (want == 0) return true;
  cudaError_t status = cudaMalloc(&static_, want);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    static_ = nullptr;
    return false;
  }
  check_cuda(status, "live: static block of " + std::to_string(want) + " bytes");
  static_bytes_ = want;
  return true;
}

kernels::LayerProxy& LiveDevice::proxy_for(const ModelConfig& shard) {
  const std::string key = shard_key(shard);
  if (proxy_ && key == proxy_key_) return *proxy_;
  // One proxy at a time: another's batch would hold memory the plan does not account for.
  proxy_.reset();
  release_cached();
  try {
    proxy_ = std::make_unique<kernels::LayerProxy>(shard, *arena_, *gemm_, seed_);
  } catch (const std::invalid_argument& e) {
    throw PlanningError(std::string("live: ") + e.what());
  }
  proxy_key_ = key;
  return *proxy_;
}

double LiveDevice::run_layers(const ProxyShape& shape, const JobEvents& events) {
  kernels::LayerProxy& proxy = proxy_for(shape.shard);
  const int hidden = shape.shard.hidden;
  if (shape.shard.vocab > INT_MAX) throw PlanningError("live: vocabulary too large for one GEMM");
  const int vocab = static_cast<int>(shape.shard.vocab);
  if (shape.lm_head) {
    const std::string key = std::to_string(vocab) + "x" + std::to_string(hidden);
    if (key != head_key_) {
      head_weight_.reset();
      head_grad_.reset();
      head_key_.clear();  // until both are allocated again: an allocation failure must not leave a stale key
      const auto elements = static_cast<std::int64_t>(vocab) * hidden;
      head_weight_ = arena_->allocate(static_cast<std::size_t>(elements) * sizeof(bf16));
      kernels::fill_uniform(head_weight_.as<bf16>(), elements, seed_ + 7, 1.f / std::sqrt(static_cast<float>(hidden)),
                            stream_);
      head_grad_ = arena_->allocate(static_cast<std::size_t>(elements) * sizeof(bf16));
      check_cuda(cudaMemsetAsync(head_grad_.as<void>(), 0, head_grad_.bytes(), stream_), "live: head gradient");
      head_key_ = key;
    }
  }
  proxy.set_batch(shape.local,
                  kernels::LayerProxy::Sharded{shape.sharded, shape.cp, shape.sharded_heads, shape.sharded_kv_heads});
  const int rows = proxy.tokens();
  // The batch's input and output gradient are activations; whatever else was live before is not the run's.
  const double batch_bytes = 2.0 * rows * hidden * static_cast<double>(sizeof(bf16));
  const double base = static_cast<double>(arena_->tracker().live_bytes()) - batch_bytes;
  arena_->reset_peak();
  record(events.start, stream_);
  proxy.run(shape.layers, shape.recompute, shape.checkpointed_layers, [&] {
    // LM head: logits = x W^T; backward with the logits buffer as their gradient (a fused loss leaves it there).
    kernels::DeviceBuffer logits;
    if (shape.lm_head) {
      static_assert(kernels::kLmHeadLogitsBytesPerVocab == sizeof(bf16), "the fit's logits bytes are this buffer's");
      logits = arena_->allocate(static_cast<std::size_t>(rows) * static_cast<std::size_t>(vocab) * sizeof(bf16));
      gemm_->gemm(rows, vocab, hidden, proxy.input(), false, head_weight_.as<bf16>(), true, logits.as<bf16>());
    }
    record(events.mid, stream_);
    if (shape.lm_head) {
      kernels::DeviceBuffer dx = arena_->allocate(static_cast<std::size_t>(rows) * hidden * sizeof(bf16));
      gemm_->gemm(rows, hidden, vocab, logits.as<bf16>(), false, head_weight_.as<bf16>(), false, dx.as<bf16>());
      gemm_->gemm(vocab, hidden, rows, logits.as<bf16>(), true, proxy.input(), false, head_grad_.as<bf16>(), 1.f);
    }
  });
  record(events.end, stream_);
  return static_cast<double>(arena_->tracker().peak_bytes()) - base;
}

void LiveDevice::fill_optimizer_states(char* base, std::int64_t chunk) {
  // Master weights, first moments and gradients random; second moments zero (a random negative one would make
  // the update NaN).
  auto* states = reinterpret_cast<float*>(base);
  kernels::fill_uniform(states, chunk * 4, seed_ + 11, 1e-2f, stream_);
  check_cuda(cudaMemsetAsync(states + 2 * chunk, 0, static_cast<std::size_t>(chunk) * sizeof(float), stream_),
             "live: optimizer second moments");
}

double LiveDevice::run_optimizer(double parameters, const JobEvents& events) {
  const std::int64_t total = std::llround(parameters);
  std::int64_t chunk = std::min<std::int64_t>(
      total, static_cast<std::int64_t>(static_cast<double>(static_bytes_) / kOptimizerBytesPerParam));
  kernels::DeviceBuffer scratch;
  char* base = static_cast<char*>(static_);
  if (chunk < std::min(total, kMinOptimizerChunk)) {
    // The static block is too small to hold the states it stands for (ZeRO-3 over many GPUs): own scratch.
    chunk = std::min(total, kScratchOptimizerChunk);
    scratch = arena_->allocate(static_cast<std::size_t>(static_cast<double>(chunk) * kOptimizerBytesPerParam));
    base = scratch.as<char>();
    fill_optimizer_states(base, chunk);
  } else if (!static_filled_) {
    fill_optimizer_states(base, chunk);
    static_filled_ = true;
  }
  const double scratch_bytes = static_cast<double>(scratch.bytes());
  if (chunk <= 0) {
    record(events.start, stream_);
    record(events.mid, stream_);
    record(events.end, stream_);
    return scratch_bytes;
  }
  float* master = reinterpret_cast<float*>(base);
  bf16* param = reinterpret_cast<bf16*>(master + 4 * chunk);
  const kernels::AdamW opt;
  record(events.start, stream_);
  for (std::int64_t done = 0; done < total; done += chunk)
    kernels::adamw_step(master, master + chunk, master + 2 * chunk, master + 3 * chunk, param,
                        std::min(chunk, total - done), opt, stream_);
  record(events.mid, stream_);
  record(events.end, stream_);
  return scratch_bytes;
}

double LiveDevice::enqueue(const DeviceJob& job, const JobEvents& events) {
  return job.kind == DeviceJob::Kind::Optimizer ? run_optimizer(job.parameters, events) : run_layers(job.shape, events);
}

JobResult LiveDevice::measure(const DeviceJob& job, int warmup, int repetitions) {
  JobResult result;
  if (!reserve_static(job.static_bytes)) {
    result.oom = true;
    result.oom_error = "the plan's static bytes (" + std::to_string(job.static_bytes / (1024.0 * 1024 * 1024)) +
                       " GiB) do not fit beside what the device holds";
    return result;
  }
  const int untimed = job.timed ? warmup : 0;
  const int timed = job.timed ? repetitions : 1;
  cudaEvent_t start = nullptr, mid = nullptr, end = nullptr;
  check_cuda(cudaEventCreate(&start), "live: event");
  check_cuda(cudaEventCreate(&mid), "live: event");
  check_cuda(cudaEventCreate(&end), "live: event");
  std::vector<double> forward, backward, whole;
  try {
    const auto run = [&](const JobEvents& events) {
      result.activation_peak_bytes = std::max(result.activation_peak_bytes, enqueue(job, events));
    };
    for (int i = 0; i < untimed; ++i) run({});
    for (int i = 0; i < timed; ++i) {
      run({start, mid, end});
      check_cuda(cudaEventSynchronize(end), "live: job");
      forward.push_back(elapsed(start, mid));
      backward.push_back(elapsed(mid, end));
      whole.push_back(elapsed(start, end));
    }
    result.forward_s = median(forward);
    result.backward_s = median(backward);
    result.total_s = median(whole);
  } catch (const kernels::CudaOutOfMemory& e) {
    result.oom = true;
    result.oom_error = e.what();
    release_cached();
  }
  cudaEventDestroy(start);
  cudaEventDestroy(mid);
  cudaEventDestroy(end);
  return result;
}

}  // namespace lcsim::gpu
