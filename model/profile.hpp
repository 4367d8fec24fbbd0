#pragma once
// The calibration profile: measured (or publicly derived) primitives that the cost model is built from.
// Format documented in calibrate/PROFILE.md; `format_version` 1.
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// The declarations only: nearly every file includes this header, and the full JSON header is slow to parse.
#include <nlohmann/json_fwd.hpp>

#include "model/cluster.hpp"

namespace lcsim {

/// y(x) by linear interpolation in log(x) between points; outside the points the end value holds (a curve says
/// nothing beyond its measurements, so efficiency stays at the last measured level).
struct Curve {
  std::vector<double> x;
  std::vector<double> y;
  std::optional<double> fit_mape;  ///< held-out mean absolute percentage error; empty when not measured
  double at(double xq) const;
};

// CollectiveOp: model/topology.hpp (a topology prices its collectives by kind).
std::string_view to_string(CollectiveOp op);
/// nccl-tests bus-bandwidth factor: busbw = algbw * factor(n).
double bus_factor(CollectiveOp op, int group_size);

/// One collective's time, split: the fixed latency and the size-proportional transfer. The simulator keeps them
/// apart (a latency does not occupy links; a transfer does).
/// The ranges of the physical quantities a profile or a scenario's cluster gives, checked when they load: wide enough
/// for any real hardware, narrow enough that every time derived from them (bytes / bandwidth + latency, FLOPs /
/// (peak x efficiency)) stays finite, since SimGrid aborts on an infinite duration.
struct PhysicalRange {
  double low;
  double high;
};
inline constexpr PhysicalRange kBandwidthGBpsRange{1e-3, 1e6};  ///< 1 MB/s to 1 PB/s
inline constexpr PhysicalRange kLatencyUsRange{0, 1e6};         ///< up to 1 s
inline constexpr PhysicalRange kPeakTflopsRange{1e-3, 1e6};
inline constexpr PhysicalRange kEfficiencyRange{1e-6, 1};
inline constexpr PhysicalRange kOverheadUsRange{0, 1e6};  ///< per layer, per Mparam
inline constexpr PhysicalRange kFactorRange{0, 1e3};      ///< attention_backward_ratio, gemm_work_overhead
inline constexpr PhysicalRange kBackwardRatioRange{1e-3, 1e3};
inline constexpr PhysicalRange kFp8SpeedupRange{1, 4};
inline constexpr PhysicalRange kShareRange{0, 1};           ///< FP8 over BF16 GEMM rate (the peaks differ by 2x)
inline constexpr PhysicalRange kMemoryGiBRange{1, 1e6};     ///< a cluster's GPU memory override
inline constexpr PhysicalRange kTileTokensRange{1, 65536};  ///< attention_blocks.tile_tokens
inline constexpr PhysicalRange kSmCountRange{1, 1e5};       ///< attention_blocks.sm_count
inline constexpr PhysicalRange kBlocksPerSmRange{1, 64};    ///< attention_blocks.*_blocks_per_sm
inline constexpr PhysicalRange kBytesPerUnitRange{0, 1e9};  ///< activation, logits and static bytes
inline constexpr PhysicalRange kReserveGiBRange{0, 1e6};
inline constexpr PhysicalRange kGradientBytesRange{1, 8};      ///< a gradient element: fp8 to fp64
inline constexpr PhysicalRange kCurveTokensRange{1e-3, 1e15};  ///< a curve's x (tokens, sequence tokens)
inline constexpr PhysicalRange kSegmentBytesRange{1, 1e18};    ///< a collective segment's max_bytes

struct CollectiveTime {
  double latency_s = 0;
  double transfer_s = 0;
  double seconds() const { return latency_s + transfer_s; }
};

/// latency + size * bus_factor / bus bandwidth, for sizes up to max_bytes (nccl-tests "size").
struct CollectiveSegment {
  double max_bytes = 0;  ///< upper end of the segment; the last segment is open-ended
  double latency_us = 0;
  double bus_GBps = 0;
};

struct CollectiveFit {
  CollectiveOp op = CollectiveOp::AllReduce;
  LinkClass link = LinkClass::NvLink;
  int group_size = 2;
  std::vector<CollectiveSegment> segments;
  std::optional<double> fit_mape;
  bool measured = false;  ///< false: prior value kept (e.g. one-GPU calibration, or derived from public figures)
  double seconds(double bytes) const { return time(bytes).seconds(); }
  CollectiveTime time(double bytes) const { return time(bytes, group_size); }
  /// The fit's segments, with the bus factor of `members` GPUs (bus bandwidth is group-size normalised).
  CollectiveTime time(double bytes, int members) const;
};
/// A fit of one segment for every size: `latency_us` plus the size term at `bus_GBps` (priors, test profiles).
CollectiveFit single_segment(CollectiveOp op, LinkClass link, int group_size, double latency_us, double bus_GBps);

/// How the attention kernels split a call into thread blocks, and how many of them an SM holds: a forward block per
/// query tile and head walks its keys (tile i: i + 1 tile pairs); a backward block per key tile walks every later
/// query tile of `backward_walk` heads (its KV head's group for lcsim's kernels, one head for FlashAttention-2's).
/// Blocks are launched longest first, round-robin over the SMs, up to blocks_per_sm on each (their registers), so
/// the SM that holds the longest blocks can outlast the call's work over the whole GPU (cost_model.cpp).
struct AttentionBlocks {
  enum class BackwardWalk : std::uint8_t { KvGroup, Head };
  int tile_tokens = 0;  ///< query (and key) rows of a block; 0: no block model
  int sm_count = 0;
  int forward_blocks_per_sm = 0;
  int backward_blocks_per_sm = 0;
  BackwardWalk backward_walk = BackwardWalk::KvGroup;
  friend bool operator==(const AttentionBlocks&, const AttentionBlocks&) = default;
};

/// An attention kernel a profile can also price (compute.attention_implementations; training.attention selects one
/// in place of the profile's own attention_efficiency and attention_backward_ratio): its causal forward efficiency
/// by sequence length, its backward over forward time, and where the figures come from.
struct AttentionImplementation {
  Curve efficiency;
  double backward_ratio = 2.5;
  std::string source;
};

struct ComputeProfile {
  double peak_tflops = 0;                 ///< dense BF16 peak the efficiencies refer to
  Curve gemm_efficiency;                  ///< achieved/peak vs tokens in the GEMM (micro-batch tokens on one GPU)
  Curve attention_efficiency;             ///< achieved/peak vs sequence length, causal varlen attention forward
  double attention_backward_ratio = 2.5;  ///< backward FLOPs / forward FLOPs (FlashAttention convention)
  /// The attention kernels' blocks (0 tile tokens: not modelled): a call lasts at least as long as its busiest SM.
  AttentionBlocks attention_blocks;
  double layer_overhead_us = 0;   ///< fixed cost per layer per micro-batch, forward + backward
  double gemm_work_overhead = 0;  ///< element-wise time per layer as a share of its GEMM passes (cost_model.cpp)
  std::optional<double> layer_overhead_fit_mape;
  double optimizer_us_per_mparam = 0;  ///< optimizer step per million parameters held by the GPU
  /// A framework's CPU floor (0: none; docs/calibration.md): a trained layer of a micro-batch costs at least
  /// layer_issue_us, the CPU time to issue its forward and backward kernels, and the optimizer step at least
  /// step_issue_us, the rest of a step's issuing (embedding, LM head and loss, optimizer, zero_grad).
  double layer_issue_us = 0;
  double step_issue_us = 0;
  double hot_switch_us_per_mparam = 0;  ///< re-sharding cost of a parallel-strategy switch (HotSPa)
  /// FP8 GEMMs (training.precision "fp8"): their rate over the BF16 rate at the same shape, as the stack's FP8
  /// path achieves it (unset: the profile prices no FP8 GEMM; docs/model.md, "Precision").
  std::optional<double> fp8_gemm_speedup;
  /// The share of a layer's forward GEMM FLOPs that selective recomputation runs again in backward: 0 for
  /// Megatron's (the attention core only), about 0.37 for PyTorch's per-op policy that saves every other matmul.
  double selective_recompute_gemm_share = 0;
  /// Other attention kernels by name (FlashAttention-2 and -3, cuDNN's fused attention ...); usually empty.
  std::map<std::string, AttentionImplementation> attention_implementations;
};

/// bytes = per_hidden*hidden + per_kv_hidden*kv_hidden + per_ffn*ffn (per token, per layer)
struct ActivationCoefficients {
  double per_hidden = 0;
  double per_kv_hidden = 0;
  double per_ffn = 0;
};

/// What a Ulysses rank keeps, per layer with activations, for every token of the sequences it holds a shard of,
/// beyond what a whole-sequence layer keeps (the activation coefficients): the implementation's post-all-to-all
/// copies, bytes per element of the rank's query heads (x head_dim), of its KV heads (x head_dim) and per query
/// head. 0 everywhere: the exchange keeps nothing of its own.
struct ShardedAttentionBytes {
  double per_q_element = 0;
  double per_kv_element = 0;
  double per_head = 0;
  bool any() const { return per_q_element > 0 || per_kv_element > 0 || per_head > 0; }
};

struct MemoryProfile {
  ActivationCoefficients activations_none;       ///< nothing recomputed
  ActivationCoefficients activations_selective;  ///< selective recomputation
  ActivationCoefficients activations_full;       ///< full-layer checkpointing: only the layer input stays
  double logits_bytes_per_token_per_vocab = 0;   ///< LM head logits and their gradient at peak
  ShardedAttentionBytes sharded_attention;       ///< optional in files: absent, all 0
  /// Static bytes per parameter by ZeRO stage (index 0..3): replicated on every GPU of the model shard, and
  /// divided across the sharding group.
  std::array<double, 4> replicated_bytes_per_param{};
  std::array<double, 4> sharded_bytes_per_param{};
  /// Bytes of one main-gradient element as the gradient sync reduces it: 2 (bf16) or 4 (fp32: Megatron's main
  /// gradients under BF16, torchtitan's reduce_dtype). The static bytes above hold the same gradients; the two agree.
  double gradient_reduce_bytes = 2;
  double reserve_bytes = 0;  ///< CUDA context, NCCL buffers, allocator fragmentation
  std::optional<double> fit_mape;
};

/// A parameter set from an end-to-end or published figure that `lcsim validate` also predicts: that catalogue
/// entry is then fitted, not held out, whenever it is predicted with this profile.
struct FittedOn {
  std::string entry;      ///< catalogue entry id
  std::string parameter;  ///< what was set from it, e.g. "collectives.nvlink.all_gather"
  friend bool operator==(const FittedOn&, const FittedOn&) = default;
};

/// FittedOn::parameter of a profile's collectives of one op on one link: "collectives.nvlink.all_gather".
std::string collective_parameter(CollectiveOp op, LinkClass link);

struct Provenance {
  bool calibrated = false;  ///< false: derived from public figures, not measured
  std::string source;       ///< "derived from public figures" or "lcsim-gpu calibrate"
  std::string device;
  std::string date;
  std::string tool_version;
  std::string driver;
  std::string cuda;
  std::string nccl;
  std::string model;  ///< model the memory/compute fits were measured with, if any
  std::string notes;
  /// A stack preset's framework class ("megatron", "pytorch-fsdp", "deepspeed"); empty for a profile of no stack.
  std::string stack;
  std::vector<FittedOn> fitted_on;
};

/// The network a profile's collectives were measured (or derived) on, per direction. A collective's efficiency
/// is its bus bandwidth over this link's; the cost model applies it to the scenario's own links, and moves its
/// latency by the difference in wire latency (calibrate/PROFILE.md).
struct NetworkReference {
  double nvlink_GBps = 0;
  double nvlink_latency_us = 0;
  double ib_GBps = 0;  ///< per NIC (one per GPU)
  double ib_latency_us = 0;
};

struct Profile {
  int format_version = 2;
  std::string gpu;  ///< GPU kind name
  Provenance provenance;
  /// Always present in profile files; empty only in profiles built in code (tests), whose collective fits are
  /// then taken as the times on any cluster.
  std::optional<NetworkReference> network;
  ComputeProfile compute;
  MemoryProfile memory;
  std::vector<CollectiveFit> collectives;
  std::string file;  ///< the file it was read from, for messages; "" for profiles built in code

  /// Seconds for one collective of `bytes` (nccl-tests size) over `group_size` GPUs on `link`. Uses the entry
  /// of that op and link with the nearest group size (log scale), since busbw already normalises group size.
  /// Throws InputError when the profile has no entry for op and link.
  double collective_seconds(CollectiveOp op, LinkClass link, int group_size, double bytes) const {
    return collective_time(op, link, group_size, bytes).seconds();
  }
  /// collective_seconds split into latency and transfer.
  CollectiveTime collective_time(CollectiveOp op, LinkClass link, int group_size, double bytes) const;
  /// "uncalibrated (derived from public figures)" or "calibrated on <device>, <date>".
  std::string label() const;
};

Profile profile_from_json(const nlohmann::json& document, const std::string& file);
nlohmann::json profile_to_json(const Profile& profile);
Profile load_profile(const std::string& file);
void save_profile(const Profile& profile, const std::string& file);

/// `profile` pricing attention as its implementation `name` prices it (its efficiency curve and backward ratio);
/// an empty name leaves it as it is. InputError naming `where` when the profile has no such implementation.
Profile with_attention(Profile profile, const std::string& name, const std::string& where);

}  // namespace lcsim
