#pragma once
// The one cost model. Every time and memory figure lcsim produces -- the closed-form estimate, the SimGrid
// simulator's activity sizes, each paper's own formula (see cost_views.hpp) -- comes from this class, which is
// built from a calibration profile.
#include <span>
#include <vector>

#include "policies/core/cluster.hpp"
#include "policies/core/model.hpp"
#include "policies/core/profile.hpp"
#include "policies/core/workload.hpp"

namespace lcsim {

enum class Recompute { None, Selective, Full };
std::string_view to_string(Recompute recompute);

/// How one replica (a DP group member: a pipeline of TP x CP GPUs per stage) runs the model.
struct ParallelScheme {
  int tp = 1;
  int pp = 1;
  int cp = 1;  ///< context / sequence parallel degree (Ulysses all-to-all)
  Recompute recompute = Recompute::Selective;
  /// Layers (per GPU's stage) with full gradient checkpointing on top of `recompute` (HBP's GC layers);
  /// ignored when recompute is Full, which checkpoints every layer.
  int checkpointed_layers = 0;

  int gpus() const { return tp * pp * cp; }
  friend bool operator==(const ParallelScheme&, const ParallelScheme&) = default;
};

/// One sequence's work on one GPU inside a micro-batch: the whole sequence (cp == 1) or a 1/cp shard of it,
/// whose attention runs over all `sequence_tokens` for 1/cp of the heads after the Ulysses all-to-all.
struct SequenceShare {
  Tokens sequence_tokens = 0;
  int cp = 1;
};

/// Collectives a piece of work issues, as the cost model times them: `count` calls of `bytes` each (nccl-tests
/// size) over `group_size` GPUs. The *_seconds functions below are collective_time() of their *_calls.
struct CollectiveCall {
  CollectiveOp op = CollectiveOp::AllToAll;
  int group_size = 1;
  double bytes = 0;
  double count = 1;
};

struct CostModelOptions {
  int zero_stage = 2;  ///< 0..3
};

class CostModel {
 public:
  CostModel(ModelConfig model, ClusterSpec cluster, Profile profile, CostModelOptions options = {});

  const ModelConfig& model() const { return model_; }
  const ClusterSpec& cluster() const { return cluster_; }
  const Profile& profile() const { return profile_; }
  const CostModelOptions& options() const { return options_; }

  // ---- FLOPs (forward pass, whole model width) ----
  /// QKV, O and gated-MLP GEMMs of one layer, per token.
  double gemm_flops_per_token() const;
  /// Causal attention of one layer for one sequence of s tokens: 4 s^2 heads head_dim / 2.
  double attention_flops(Tokens s) const;
  /// LM head GEMM per token.
  double head_flops_per_token() const;

  // ---- Time on one GPU, seconds ----
  /// Forward + backward (+ recomputation) of one layer over `work`, with TP degree `tp`.
  double layer_seconds(std::span<const SequenceShare> work, int tp, Recompute recompute, bool checkpointed) const;
  /// `layers` layers (the GPU's pipeline stage) over `work`, plus the LM head when `with_head`.
  double compute_seconds(std::span<const SequenceShare> work, const ParallelScheme& scheme, int layers,
                         bool with_head) const;
  /// Ulysses all-to-alls of one micro-batch: 4 per layer forward (Q, K, V, output) and 4 backward, for
  /// `tokens_on_gpu` sharded tokens held by this GPU, over `layers` layers.
  double cp_comm_seconds(Tokens tokens_on_gpu, int cp, int layers, LinkClass link) const;
  /// Megatron sequence-parallel TP collectives of one micro-batch (all-gather + reduce-scatter around attention
  /// and MLP, forward and backward) over `layers` layers.
  double tp_comm_seconds(Tokens tokens, int tp, int layers, LinkClass link) const;
  /// One pipeline activation (or gradient) transfer of `tokens` tokens between stages.
  double pp_transfer_seconds(Tokens tokens, int tp, LinkClass link) const;
  /// End of iteration gradient sync for the parameters one GPU holds: ZeRO-1/2/3 reduce-scatter + all-gather
  /// (stage 0: all-reduce) across `shard_degree` GPUs.
  double gradient_sync_seconds(const ParallelScheme& scheme, int shard_degree, LinkClass link) const;
  double optimizer_seconds(const ParallelScheme& scheme, int shard_degree) const;
  /// Re-sharding a GPU's parameters into `scheme` at a parallel-strategy switch (HotSPa).
  double switch_seconds(const ParallelScheme& scheme) const;

  // ---- The collectives behind the *_seconds functions above (what the simulator turns into flows) ----
  std::vector<CollectiveCall> cp_comm_calls(Tokens tokens_on_gpu, int cp, int layers) const;
  std::vector<CollectiveCall> tp_comm_calls(Tokens tokens, int tp, int layers) const;
  std::vector<CollectiveCall> pp_transfer_calls(Tokens tokens, int tp) const;
  /// In execution order: reduce-scatter then all-gather (the optimizer step runs between them), or one all-reduce.
  std::vector<CollectiveCall> gradient_sync_calls(const ParallelScheme& scheme, int shard_degree) const;
  /// Latency and transfer of `calls` on `link`, each summed over the calls.
  CollectiveTime collective_time(std::span<const CollectiveCall> calls, LinkClass link) const;
  /// The forward part of compute_seconds; the rest is backward (with any recomputation). Per layer: the forward
  /// GEMMs and attention plus the layer overhead in proportion to that share of the layer's work; the LM head's
  /// forward GEMM. Pipeline schedules (1F1B) need the split.
  double forward_seconds(std::span<const SequenceShare> work, const ParallelScheme& scheme, int layers,
                         bool with_head) const;
  /// Parameters held by one GPU of a replica with this scheme (before ZeRO sharding).
  double parameters_per_gpu(const ParallelScheme& scheme) const;

  // ---- Memory on one GPU, bytes ----
  /// Parameters, gradients and optimizer states under the ZeRO stage, sharded across `shard_degree` GPUs.
  double static_bytes(const ParallelScheme& scheme, int shard_degree) const;
  /// Activation bytes per token held on this GPU for `layers` layers (+ logits when `with_head`), with the
  /// scheme's recomputation; TP divides it (sequence parallelism).
  double activation_bytes_per_token(const ParallelScheme& scheme, int layers, bool with_head) const;
  /// Usable memory: GPU capacity minus the profile's reserve.
  double capacity_bytes() const;

 private:
  double activation_bytes_per_token_layer(const ActivationCoefficients& c) const;
  /// Forward GEMM and forward attention seconds of one layer over `work` (the terms of layer_seconds).
  struct LayerParts {
    double gemm = 0;
    double attention = 0;
  };
  LayerParts layer_parts(std::span<const SequenceShare> work, int tp) const;
  double head_forward_seconds(double tokens, int tp) const;

  ModelConfig model_;
  ClusterSpec cluster_;
  Profile profile_;
  CostModelOptions options_;
};

}  // namespace lcsim
