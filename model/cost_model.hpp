#pragma once
// The one cost model. Every time and memory figure lcsim produces -- the iteration program's steps (hence the
// estimate, the simulator and live replay), each paper's own formula (each policy's view of it, e.g.
// skrull/skrull_view.hpp) -- comes from this class, which is built from a calibration profile.
//
// Context parallelism: Ulysses' all-to-alls, ring attention's K,V exchanges step by step beside the blockwise
// attention (plain or zigzag), or all-gather CP's gathered K,V (cp_exchanges(), model/cp_attention.cpp); the
// derivation is in docs/model.md.
#include <cstdint>
#include <span>
#include <vector>

#include "model/cluster.hpp"
#include "model/finetuning.hpp"
#include "model/model.hpp"
#include "model/profile.hpp"
#include "model/workload.hpp"

namespace lcsim {

enum class Recompute { None, Selective, Full };
std::string_view to_string(Recompute recompute);

/// The number format of the transformer layers' GEMMs (training.precision). Attention, the LM head, the element-wise
/// kernels and communication stay BF16 (docs/model.md, "Precision").
enum class Precision : std::uint8_t { Bf16, Fp8 };
std::string_view to_string(Precision precision);

/// How the element-wise ops (norms, rotary, SwiGLU, GQA's K,V repeat) run (training.elementwise): fused kernels that
/// read and write each tensor once (torch.compile, Transformer Engine, Megatron's fused kernels), or eager PyTorch, one
/// kernel per op with FP32 intermediates where the model's code upcasts (docs/model.md, "Element-wise kernels").
enum class Elementwise : std::uint8_t { Fused, Eager };
std::string_view to_string(Elementwise elementwise);

/// How TP's sequence-parallel all-gathers and reduce-scatters meet the GEMMs they feed or drain (parallel.tp_overlap):
/// one after the other, or split into tp chunks that overlap the GEMM of the chunk before (PyTorch's async TP,
/// Transformer Engine's tp_comm_overlap; docs/model.md, "TP communication overlap").
enum class TpOverlap : std::uint8_t { None, Async };
std::string_view to_string(TpOverlap overlap);

/// How one replica (a DP group member: a pipeline of TP x CP GPUs per stage) runs the model.
struct ParallelScheme {
  int tp = 1;
  int pp = 1;
  int cp = 1;  ///< context / sequence parallel degree (how it runs attention: CostModelOptions::cp_attention)
  Recompute recompute = Recompute::Selective;
  /// Layers (per GPU's stage) with full gradient checkpointing on top of `recompute` (HBP's GC layers);
  /// ignored when recompute is Full, which checkpoints every layer.
  int checkpointed_layers = 0;
  /// Model chunks per GPU of an interleaved 1F1B pipeline (Megatron's virtual pipeline size): stage s holds the
  /// chunks s, s + pp, ..., of layers / (pp virtual_pp) layers each; 1 runs plain 1F1B.
  int virtual_pp = 1;

  int gpus() const { return tp * pp * cp; }
  /// The pipeline's virtual stages (model chunks in order): pp x virtual_pp.
  int virtual_stages() const { return pp * virtual_pp; }
  friend bool operator==(const ParallelScheme&, const ParallelScheme&) = default;
};

/// One sequence's work on one GPU inside a micro-batch: the whole sequence (cp == 1) or a 1/cp shard of it,
/// whose attention runs over all `sequence_tokens` for 1/cp of the heads after the Ulysses all-to-all, or as cp
/// blocks of s/cp queries against s/cp keys around the ring.
/// A chunk share (chunk_tokens > 0) is one GPU's piece of a per-sequence CP split (CpSplit::PerSequence, ring
/// attention): chunk_tokens query tokens starting chunk_offset tokens into the sequence, attending causally to the
/// sequence's first chunk_offset + chunk_tokens tokens; it computes those queries alone, with every head of the TP
/// slice, at the efficiency of a kernel of chunk_tokens queries.
struct SequenceShare {
  Tokens sequence_tokens = 0;
  int cp = 1;
  Tokens chunk_tokens = 0;
  Tokens chunk_offset = 0;
  bool chunk() const { return chunk_tokens > 0; }
  friend bool operator==(const SequenceShare&, const SequenceShare&) = default;
};

/// Query-key pairs a causal kernel computes for c queries starting p tokens into their sequence: c p + c (c + 1) / 2.
double causal_pairs(Tokens queries, Tokens offset);

/// Collectives a piece of work issues, as the cost model times them: `count` calls of `bytes` each (nccl-tests
/// size) over `group_size` GPUs. The *_seconds functions below are collective_time() of their *_calls.
struct CollectiveCall {
  CollectiveOp op = CollectiveOp::AllToAll;
  int group_size = 1;
  double bytes = 0;
  double count = 1;
};

/// Where a group's members sit, for a caller that knows only its size: contiguous from a domain's start (a cost
/// view's TP, CP and pipeline groups), or not known yet, priced at the placement the wiring helps least.
enum class GroupPlacement : std::uint8_t { Aligned, Scattered };

/// How a CP group runs the attention of its sharded sequences (docs/model.md, "Context parallelism").
enum class CpAttention : std::uint8_t {
  Ulysses,    ///< all-to-alls to head shards; every rank attends over all tokens for its heads
  Ring,       ///< plain ring: contiguous token shards, K,V blocks passed around; causally imbalanced
  Zigzag,     ///< head-tail ring: rank r holds chunks r and 2 cp - 1 - r of 2 cp; balanced
  AllGather,  ///< Llama 3's: K,V all-gathered, each rank's head-tail query chunks against them
};
std::string_view to_string(CpAttention mode);
/// Every value, in the order the scenario format lists them.
inline constexpr CpAttention kCpAttentionModes[] = {CpAttention::Ulysses, CpAttention::Ring, CpAttention::Zigzag,
                                                    CpAttention::AllGather};
/// Whether each CP rank keeps its own tokens with every head of its TP slice (ring, zigzag, all-gather), rather
/// than trading them for head shards (Ulysses).
bool shards_tokens(CpAttention mode);
/// Whether a rank's tokens are head-tail chunks (zigzag, all-gather), which a per-sequence CP split also deals.
bool head_tail_chunks(CpAttention mode);

/// One part of a micro-batch's CP communication on one GPU: the collectives it issues and the GPU's compute that
/// runs beside them (ring attention blocks). Its exposed time is max(0, collective_time(calls) - beside_s).
/// A ring exchange is the steps of one kind (the same transfer beside the same block kernel), `count` of them per
/// layer and pass: max(0, n c - n a) = n max(0, c - a), so each step is priced as its own call.
struct CpExchange {
  enum class Pass : std::uint8_t {
    Both,      ///< Ulysses: the forward and backward all-to-alls (a pipeline runs half in each pass)
    Forward,   ///< ring, all-gather: the forward passes' transfers
    Backward,  ///< ring, all-gather: the backward passes' transfers, or a checkpointed layer's recomputed forward
  };
  Pass pass = Pass::Both;
  std::vector<CollectiveCall> calls;
  double beside_s = 0;
  /// Bytes the GPU holds only while this exchange's layer runs its attention: all-gather CP's gathered K,V (and in
  /// backward the full-length dK,dV), one layer's at a time; 0 for the others.
  double buffer_bytes = 0;
};

/// Layers [first, first + count) of the model that one GPU runs: its pipeline stage (stage_span) or a block of one.
/// Partial freezing treats a layer by its index, so the cost model takes which layers, not how many; a bare count
/// means the first `count` layers (the whole model without a pipeline).
struct LayerSpan {
  int first = 0;
  int count = 0;
  LayerSpan() = default;
  LayerSpan(int layers) : count(layers) {}  // NOLINT(google-explicit-constructor): the first `layers` layers
  LayerSpan(int first_layer, int layers) : first(first_layer), count(layers) {}
  int end() const { return first + count; }
  friend bool operator==(const LayerSpan&, const LayerSpan&) = default;
};
/// Stage `stage` of a `pp`-stage pipeline: layers [stage L / pp, (stage + 1) L / pp) (pp divides L).
LayerSpan stage_span(const ModelConfig& model, int pp, int stage);
/// The layers of chunk `chunk` of pipeline stage `stage` under `scheme` (virtual stage chunk x pp + stage); the
/// stage's whole span when virtual_pp is 1.
LayerSpan chunk_span(const ModelConfig& model, const ParallelScheme& scheme, int stage, int chunk);

/// What a layer's backward computes under the fine-tuning method (docs/model.md, "Fine-tuning methods").
enum class LayerGrad : std::uint8_t {
  Full,         ///< trained: activation and weight gradients (with LoRA, the adapters' weights)
  Activations,  ///< frozen, something trained before it: the activation gradient only
  None,         ///< frozen, nothing trained before it: run under no_grad, forward only, no activations kept
};

/// A span's layers by LayerGrad, and of those with a backward the fully checkpointed ones: the stage's first
/// checkpointed_layers layers with a backward (all of them under Full recomputation).
struct LayerMix {
  int none = 0;
  int activations = 0;
  int full = 0;
  int checkpointed_activations = 0;
  int checkpointed_full = 0;
  int with_backward() const { return activations + full; }
  int checkpointed() const { return checkpointed_activations + checkpointed_full; }
};

struct CostModelOptions {
  int zero_stage = 2;  ///< 0..3
  CpAttention cp_attention = CpAttention::Ulysses;
  Finetuning finetuning{};  ///< what the run trains: every weight, LoRA adapters, or all but a frozen part
  Precision precision = Precision::Bf16;
  Elementwise elementwise = Elementwise::Fused;
  TpOverlap tp_overlap = TpOverlap::None;
  /// training.overlap_gradient_sync: the gradient sync's reduce runs bucket by bucket beside the last micro-batch's
  /// backward and the parameters' all-gather beside the first one's forward (gradient_sync_hidden_seconds).
  bool overlap_gradient_sync = false;
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
  /// The least HBM traffic of one layer's element-wise kernels per token (norms, rotary, residual adds, SwiGLU;
  /// each reads its inputs and writes its outputs once, bf16), forward and backward, with FP8's casts and
  /// transposes of the GEMM operands under training.precision "fp8"; the loss's over the logits.
  struct ElementwiseBytes {
    double forward = 0, backward = 0;
  };
  ElementwiseBytes layer_elementwise_bytes_per_token() const;
  ElementwiseBytes head_elementwise_bytes_per_token() const;
  /// `bytes` of one TP group's traffic, split over its `tp` GPUs, at the GPU's HBM bandwidth (datasheet).
  double hbm_seconds(double bytes, int tp) const;

  // ---- Which layers train ----
  /// What layer `layer` of the model computes in backward.
  LayerGrad layer_grad(int layer) const;
  /// The layers of `part` (inside the GPU's `stage`) by what they compute in backward; checkpointing counts from
  /// the stage's first layer with a backward.
  LayerMix layer_mix(const ParallelScheme& scheme, LayerSpan stage, LayerSpan part) const;
  LayerMix layer_mix(const ParallelScheme& scheme, LayerSpan stage) const { return layer_mix(scheme, stage, stage); }

  // ---- Time on one GPU, seconds ----
  /// Forward + backward (+ recomputation) of one layer over `work`, with TP degree `tp`; a LayerGrad::None layer
  /// runs its forward only (never recomputed), as long as the forward pass of a LayerGrad::Activations layer.
  double layer_seconds(std::span<const SequenceShare> work, int tp, Recompute recompute, bool checkpointed,
                       LayerGrad grad) const;
  /// layer_seconds without its overheads (the fixed cost, the element-wise share): the GEMM passes and attention
  /// kernels alone; `gemm_seconds` (optional) receives the GEMM passes' part, which the element-wise share scales.
  /// The calibration fits those overheads against it.
  double layer_work_seconds(std::span<const SequenceShare> work, int tp, Recompute recompute, bool checkpointed,
                            LayerGrad grad, double* gemm_seconds = nullptr) const;
  /// `layers` (the GPU's pipeline stage) over `work`, plus the LM head when `with_head`.
  double compute_seconds(std::span<const SequenceShare> work, const ParallelScheme& scheme, LayerSpan layers,
                         bool with_head) const;
  /// Exposed CP communication of one micro-batch on one GPU over `layers` layers (the scheme's checkpointed ones
  /// recompute): the sum over cp_exchanges() of max(0, time - beside_s). `dist` are the micro-batch's sharded
  /// shares, SequenceShare{tokens, scheme.cp}; `tokens_on_gpu` this GPU's part of them (ceil(sum / cp)).
  double cp_comm_seconds(std::span<const SequenceShare> dist, Tokens tokens_on_gpu, const ParallelScheme& scheme,
                         LayerSpan layers, LinkClass link) const;
  /// Megatron sequence-parallel TP collectives of one micro-batch (all-gather + reduce-scatter around attention
  /// and MLP, forward and backward; forward only for a LayerGrad::None layer) over `layers`: what async TP leaves
  /// exposed (tp_hidden_seconds).
  double tp_comm_seconds(Tokens tokens, int tp, LayerSpan layers, LinkClass link) const;
  /// One pipeline activation (or gradient) transfer of `tokens` tokens between stages.
  double pp_transfer_seconds(Tokens tokens, int tp, LinkClass link) const;
  /// End of iteration gradient sync for the parameters a GPU of pipeline stage `stage` trains: ZeRO-1/2/3
  /// reduce-scatter + all-gather (stage 0: all-reduce) across `shard_degree` GPUs.
  /// `placement`: where the shards sit when the caller cannot know (GroupPlacement::Scattered: one GPU per domain).
  double gradient_sync_seconds(const ParallelScheme& scheme, int shard_degree, LinkClass link, int stage,
                               GroupPlacement placement = GroupPlacement::Aligned) const;
  /// Of a gradient-sync collective of `sync_seconds` over `layers` layers' gradients (or parameters), what can run
  /// beside `beside_seconds` of compute when it is issued bucket by bucket as the layers finish: all but the last
  /// layer's share, and no more than the compute. Megatron's overlap_grad_reduce / overlap_param_gather, FSDP2's
  /// per-layer reduce-scatters and prefetched all-gathers, DeepSpeed's overlap_comm.
  static double gradient_sync_hidden_seconds(double sync_seconds, int layers, double beside_seconds);
  double optimizer_seconds(const ParallelScheme& scheme, int shard_degree, int stage) const;
  /// Re-sharding a GPU's parameters into `scheme` at a parallel-strategy switch (HotSPa).
  double switch_seconds(const ParallelScheme& scheme) const;

  // ---- The collectives behind the *_seconds functions above (what the simulator turns into flows) ----
  /// The CP communication behind cp_comm_seconds, for `layers` of which `checkpointed` (among those with a
  /// backward) recompute their forward: Ulysses, one Both exchange of ulysses_calls(); ring, the Forward exchange,
  /// then the Backward ones (recomputed forwards, backward steps of the layers with a backward), each only when it
  /// has steps. Empty when nothing is sharded or cp == 1.
  std::vector<CpExchange> cp_exchanges(std::span<const SequenceShare> dist, Tokens tokens_on_gpu,
                                       const ParallelScheme& scheme, LayerSpan layers, int checkpointed) const;
  /// Forward attention seconds, on one GPU of TP degree `tp`, of each step of one whole sequence sharded over
  /// share.cp ranks under a token-sharding mode (shards_tokens), as the slowest rank runs the step: the ring waits
  /// for it (docs/model.md). Ring and zigzag: cp steps, the first the ranks' own diagonal blocks; all-gather: the
  /// rank's two head-tail chunk calls against the gathered K,V. Their sum is the layer's attention forward.
  std::vector<double> cp_step_seconds(const SequenceShare& share, int tp) const;
  /// Exposed seconds of one exchange on `link`: max(0, collective time - beside_s).
  double exposed_seconds(const CpExchange& exchange, LinkClass link) const;
  /// The same over the GPUs of `group`, as the topology wires them.
  double exposed_seconds(const CpExchange& exchange, std::span<const int> group) const;
  /// Ulysses all-to-alls of one micro-batch: 4 per layer forward (Q, K, V, output) and 4 backward (none for a
  /// LayerGrad::None layer), for `tokens_on_gpu` sharded tokens held by this GPU, over `layers` (whatever
  /// cp_attention says).
  std::vector<CollectiveCall> ulysses_calls(Tokens tokens_on_gpu, int cp, LayerSpan layers) const;
  std::vector<CollectiveCall> tp_comm_calls(Tokens tokens, int tp, LayerSpan layers) const;
  /// Of `collective_s`, the time of tp_comm_calls(tokens, tp, layers) on its group, the seconds async TP hides
  /// behind the GEMMs: each collective is split into tp chunks, chunk k moving while the GEMM of chunk k - 1 runs,
  /// so all but one chunk of the shorter of a collective and its GEMM overlap: min(c, g) (1 - 1/tp) per collective,
  /// the all-gathers meeting the QKV and gate/up projections and the reduce-scatters the output and down ones
  /// (backward: their activation-gradient GEMMs, the same FLOPs). 0 under TpOverlap::None.
  double tp_hidden_seconds(Tokens tokens, int tp, LayerSpan layers, double collective_s) const;
  std::vector<CollectiveCall> pp_transfer_calls(Tokens tokens, int tp) const;
  /// In execution order: reduce-scatter then all-gather (the optimizer step runs between them), or one all-reduce;
  /// none when the stage trains nothing.
  std::vector<CollectiveCall> gradient_sync_calls(const ParallelScheme& scheme, int shard_degree, int stage) const;
  /// Latency and transfer of `calls` on `link`, each summed over the calls: the profile's fits moved to the
  /// cluster's links (its bandwidth and wire latency against the profile's network reference) and to the path the
  /// topology gives a group of that size whose members are not known (Topology::aligned_path): a cost view's.
  CollectiveTime collective_time(std::span<const CollectiveCall> calls, LinkClass link) const;
  /// The same for groups placed as `placement` says (Aligned: the overload above).
  CollectiveTime collective_time(std::span<const CollectiveCall> calls, LinkClass link, GroupPlacement placement) const;
  /// The same over the GPUs of `group` (Topology::collective_path): the iteration program's.
  CollectiveTime collective_time(std::span<const CollectiveCall> calls, std::span<const int> group) const;
  /// The forward part of compute_seconds; the rest is backward (with any recomputation). Per layer: the forward
  /// GEMMs and attention plus the layer overhead in proportion to that share of the layer's work; the LM head's
  /// forward GEMM. Pipeline schedules (1F1B) need the split.
  double forward_seconds(std::span<const SequenceShare> work, const ParallelScheme& scheme, LayerSpan layers,
                         bool with_head) const;
  /// Parameters held by one GPU of a replica with this scheme (before ZeRO sharding): its stage's layers and one
  /// vocabulary matrix (both without a pipeline unless tied), as the most loaded stage.
  double parameters_per_gpu(const ParallelScheme& scheme) const;
  /// Of those, the ones a GPU of pipeline stage `stage` trains (gradients, optimizer states, gradient sync): all of
  /// them; with LoRA the adapters of its layers; with partial freezing its trained layers and vocabulary matrix
  /// (stage 0 holds the embeddings, the last stage the LM head, a middle stage is charged as the more loaded end).
  double trained_parameters_per_gpu(const ParallelScheme& scheme, int stage) const;
  /// Parameters a GPU of `stage` holds frozen: bf16 weights without gradients or optimizer states.
  double frozen_parameters_per_gpu(const ParallelScheme& scheme, int stage) const;
  /// The whole model's trained parameters: ModelConfig::parameters() for full fine-tuning.
  double trained_parameters() const;
  /// Forward seconds of one layer's LoRA adapters over `tokens` tokens on one GPU: per target the larger of its
  /// FLOPs at the GEMM efficiency and its HBM traffic at the GPU's bandwidth (rank-r GEMMs are memory-bound).
  double lora_forward_seconds(double tokens, int tp) const;

  // ---- Memory on one GPU, bytes ----
  /// Parameters, gradients and optimizer states of a GPU of pipeline stage `stage` under the ZeRO stage, sharded
  /// across `shard_degree` GPUs; frozen parameters are bf16 weights only.
  double static_bytes(const ParallelScheme& scheme, int shard_degree, int stage) const;
  /// Activation bytes per token held on this GPU for `layers` (+ logits when `with_head`), with the scheme's
  /// recomputation; a LayerGrad::None layer keeps none. TP divides it (sequence parallelism).
  double activation_bytes_per_token(const ParallelScheme& scheme, LayerSpan layers, bool with_head) const;
  /// What one GPU keeps beyond activation_bytes_per_token for the Ulysses shards of a micro-batch (`dist`, as
  /// cp_exchanges takes them) over `layers`: the profile's sharded_attention bytes for every token of each sharded
  /// sequence and the rank's heads, in each layer that keeps its activations. 0 for the other modes.
  double sharded_attention_bytes(std::span<const SequenceShare> dist, const ParallelScheme& scheme,
                                 LayerSpan layers) const;
  /// The most a GPU holds at once for a micro-batch's CP buffers (CpExchange::buffer_bytes) over `layers`, with
  /// `tokens_on_gpu` sharded tokens: all-gather CP's gathered K,V and, when a layer has a backward, its full-length
  /// dK,dV; 0 for the other modes. Held one layer at a time, so once per GPU, not per micro-batch in flight.
  double cp_buffer_bytes(Tokens tokens_on_gpu, const ParallelScheme& scheme, LayerSpan layers) const;
  /// Usable memory: GPU capacity minus the profile's reserve.
  double capacity_bytes() const;

 private:
  double activation_bytes_per_token_layer(const ActivationCoefficients& c) const;
  /// Forward GEMM and forward attention seconds of one layer over `work` (the terms of layer_seconds).
  struct LayerParts {
    double gemm = 0;                  ///< the GEMMs' forward at the run's precision
    double gemm_bf16 = 0;             ///< the same at BF16: the rows the element-wise overhead grows with
    double attention = 0;             ///< forward kernels, their critical path included
    double attention_backward = 0;    ///< backward kernels, their critical path included
    double adapters = 0;              ///< LoRA adapters' forward (lora_forward_seconds)
    double elementwise = 0;           ///< the forward's element-wise traffic at the GPU's HBM bandwidth
    double elementwise_backward = 0;  ///< the backward's
  };
  LayerParts layer_parts(std::span<const SequenceShare> work, int tp) const;
  /// The layer GEMMs' rate over BF16's: the profile's fp8_gemm_speedup under FP8, else 1.
  double gemm_speedup() const;
  /// FLOP/s at efficiency 1: the profile's peak on the cluster's parts (ClusterSpec::tensor_peak_share).
  double tensor_peak_flops() const;
  /// The layer GEMMs' forward seconds over `tokens` tokens on one GPU of TP degree `tp`, at BF16's rate.
  double gemm_bf16_seconds(double tokens, int tp) const;
  /// Forward GEMM passes a layer's selective recomputation runs again (the profile's share; 0 when not selective or
  /// recomputed whole).
  double selective_gemm_share(Recompute recompute, bool recomputed) const;
  /// The heads one GPU runs for a sequence over cp Ulysses ranks (cp 1: whole) at TP degree tp.
  UlyssesHeads rank_heads(int cp, int tp) const;
  /// The part of a sequence's attention FLOPs one GPU runs: 1/tp whole, Ulysses the busiest rank's heads.
  double attention_share(int cp, int tp) const;
  /// The GEMM passes of one layer (and its LoRA adapters), with the forward again when `recomputed`.
  double layer_gemm_seconds(const LayerParts& parts, bool recomputed, LayerGrad grad) const;
  /// The forward pass of one layer (forward_seconds), its overheads shared as `grad`'s backward implies.
  double layer_forward_seconds(const LayerParts& parts, LayerGrad grad) const;
  /// Forward seconds of a q x k block of `pairs` query-key pairs on one GPU of TP degree `tp`: 4 head_dim FLOPs a
  /// pair and head of the TP slice, at the attention efficiency of min(q, k) tokens. Callers pass the kernel length
  /// they price at: a ring block's causal kernel of equal work, a chunk's queries (model/cp_attention.cpp).
  double block_attention_seconds(double pairs, double queries, double keys, int tp) const;
  /// The forward attention of `dist` in each of the cp ring steps: cp_step_seconds of the whole shares, plus each
  /// chunk share's attention spread evenly over the steps.
  std::vector<double> ring_step_totals(std::span<const SequenceShare> dist, int cp, int tp) const;
  std::vector<CpExchange> ring_exchanges(std::span<const SequenceShare> dist, Tokens tokens_on_gpu,
                                         const ParallelScheme& scheme, int layers, int backward,
                                         int checkpointed) const;
  std::vector<CpExchange> all_gather_exchanges(Tokens tokens_on_gpu, const ParallelScheme& scheme, int layers,
                                               int backward, int checkpointed) const;
  /// The K,V bytes of `tokens` tokens on one GPU of TP degree `tp`.
  double kv_tensor_bytes(double tokens, int tp) const;
  double head_forward_seconds(double tokens, int tp) const;
  /// GEMM passes of a layer's weights: forward, activation gradient, and weight gradient unless frozen (LoRA's
  /// base weights, a frozen layer).
  double base_gemm_passes(LayerGrad grad) const;
  /// GEMM passes of the LM head: 2 when frozen (LoRA, or partial freezing of the head), else 3.
  double head_gemm_passes() const;
  /// Layers of `span` run under no_grad (LayerGrad::None): the part of the span in the frozen prefix when the
  /// embeddings are frozen too.
  int no_grad_layers(LayerSpan span) const;
  CollectiveTime on_cluster_links(const CollectiveCall& call, const CollectivePath& path) const;
  /// A spread ring (bandwidth_scale above 1 on the network) at no more than NVLink's bus bandwidth.
  CollectiveTime spread_over_nvlink(CollectiveTime time, const CollectiveCall& call, const CollectivePath& path) const;

  ModelConfig model_;
  ClusterSpec cluster_;
  Profile profile_;
  CostModelOptions options_;
};

}  // namespace lcsim
