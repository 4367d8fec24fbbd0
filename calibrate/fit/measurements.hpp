#pragma once
// The raw measurements of one `lcsim-gpu calibrate` run, written next to the profile ("lcsim-measurements/1" JSON)
// so the fit can be redone, audited or refitted offline (`lcsim-gpu fit`) without the GPU. Reading is strict:
// unknown keys are errors and every error names the file and the JSON path.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/fit/fit.hpp"
#include "kernels/device_records.hpp"
#include "model/cost_model.hpp"

namespace lcsim {

/// The layer's forward GEMMs (QKV, O, gate+up, down) at `tokens` rows, and their backward (dgrad + wgrad). A
/// published point is one GEMM of another shape: `tokens` x `n` x `k` (2 tokens n k FLOPs), backward unknown.
struct GemmMeasurement {
  Tokens tokens = 0;
  KernelTiming forward;
  std::optional<KernelTiming> backward;
  double n = 0, k = 0;  ///< 0: the model's layer GEMMs
};

/// `sequences` packed sequences of `seq_len` tokens through the model's attention shape, or, for a published
/// point, through `q_hidden` = heads x head_dim of another shape.
struct AttentionMeasurement {
  int seq_len = 0;
  int sequences = 0;
  KernelTiming forward;
  std::optional<KernelTiming> backward;
  int q_hidden = 0;  ///< 0: the model's
};

/// One layer proxy forward + backward over a micro-batch (event time: the layer as a framework runs it).
struct LayerMeasurement {
  std::vector<int> seqlens;
  Recompute recompute = Recompute::None;
  double seconds = 0;
};

/// Arena high-water mark of `layers[i]` stacked layer proxies run forward and backward over `tokens` tokens.
struct MemoryMeasurement {
  std::string model;
  int hidden = 0, kv_hidden = 0, ffn = 0;
  int tokens = 0;
  Recompute recompute = Recompute::None;
  std::vector<int> layers;
  std::vector<double> peak_bytes;
};

struct CollectiveMeasurement {
  CollectiveOp op = CollectiveOp::AllReduce;
  int group_size = 2;
  std::vector<CollectiveSample> samples;  ///< nccl-tests size and median time
  LinkClass link = LinkClass::NvLink;     ///< infiniband: the group spans nodes
};

/// The four all-to-alls of one layer forward under Ulysses (Q, K, V in, the output back) for a CP group.
struct UlyssesMeasurement {
  int cp = 2;
  int tokens_per_gpu = 0;
  double seconds = 0;
};

/// One AdamW step over `parameters` parameters.
struct OptimizerMeasurement {
  double parameters = 0;
  double seconds = 0;
};

struct Measurements {
  /// Empty for lcsim-gpu's own runs; else where the figures were published (they are not lcsim's measurements,
  /// and the fitted profile says so: uncalibrated, source "published measurements").
  std::string published;
  DeviceDescription device;
  std::string model;
  std::string timing;  ///< "cupti", or "cuda-events (CUPTI unavailable: why)"
  int warmup = 0;
  int repetitions = 0;
  std::vector<GemmMeasurement> gemm;
  std::vector<AttentionMeasurement> attention;
  std::vector<LayerMeasurement> layers;
  std::vector<MemoryMeasurement> memory;
  std::vector<CollectiveMeasurement> collectives;
  std::vector<UlyssesMeasurement> ulysses;
  std::vector<OptimizerMeasurement> optimizer;
  std::vector<std::string> warnings;  ///< timing cross-check disagreements, points skipped and why
};

inline constexpr const char* kMeasurementsFormat = "lcsim-measurements/1";

/// Keys in the documented order (ordered_json).
nlohmann::ordered_json measurements_to_json(const Measurements& m);
Measurements measurements_from_json(const nlohmann::json& document, const std::string& file);
Measurements load_measurements(const std::string& file);
void save_measurements(const Measurements& m, const std::string& file);

/// "none" / "selective" / "full"; throws InputError naming `what` otherwise.
Recompute parse_recompute(const std::string& name, const std::string& what);
/// "all_gather", ...; throws InputError naming `what` otherwise.
CollectiveOp parse_collective_op(const std::string& name, const std::string& what);

}  // namespace lcsim
