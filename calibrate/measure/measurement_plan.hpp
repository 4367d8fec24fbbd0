#pragma once
// What `lcsim-gpu calibrate` measures, decided before touching the GPU: token and sequence-length sweeps, layer
// micro-batch compositions, memory probes, collective sizes and group sizes. Points whose estimated device memory
// exceeds the budget are dropped and listed in `skipped` with the reason (never silently).
#include <cstdint>
#include <string>
#include <vector>

#include "model/cost_model.hpp"
#include "model/model.hpp"
#include "model/profile.hpp"

namespace lcsim {

struct MeasurementOptions {
  double memory_bytes = 0;  ///< device memory the measurements may use (free memory when the run starts)
  int gpus = 1;             ///< visible GPUs (collectives need >= 2)
  bool quick = false;       ///< fewer points and repetitions: a smoke run, not a profile to rely on
  std::uint64_t seed = 1;   ///< random micro-batch compositions
};

struct AttentionPoint {
  int seq_len = 0;
  int sequences = 0;  ///< packed copies, so that short sequences fill the GPU as a real micro-batch does
};

struct MemoryProbe {
  ModelConfig model;
  int tokens = 0;
  Recompute recompute = Recompute::None;
  std::vector<int> layers;  ///< stack depths; the high-water mark's slope over depth is the per-layer activation
};

struct CollectivePlan {
  CollectiveOp op = CollectiveOp::AllReduce;
  int group_size = 2;
  std::vector<double> bytes;  ///< nccl-tests sizes
};

struct UlyssesPoint {
  int cp = 2;
  int tokens_per_gpu = 0;
};

struct MeasurementPlan {
  int warmup = 0;
  int repetitions = 0;
  std::vector<Tokens> gemm_tokens;
  std::vector<AttentionPoint> attention;
  std::vector<std::vector<int>> layer_batches;  ///< micro-batch compositions (sequence lengths)
  std::vector<Recompute> layer_recompute;       ///< each composition is timed with each of these
  std::vector<MemoryProbe> memory;
  std::vector<CollectivePlan> collectives;
  std::vector<UlyssesPoint> ulysses;
  std::vector<double> optimizer_parameters;
  std::vector<std::string> skipped;  ///< what was left out, and why
};

/// Throws InputError for a model the GPU kernels cannot run (head_dim other than 64 or 128), memory_bytes <= 0 or
/// gpus < 1.
MeasurementPlan plan_measurements(const ModelConfig& model, const MeasurementOptions& options);

/// Message sizes 1 KiB, 2 KiB, ... 1 GiB (every other one when quick), as nccl-tests -b 1K -e 1G -f 2.
std::vector<double> collective_sizes(bool quick);
/// Collective group sizes on `gpus` GPUs: the powers of two from 2 up, plus `gpus` itself.
std::vector<int> collective_groups(int gpus);

/// The micro-batch compositions of `budget` tokens: one sequence; sequences of 512; one of budget/2 plus
/// sequences of 256; lengths drawn log-uniformly in [64, budget/2] (the last one cut to fill the budget exactly).
std::vector<std::vector<int>> layer_compositions(int budget, std::uint64_t seed);

/// How many copies of a working set a timed loop rotates through so that repetitions do not find it in the L2
/// cache: enough to exceed 3x the L2 size, between 1 and 8.
int rotation_sets(double bytes_per_set, double l2_bytes);

/// Device bytes estimates used to drop points that would not fit (deliberately generous).
double estimate_gemm_bytes(const ModelConfig& model, Tokens tokens);
double estimate_attention_bytes(const ModelConfig& model, Tokens tokens);
double estimate_layer_bytes(const ModelConfig& model, Tokens tokens, int layers);

}  // namespace lcsim
