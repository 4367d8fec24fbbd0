#pragma once
// A PyTorch profiler (Kineto) trace, read into what a profile fit needs: GPU kernels with their stream and the
// CPU op that launched them, CPU ops with their recorded input shapes, the c10d/NCCL metadata of collectives and
// the ProfilerStep#N step boundaries. `.json` and `.json.gz`. Reading is strict: a file that is not JSON (e.g.
// truncated), has no traceEvents array, or has no complete events is an InputError naming the file. Format
// notes and the keys read: docs/calibration.md ("Profiles from PyTorch profiler traces").
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lcsim {

/// Largest decompressed trace: traces of a few steps of a large job run to a few hundred MB.
inline constexpr std::uintmax_t kMaxKinetoTraceBytes = std::uintmax_t{1} << 30;

/// What recent PyTorch records for a c10d collective ("record_param_comms" CPU op, and NCCL kernels' args).
struct KinetoCollective {
  std::string name;  ///< "Collective name": allreduce, allgather, reduce_scatter, all_to_all, send, ...
  std::optional<std::uint64_t> in_nelems, out_nelems;  ///< "In msg nelems", "Out msg nelems"
  int group_size = 0;                                  ///< "Group size"; 0 when absent
  std::string dtype;                                   ///< "dtype": Float, BFloat16, ...
  std::string group_name;                              ///< "Process Group Name"
  std::vector<int> ranks;                              ///< "Process Group Ranks" (global ranks), empty when absent
};

struct KinetoCpuOp {
  std::string name;
  std::uint64_t tid = 0;
  double ts_us = 0, dur_us = 0;
  std::optional<std::uint64_t> external_id;
  std::vector<std::vector<std::int64_t>> input_dims;  ///< "Input Dims" (record_shapes=True); [] for a non-tensor
  std::vector<std::string> input_types;               ///< "Input type"
  std::vector<std::string> concrete_inputs;           ///< "Concrete Inputs" (scalars as text)
  std::optional<KinetoCollective> collective;
  /// Index in KinetoTrace::ops of the innermost op on the same thread whose span contains this op's start; -1
  /// for a top-level op. A kernel's External id names the innermost op that launched it (for SDPA the backend's
  /// inner op, e.g. aten::_cudnn_attention_forward under aten::_scaled_dot_product_cudnn_attention): the fits
  /// walk up to the op that carries the shapes they read.
  int parent = -1;
};

struct KinetoKernel {
  std::string name;
  std::string family;  ///< filled by classify_kernels (kineto_kernels.hpp); "" until then
  std::int64_t device = 0, stream = 0;
  double ts_us = 0, dur_us = 0;
  std::optional<std::uint64_t> correlation;    ///< args.correlation, else the ac2g flow that ends on it
  std::optional<std::uint64_t> external_id;    ///< args["External id"]
  std::optional<KinetoCollective> collective;  ///< metadata on the kernel itself (recent PyTorch)
  int op = -1;    ///< index in KinetoTrace::ops of the CPU op that launched it, -1 when not correlated
  int step = -1;  ///< index in KinetoTrace::steps whose CPU window contains the launch, -1 outside every step
};

struct KinetoStep {
  std::int64_t number = 0;  ///< N of ProfilerStep#N
  double ts_us = 0, dur_us = 0;
};

struct KinetoTrace {
  std::string file;
  std::optional<int> rank, world_size;        ///< distributedInfo
  std::string device_name;                    ///< deviceProperties[0].name, "" when absent
  std::optional<std::uint64_t> base_time_ns;  ///< baseTimeNanoseconds (beyond 2^53: read as integer)
  std::uint64_t step_thread = 0;              ///< thread that records ProfilerStep#N (the training loop)
  std::vector<KinetoStep> steps;              ///< in time order
  std::vector<KinetoCpuOp> ops;
  std::vector<KinetoKernel> kernels;  ///< in time order
  int runtime_launches = 0;           ///< cuda_runtime events with a correlation id
};

/// Parses a trace document; `file` names it in every error.
KinetoTrace kineto_trace_from_json(const nlohmann::json& document, const std::string& file);
/// Reads `file` (.json, or gzip-compressed: detected by its magic bytes, whatever the name).
KinetoTrace load_kineto_trace(const std::string& file);
/// The decompressed text of a gzip file or string; InputError naming `file` when it is corrupt or truncated.
std::string gunzip(const std::string& compressed, const std::string& file, std::uintmax_t max_bytes);

}  // namespace lcsim
