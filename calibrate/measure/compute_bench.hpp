#pragma once
// The single-GPU sweeps of `lcsim-gpu calibrate`: the layer's GEMMs over token counts, varlen attention over
// sequence lengths, the layer proxy over micro-batch compositions, activation memory by arena high-water mark, and
// the optimizer step. Each prints one table row per point as it goes.
#include <cstdint>
#include <iosfwd>
#include <vector>

#include <cuda_runtime_api.h>

#include "calibrate/fit/measurements.hpp"
#include "calibrate/measure/measurement_plan.hpp"
#include "kernels/device_arena.hpp"
#include "kernels/gemm.hpp"
#include "kernels/kernel_timer.hpp"

namespace lcsim::gpu {

struct GpuContext {
  cudaStream_t stream = nullptr;
  kernels::DeviceArena* arena = nullptr;
  kernels::GemmRunner* gemm = nullptr;
  KernelTimer* timer = nullptr;
  double l2_bytes = 0;  ///< inputs are rotated so that repetitions do not run out of the L2 cache
  int warmup = 0;
  int repetitions = 0;
  std::uint64_t seed = 1;
};

std::vector<GemmMeasurement> measure_gemms(const GpuContext& gpu, const ModelConfig& model,
                                           const std::vector<Tokens>& tokens, std::ostream& table);
std::vector<AttentionMeasurement> measure_attention(const GpuContext& gpu, const ModelConfig& model,
                                                    const std::vector<AttentionPoint>& points, std::ostream& table);
std::vector<LayerMeasurement> measure_layers(const GpuContext& gpu, const ModelConfig& model,
                                             const std::vector<std::vector<int>>& batches,
                                             const std::vector<Recompute>& modes, std::ostream& table);
std::vector<MemoryMeasurement> measure_memory(const GpuContext& gpu, const std::vector<MemoryProbe>& probes,
                                              std::ostream& table);
std::vector<OptimizerMeasurement> measure_optimizer(const GpuContext& gpu, const std::vector<double>& parameters,
                                                    std::ostream& table);

/// FLOPs of causal attention over packed sequences (2 s^2 q_hidden each, the cost model's convention).
double attention_forward_flops(const ModelConfig& model, int seq_len, int sequences);

}  // namespace lcsim::gpu
