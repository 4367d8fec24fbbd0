#pragma once
// From the work list (program/iteration_program.hpp) to what a GPU runs (host logic; the GPU side only executes it).
//
// A compute step's ComputeWork becomes a ProxyShape: the layer proxy of the TP rank's slice of the model (heads,
// KV heads, ffn and vocabulary divided by tp, as Megatron shards them) over the step's sequences -- whole ones
// with every head of the slice, and Ulysses shards: ceil(S / cp) rows through the GEMMs and attention over all S
// tokens for ceil(heads / cp) heads (the busiest rank of the CP group when cp does not divide the heads).
//
// Rank-serial execution measures each distinct DeviceJob once (forward and backward timed apart, for pipelines)
// and puts its times back into every step that runs it; memory is the GPU's static bytes (reserved on the device
// while the job runs) plus the activation high-water mark of the micro-batch it holds at once: one job, or for a
// Skrull micro-batch split into local and distributed compute, a probe run of both together.
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "model/model.hpp"
#include "program/iteration_program.hpp"

namespace lcsim {

struct ProxyShape {
  ModelConfig shard;         ///< the layer slice one TP rank computes (vocab: its slice of the LM head)
  std::vector<int> local;    ///< whole sequences on this GPU: their tokens
  std::vector<int> sharded;  ///< Ulysses-sharded sequences: their full lengths
  int cp = 1;                ///< CP degree of the sharded ones
  int sharded_heads = 0;     ///< attention heads this GPU runs for the sharded sequences
  int sharded_kv_heads = 0;
  int layers = 0;
  int checkpointed_layers = 0;
  Recompute recompute = Recompute::Selective;
  bool lm_head = false;
  /// Rows through the GEMMs: the local tokens plus ceil(S / cp) per sharded sequence.
  std::int64_t rows() const;
};

/// Throws PlanningError for work the layer proxy cannot run: tp not dividing the heads or ffn, shares of
/// different CP degrees, a sequence longer than an int.
ProxyShape proxy_shape(const program::ComputeWork& work, const ModelConfig& model);

/// One distinct thing to run on a GPU.
struct DeviceJob {
  enum class Kind : std::uint8_t { Layers, Optimizer };
  Kind kind = Kind::Layers;
  ProxyShape shape;         ///< Layers
  double parameters = 0;    ///< Optimizer: parameters updated
  double static_bytes = 0;  ///< the GPU's static memory while it runs
  bool timed = false;       ///< false: only its memory is needed (a probe)
};

/// Which measured time a step takes.
struct StepJob {
  enum class Part : std::uint8_t {
    None,      ///< not a compute step
    Whole,     ///< forward + backward (or the optimizer step)
    Forward,   ///< the forward part of the job
    Backward,  ///< the backward part
    Model,     ///< not run on the GPU: the cost model's seconds stay (strategy switches)
  };
  int job = -1;
  Part part = Part::None;
};

/// One program's steps mapped onto jobs.
struct ProgramJobs {
  std::vector<std::vector<StepJob>> steps;  ///< per GPU, per step
  std::vector<std::vector<int>> memory;     ///< per GPU: the jobs whose activation peaks it holds (one at a time)
  std::vector<double> static_bytes;         ///< per GPU: the largest static bytes of its steps
};

/// How the programs' steps use one job: the cost model's seconds for each part a step runs (NaN when no step runs
/// that part), how many steps run it, and the tags (policies) of the programs they belong to. Measured beside the
/// job's times, these say which micro-batch shapes the cost model misprices (the live results' "jobs").
struct JobUse {
  double predicted_whole_s = std::numeric_limits<double>::quiet_NaN();
  double predicted_forward_s = std::numeric_limits<double>::quiet_NaN();
  double predicted_backward_s = std::numeric_limits<double>::quiet_NaN();
  /// Largest relative difference between two steps' seconds for the same part: 0 unless the cost model charges
  /// something the job's shape does not describe.
  double predicted_spread = 0;
  int steps = 0;
  std::vector<int> tags;  ///< ascending, each once
};

/// The distinct jobs of every program translated into it, in first-use order.
class JobTable {
 public:
  /// Maps `program` onto jobs, adding the new ones. `model` is the scenario's (possibly --layers-scaled) model;
  /// `tag` names the program's owner (a policy index) in uses().
  ProgramJobs add(const program::IterationProgram& program, const ModelConfig& model, int tag = 0);
  const std::vector<DeviceJob>& jobs() const { return jobs_; }
  /// Parallel to jobs(): what the timed steps that run each job predicted (memory probes: steps 0).
  const std::vector<JobUse>& uses() const { return uses_; }

 private:
  int intern(DeviceJob job);
  void note_use(const StepJob& mapped, double seconds, int tag);
  std::vector<DeviceJob> jobs_;
  std::vector<JobUse> uses_;
  std::map<std::string, int> index_;  ///< a key equal for equal jobs (timed aside) -> its position
};

/// One NCCL call of a collective the cost model sizes at `bytes` (nccl-tests size: CollectiveCall::bytes) over
/// `ranks` GPUs, in BF16 elements: the count argument and the send and receive buffers (nccl-tests conventions, as
/// calibrate/measure/nccl_bench.cpp measures them). count 0: fewer elements than ranks, nothing to move.
struct NcclArgs {
  std::size_t count = 0;
  std::size_t send_bytes = 0;
  std::size_t recv_bytes = 0;
};
NcclArgs nccl_args(CollectiveOp op, double bytes, int ranks);

}  // namespace lcsim
