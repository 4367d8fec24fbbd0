// Default profiles from public figures. Each constant says where it comes from; calibrate/PROFILE.md has the
// long form. Nothing here is tuned to a paper's result.
#include "calibrate/fit/default_profile.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>

#include "base/errors.hpp"

namespace lcsim {
namespace {

// ---- Skrull Table 5: H100, sizes in MB (read as MiB, nccl-tests sizes are powers of two), latencies in us ----
constexpr std::array<double, 9> kTableMiB = {2, 4, 8, 16, 32, 64, 128, 256, 512};
constexpr std::array<double, 9> kTableAllGatherUs = {53.29, 72.52, 97.86, 199.3, 286.2, 488.6, 910.6, 1758.4, 3416.4};
constexpr std::array<double, 9> kTableAllToAllUs = {80.62, 78.63, 110.9, 163.2, 277.5, 502.4, 939.2, 1803.9, 3411.2};
constexpr std::array<double, 9> kTableReduceScatterUs = {59.48, 79.26, 104.7,  177.4, 269.5,
                                                         458.8, 864.3, 1663.9, 3239.5};
constexpr std::array<double, 9> kTableAllReduceUs = {84.65, 113.3, 168.4, 312.2, 479.2, 859.7, 1642.9, 3197.9, 6181.2};
constexpr int kTableGroupSize = 8;        // assumed: one node of 8 GPUs (Skrull's CP groups are 8 GPUs)
constexpr double kTableNvlinkGBps = 450;  // H100 NVLink 4 per direction: the table's hardware

// ---- NVLink beyond the table ----
constexpr std::array<int, 3> kNvlinkGroups = {2, 4, 8};
constexpr double kSendRecvNvlinkShare = 0.8;  // point-to-point reaches ~80% of the NVLink per-direction rate
constexpr double kSendRecvNvlinkLatencyUs = 5;

// ---- InfiniBand: one NIC per GPU, fat-tree ----
struct NetworkFigures {
  const char* gpu;
  const char* nic;
  double bus_GBps;   // nccl-tests busbw one NIC sustains
  double link_GBps;  // the NIC's line rate, per direction
};
// NDR 400 Gb/s = 50 GB/s line rate, 46-48 GB/s busbw measured; A800 and A100 (PCIe Gen4 host interface, ~25 GB/s)
// are deployed with HDR 200 Gb/s NICs, ~24 GB/s busbw.
constexpr std::array<NetworkFigures, 4> kNetworks = {{
    {"H100-SXM", "NDR 400 Gb/s", 47.0, 50.0},
    {"H200", "NDR 400 Gb/s", 47.0, 50.0},
    {"A800", "HDR 200 Gb/s", 24.0, 25.0},
    {"A100-40GB", "HDR 200 Gb/s", 24.0, 25.0},
}};
constexpr std::array<int, 7> kIbGroups = {16, 32, 64, 128, 256, 512, 1024};
constexpr double kIbBaseLatencyUs = 20;         // at 8 GPUs' worth of ranks
constexpr double kIbLatencyPerDoublingUs = 10;  // tree/ring depth grows with log2(group)
constexpr double kIbSendRecvLatencyUs = 8;
// Wire latencies of the network the figures describe (the scenarios' defaults): the collective latencies above
// include them, so a cluster with other wires moves them by the difference.
constexpr double kNvlinkWireLatencyUs = 2;
constexpr double kIbWireLatencyUs = 5;

// ---- Compute ----
// GEMM efficiency vs tokens: ~0.2 at 128 tokens rising to 0.75 at >= 8K (an 8192^3 BF16 GEMM measured ~798 of
// 989 TFLOP/s = 0.81 on the lent H100; model-shaped GEMMs are narrower).
constexpr std::array<double, 7> kGemmTokens = {128, 256, 512, 1024, 2048, 4096, 8192};
constexpr std::array<double, 7> kGemmEfficiency = {0.20, 0.30, 0.42, 0.55, 0.65, 0.72, 0.75};
// Beyond 8K tokens on the GH100 parts (H100 SXM, H200: one die, one 700 W limit): lcsim's layer GEMMs at 16K and 32K
// tokens ran at 0.90 and 0.91 of their 8K rate in both H200 calibrations (h200-llama3.1-8b.json, h200-qwen2.5-7b.json;
// docs/model.md, "GEMMs beyond 8K tokens"). The Ampere parts keep 0.75: nothing measured them there.
constexpr std::array<double, 2> kHopperLongTokens = {16384, 32768};
constexpr std::array<double, 2> kHopperLongShareOf8K = {0.90, 0.91};
// Causal attention forward efficiency vs sequence length: ~0.15 at 256 to 0.55 at >= 16K (between FlashAttention-2,
// up to ~335 TFLOP/s on H100, and FlashAttention-3, up to ~740 TFLOP/s forward).
constexpr std::array<double, 7> kAttentionTokens = {256, 512, 1024, 2048, 4096, 8192, 16384};
constexpr std::array<double, 7> kAttentionEfficiency = {0.15, 0.22, 0.30, 0.38, 0.45, 0.50, 0.55};
constexpr double kAttentionBackwardRatio = 2.5;  // FlashAttention convention
constexpr double kLayerOverheadUs = 40;          // ~40 kernels per layer forward + backward, ~1 us launch gap each
// AdamW step: read fp32 gradient (4 B), read + write fp32 master, m, v (24 B), write bf16 parameter (2 B).
constexpr double kOptimizerBytesPerParam = 30;
constexpr double kHbmAchievedShare = 0.9;  // device copy ~3.0 of 3.35 TB/s (H100), ~4.3 of 4.8 (H200)
// Strategy switch: bf16 parameters + bf16 accumulated gradients (4 B) moved at the point-to-point NVLink rate.
constexpr double kHotSwitchBytesPerParam = 4;

// ---- Memory (bf16, FlashAttention, SwiGLU) ----
constexpr ActivationCoefficients kActivationsNone{12, 4, 8};
constexpr ActivationCoefficients kActivationsSelective{10, 4, 6};
constexpr ActivationCoefficients kActivationsFull{2, 0, 0};  // the layer input only
constexpr double kLogitsBytesPerVocab = 10;                  // bf16 logits + fp32 softmax + fp32 gradient
// bf16 parameters (2), bf16 gradients (2), fp32 master + m + v (12), by ZeRO stage 0..3.
constexpr std::array<double, 4> kReplicatedBytesPerParam = {16, 4, 2, 0};
constexpr std::array<double, 4> kShardedBytesPerParam = {0, 12, 14, 16};
constexpr double kReserveGiB = 6;  // CUDA context, NCCL buffers, allocator fragmentation

const char* const kNotes =
    "Uncalibrated: every number from public figures (calibrate/PROFILE.md lists each). NVLink collectives: "
    "Skrull Table 5 (H100) fitted with a latency+bandwidth piecewise fit, assuming the table is nccl-tests sizes "
    "(MB = MiB) on one node of 8 GPUs; fit_mape is the error on held-out rows of that published table, not a "
    "measurement of this GPU. Groups of 2 and 4 keep the bus bandwidth, latency scaled by (n-1)/7. Other GPUs: "
    "NVLink bandwidths scaled by their NVLink per direction / 450 GB/s. send_recv: 80% of NVLink per direction, "
    "5 us. InfiniBand: one NIC per GPU at the NIC's busbw for every group (conservative for groups with several "
    "GPUs per node, which NCCL spreads over several NICs), latency 20 + 10 log2(n/8) us (x2 for all_reduce), at least "
    "the NVLink table's latency for the same op (a call across nodes pays the fixed costs of one inside a node). "
    "Compute: datasheet peak; GEMM efficiency 0.2 at 128 tokens to 0.75 at >= 8K; attention efficiency 0.15 at "
    "256 to 0.55 at >= 16K; 40 us per layer; AdamW 30 B/param at 90% of HBM bandwidth. Memory: activation bytes "
    "per token per layer none 12h+4kv+8f, selective 10h+4kv+6f, full 2h; logits 10 B per vocab entry; static "
    "bytes per parameter 16 (bf16 param 2, grad 2, fp32 master+m+v 12) split by ZeRO stage; reserve 6 GiB.";

const NetworkFigures& network_of(const GpuKind& gpu) {
  for (const auto& network : kNetworks) {
    if (gpu.name == network.gpu) return network;
  }
  throw InputError("no public interconnect figures for GPU '" + gpu.name +
                   "' (known: H100-SXM, H200, A800, A100-40GB)");
}

Curve curve(std::span<const double> x, std::span<const double> y) {
  return Curve{std::vector<double>(x.begin(), x.end()), std::vector<double>(y.begin(), y.end()), std::nullopt};
}

void add_nvlink_collectives(const GpuKind& gpu, std::vector<CollectiveFit>& out) {
  const double scale = gpu.nvlink_GBps / kTableNvlinkGBps;
  for (auto op :
       {CollectiveOp::AllGather, CollectiveOp::ReduceScatter, CollectiveOp::AllReduce, CollectiveOp::AllToAll}) {
    const auto table = skrull_table5(op);
    const auto fitted = fit_collective_segments(table, op, kTableGroupSize, kTableHoldOutEvery);
    for (int n : kNvlinkGroups) {
      CollectiveFit fit = fitted.to_profile_entry(LinkClass::NvLink, false);
      fit.group_size = n;
      // The table's error only describes the table's own setting: 8 GPUs on the table's NVLink.
      if (n != kTableGroupSize || scale != 1) fit.fit_mape.reset();
      for (auto& segment : fit.segments) {
        segment.latency_us *= static_cast<double>(n - 1) / (kTableGroupSize - 1);
        segment.bus_GBps *= scale;
      }
      out.push_back(fit);
    }
  }
  out.push_back(single_segment(CollectiveOp::SendRecv, LinkClass::NvLink, 2, kSendRecvNvlinkLatencyUs,
                               kSendRecvNvlinkShare * gpu.nvlink_GBps));
}

/// The largest latency of `op`'s NVLink fit for the table's 8 GPUs (`nvlink` holds the NVLink entries).
double nvlink_table_latency_us(CollectiveOp op, const std::vector<CollectiveFit>& nvlink) {
  for (const auto& fit : nvlink) {
    if (fit.op != op || fit.link != LinkClass::NvLink || fit.group_size != kTableGroupSize) continue;
    double latency = 0;
    for (const auto& segment : fit.segments) latency = std::max(latency, segment.latency_us);
    return latency;
  }
  throw std::logic_error("default profile: the NVLink fits must come before the InfiniBand ones");
}

void add_infiniband_collectives(const GpuKind& gpu, std::vector<CollectiveFit>& out) {
  const NetworkFigures& network = network_of(gpu);
  for (auto op :
       {CollectiveOp::AllGather, CollectiveOp::ReduceScatter, CollectiveOp::AllReduce, CollectiveOp::AllToAll}) {
    // A call across nodes pays every fixed cost the same call pays inside one (the framework's, the launch, the
    // NVLink hops), which the NVLink table measured: never less, so a wider fabric never looks faster.
    const double floor_us = nvlink_table_latency_us(op, out);
    for (int n : kIbGroups) {
      double latency = kIbBaseLatencyUs + kIbLatencyPerDoublingUs * std::log2(n / 8.0);
      if (op == CollectiveOp::AllReduce) latency *= 2;  // a reduce phase and a broadcast phase
      out.push_back(single_segment(op, LinkClass::InfiniBand, n, std::max(latency, floor_us), network.bus_GBps));
    }
  }
  out.push_back(
      single_segment(CollectiveOp::SendRecv, LinkClass::InfiniBand, 2, kIbSendRecvLatencyUs, network.bus_GBps));
}

}  // namespace

std::vector<CollectiveSample> skrull_table5(CollectiveOp op) {
  const std::array<double, 9>* latencies = nullptr;
  switch (op) {
    case CollectiveOp::AllGather:
      latencies = &kTableAllGatherUs;
      break;
    case CollectiveOp::AllToAll:
      latencies = &kTableAllToAllUs;
      break;
    case CollectiveOp::ReduceScatter:
      latencies = &kTableReduceScatterUs;
      break;
    case CollectiveOp::AllReduce:
      latencies = &kTableAllReduceUs;
      break;
    case CollectiveOp::SendRecv:
      throw std::invalid_argument("Skrull Table 5 has no send_recv column");
  }
  std::vector<CollectiveSample> samples;
  for (std::size_t i = 0; i < kTableMiB.size(); ++i) {
    samples.push_back({kTableMiB[i] * 1024 * 1024, (*latencies)[i] * 1e-6});
  }
  return samples;
}

Profile derive_default_profile(const GpuKind& gpu) {
  Profile p;
  p.gpu = gpu.name;
  p.provenance.calibrated = false;
  p.provenance.source = "derived from public figures";
  p.provenance.tool_version = LCSIM_VERSION;
  p.provenance.notes = std::string(network_of(gpu).nic) + " InfiniBand. " + kNotes;
  p.network = NetworkReference{gpu.nvlink_GBps, kNvlinkWireLatencyUs, network_of(gpu).link_GBps, kIbWireLatencyUs};

  auto& c = p.compute;
  c.peak_tflops = gpu.peak_bf16_tflops;
  c.gemm_efficiency = curve(kGemmTokens, kGemmEfficiency);
  if (gpu.name == "H100-SXM" || gpu.name == "H200")
    for (std::size_t i = 0; i < kHopperLongTokens.size(); ++i) {
      c.gemm_efficiency.x.push_back(kHopperLongTokens[i]);
      c.gemm_efficiency.y.push_back(kGemmEfficiency.back() * kHopperLongShareOf8K[i]);
    }
  c.attention_efficiency = curve(kAttentionTokens, kAttentionEfficiency);
  c.attention_backward_ratio = kAttentionBackwardRatio;
  c.layer_overhead_us = kLayerOverheadUs;
  c.gemm_work_overhead = 0;  // no datasheet figure says it: only the layer proxy measures it (calibrate)
  // us per million parameters = bytes * 1e6 / (bytes/s) * 1e6
  c.optimizer_us_per_mparam = kOptimizerBytesPerParam * 1e6 / (kHbmAchievedShare * gpu.hbm_TBps * 1e12) * 1e6;
  c.hot_switch_us_per_mparam = kHotSwitchBytesPerParam * 1e6 / (kSendRecvNvlinkShare * gpu.nvlink_GBps * 1e9) * 1e6;

  auto& m = p.memory;
  m.activations_none = kActivationsNone;
  m.activations_selective = kActivationsSelective;
  m.activations_full = kActivationsFull;
  m.logits_bytes_per_token_per_vocab = kLogitsBytesPerVocab;
  m.replicated_bytes_per_param = kReplicatedBytesPerParam;
  m.sharded_bytes_per_param = kShardedBytesPerParam;
  m.reserve_bytes = kReserveGiB * 1024 * 1024 * 1024;

  add_nvlink_collectives(gpu, p.collectives);
  add_infiniband_collectives(gpu, p.collectives);
  // The NVLink fits come from Skrull Table 5's rows, which the validation catalogue also predicts.
  for (auto op :
       {CollectiveOp::AllGather, CollectiveOp::AllToAll, CollectiveOp::ReduceScatter, CollectiveOp::AllReduce}) {
    std::string id = "skrull-table5-" + std::string(to_string(op)) + "-fitted";
    std::replace(id.begin(), id.end(), '_', '-');
    p.provenance.fitted_on.push_back({id, collective_parameter(op, LinkClass::NvLink)});
  }
  return p;
}

}  // namespace lcsim
