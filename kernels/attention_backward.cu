// Tiled varlen causal attention backward (FlashAttention-2 scheme). One block = 64 keys of one KV head of one
// sequence; each of its 4 warps owns 16 keys and keeps their dK and dV in registers while the block walks over
// every query tile at or below the diagonal, for every query head sharing the KV head (GQA needs no reduction
// afterwards). Per query tile, with S^T = K Q^T held transposed so that P^T and dS^T are A operands in registers:
//   P^T = exp(scale S^T - lse),  dV += P^T dO,  dP^T = V dO^T,  dS^T = P^T (dP^T - delta),  dK += dS^T Q,
//   dQ += dS K  (dS^T goes through shared memory; FP32 atomics into a dQ accumulator)
// A pre-pass computes delta = rowsum(dO * O); a post-pass converts the dQ accumulator to BF16.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/attention.hpp"
#include "kernels/attention_launch.hpp"
#include "kernels/attention_tiles.hpp"
#include "kernels/mma.cuh"

namespace lcsim::kernels {
namespace {

using detail::BTile;
using detail::c_to_a;
using detail::gemm;
using detail::load_a;
using detail::load_a_trans;

constexpr int kBlockRows = kAttentionTileRows;  // keys per block == query rows per step
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr float kLog2e = 1.4426950408889634f;
constexpr int kDsLd = kBlockRows + 8;

template <int D>
struct BackwardTiles {
  static constexpr int kLd = D + 8;
  static constexpr int kTile = kBlockRows * kLd;
  // K, V, Q, dO tiles, the dS^T tile, then lse and delta of the query tile.
  static constexpr int kSharedBytes = (4 * kTile + kBlockRows * kDsLd) * 2 + 2 * kBlockRows * 4;
};

struct Workspace {
  float* dq_accumulator;  // [total][heads][head_dim]
  float* delta;           // [heads][total]
};

Workspace split_workspace(void* workspace, const VarlenLayout& layout, const AttentionDims& dims) {
  const auto rows = static_cast<std::size_t>(layout.total_tokens) * static_cast<std::size_t>(dims.heads);
  const std::size_t accumulator_bytes =
      (rows * static_cast<std::size_t>(dims.head_dim) * sizeof(float) + 255) / 256 * 256;
  auto* base = static_cast<unsigned char*>(workspace);
  return {reinterpret_cast<float*>(base), reinterpret_cast<float*>(base + accumulator_bytes)};
}

/// delta[h][token] = sum_d dO[token][h][d] * O[token][h][d]; one warp per (token, head).
__global__ void attention_delta_kernel(AttentionBackwardArgs args, float* delta) {
  const std::int64_t rows = static_cast<std::int64_t>(args.layout.total_tokens) * args.dims.heads;
  const std::int64_t row = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const auto token = static_cast<int>(row / args.dims.heads);
  const int head = static_cast<int>(row % args.dims.heads);
  const bf16* o = args.out.data + static_cast<std::int64_t>(token) * args.out.row_stride + head * args.dims.head_dim;
  const bf16* d_o =
      args.dout.data + static_cast<std::int64_t>(token) * args.dout.row_stride + head * args.dims.head_dim;
  float sum = 0.f;
  for (int d = lane; d < args.dims.head_dim; d += 32) sum += __bfloat162float(o[d]) * __bfloat162float(d_o[d]);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (lane == 0) delta[static_cast<std::int64_t>(head) * args.layout.total_tokens + token] = sum;
}

__global__ void attention_dq_convert_kernel(AttentionBackwardArgs args, const float* dq_accumulator) {
  const std::int64_t width = static_cast<std::int64_t>(args.dims.heads) * args.dims.head_dim;
  const std::int64_t n = static_cast<std::int64_t>(args.layout.total_tokens) * width;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t token = i / width;
    args.dq.data[token * args.dq.row_stride + i % width] = __float2bfloat16(dq_accumulator[i]);
  }
}

template <int D>
__global__ void __launch_bounds__(kThreads) attention_backward_kernel(AttentionBackwardArgs args, Workspace ws) {
  using Tiles = BackwardTiles<D>;
  extern __shared__ __align__(16) unsigned char shared_raw[];
  bf16* ks = reinterpret_cast<bf16*>(shared_raw);
  bf16* vs = ks + Tiles::kTile;
  bf16* qs = vs + Tiles::kTile;
  bf16* dos = qs + Tiles::kTile;
  bf16* dss = dos + Tiles::kTile;  // dS^T: [key][query]
  float* lse_s = reinterpret_cast<float*>(dss + kBlockRows * kDsLd);
  float* delta_s = lse_s + kBlockRows;

  const int seq = blockIdx.z;
  const int kv_head = blockIdx.y;
  const int n_block = gridDim.x - 1 - blockIdx.x;
  const int seq_start = args.layout.cu_seqlens[seq];
  const int seqlen = args.layout.cu_seqlens[seq + 1] - seq_start;
  const int key0 = n_block * kBlockRows;
  if (key0 >= seqlen) return;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int group = args.dims.heads / args.dims.kv_heads;
  const int total = args.layout.total_tokens;
  const float scale_log2 = args.softmax_scale * kLog2e;
  const int my_key[2] = {key0 + warp * 16 + g, key0 + warp * 16 + g + 8};

  detail::load_tile_async<kBlockRows, D, Tiles::kLd, kThreads>(
      ks, args.k.data + static_cast<std::int64_t>(seq_start) * args.k.row_stride + kv_head * D, args.k.row_stride, key0,
      seqlen, tid);
  detail::load_tile_async<kBlockRows, D, Tiles::kLd, kThreads>(
      vs, args.v.data + static_cast<std::int64_t>(seq_start) * args.v.row_stride + kv_head * D, args.v.row_stride, key0,
      seqlen, tid);
  detail::cp_async_commit();

  float dk[D / 8][4];
  float dv[D / 8][4];
#pragma unroll
  for (int nd = 0; nd < D / 8; ++nd) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[nd][e] = dv[nd][e] = 0.f;
  }

  const int m_tiles = (seqlen + kBlockRows - 1) / kBlockRows;
  for (int head = kv_head * group; head < (kv_head + 1) * group; ++head) {
    const bf16* q_src = args.q.data + static_cast<std::int64_t>(seq_start) * args.q.row_stride + head * D;
    const bf16* do_src = args.dout.data + static_cast<std::int64_t>(seq_start) * args.dout.row_stride + head * D;
    const float* lse_head = args.lse + static_cast<std::int64_t>(head) * total + seq_start;
    const float* delta_head = ws.delta + static_cast<std::int64_t>(head) * total + seq_start;
    for (int m_block = n_block; m_block < m_tiles; ++m_block) {
      const int q0 = m_block * kBlockRows;
      __syncthreads();  // the previous step is done with Q, dO, dS^T, lse and delta
      detail::load_tile_async<kBlockRows, D, Tiles::kLd, kThreads>(qs, q_src, args.q.row_stride, q0, seqlen, tid);
      detail::load_tile_async<kBlockRows, D, Tiles::kLd, kThreads>(dos, do_src, args.dout.row_stride, q0, seqlen, tid);
      detail::cp_async_commit();
      if (tid < kBlockRows) {
        const bool valid = q0 + tid < seqlen;
        // Rows past the sequence get lse = +inf, so their probabilities are exactly 0.
        lse_s[tid] = valid ? lse_head[q0 + tid] : INFINITY;
        delta_s[tid] = valid ? delta_head[q0 + tid] : 0.f;
      }
      detail::cp_async_wait<0>();
      __syncthreads();

      // S^T = K Q^T: this warp's 16 keys x 64 queries.
      float p[kBlockRows / 8][4];
#pragma unroll
      for (int nb = 0; nb < kBlockRows / 8; ++nb) p[nb][0] = p[nb][1] = p[nb][2] = p[nb][3] = 0.f;
      gemm<BTile::kNK, D, kBlockRows>(
          p, [&](int kk, std::uint32_t(&a)[4]) { load_a(a, ks, Tiles::kLd, warp * 16, kk * 16, lane); }, qs, Tiles::kLd,
          0, lane);
      // P^T, causal: key <= query.
#pragma unroll
      for (int nb = 0; nb < kBlockRows / 8; ++nb) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = nb * 8 + 2 * t + (e & 1);
          const bool visible = my_key[e >> 1] <= q0 + col;
          p[nb][e] = visible ? exp2f(p[nb][e] * scale_log2 - lse_s[col] * kLog2e) : 0.f;
        }
      }
      // dV += P^T dO.
      gemm<BTile::kKN, kBlockRows, D>(
          dv, [&](int kk, std::uint32_t(&a)[4]) { c_to_a(a, p[2 * kk], p[2 * kk + 1]); }, dos, Tiles::kLd, 0, lane);
      // dP^T = V dO^T, then dS^T = P^T (dP^T - delta) in place.
      float ds[kBlockRows / 8][4];
#pragma unroll
      for (int nb = 0; nb < kBlockRows / 8; ++nb) ds[nb][0] = ds[nb][1] = ds[nb][2] = ds[nb][3] = 0.f;
      gemm<BTile::kNK, D, kBlockRows>(
          ds, [&](int kk, std::uint32_t(&a)[4]) { load_a(a, vs, Tiles::kLd, warp * 16, kk * 16, lane); }, dos,
          Tiles::kLd, 0, lane);
#pragma unroll
      for (int nb = 0; nb < kBlockRows / 8; ++nb) {
#pragma unroll
        for (int e = 0; e < 4; ++e) ds[nb][e] = p[nb][e] * (ds[nb][e] - delta_s[nb * 8 + 2 * t + (e & 1)]);
      }
      // dK += dS^T Q (the softmax scale is applied once at the end).
      gemm<BTile::kKN, kBlockRows, D>(
          dk, [&](int kk, std::uint32_t(&a)[4]) { c_to_a(a, ds[2 * kk], ds[2 * kk + 1]); }, qs, Tiles::kLd, 0, lane);
      // dS^T to shared memory, for dQ = dS K across the block's 64 keys.
#pragma unroll
      for (int nb = 0; nb < kBlockRows / 8; ++nb) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          *reinterpret_cast<std::uint32_t*>(dss + (warp * 16 + g + 8 * r) * kDsLd + nb * 8 + 2 * t) =
              detail::pack_bf16(ds[nb][2 * r], ds[nb][2 * r + 1]);
        }
      }
      __syncthreads();
      // dQ rows q0 + warp*16 .. +15, in 64-column chunks to bound the registers held.
#pragma unroll
      for (int chunk = 0; chunk < D / 64; ++chunk) {
        float dq[8][4];
#pragma unroll
        for (int nd = 0; nd < 8; ++nd) dq[nd][0] = dq[nd][1] = dq[nd][2] = dq[nd][3] = 0.f;
        gemm<BTile::kKN, kBlockRows, 64>(
            dq, [&](int kk, std::uint32_t(&a)[4]) { load_a_trans(a, dss, kDsLd, warp * 16, kk * 16, lane); }, ks,
            Tiles::kLd, chunk * 64, lane);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int row = q0 + warp * 16 + g + 8 * r;
          if (row >= seqlen) continue;
          float* dst = ws.dq_accumulator + (static_cast<std::int64_t>(seq_start + row) * args.dims.heads + head) * D +
                       chunk * 64 + 2 * t;
#pragma unroll
          for (int nd = 0; nd < 8; ++nd) {
            atomicAdd(dst + nd * 8, dq[nd][2 * r] * args.softmax_scale);
            atomicAdd(dst + nd * 8 + 1, dq[nd][2 * r + 1] * args.softmax_scale);
          }
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = my_key[r];
    if (key >= seqlen) continue;
    bf16* dk_dst = args.dk.data + static_cast<std::int64_t>(seq_start + key) * args.dk.row_stride + kv_head * D;
    bf16* dv_dst = args.dv.data + static_cast<std::int64_t>(seq_start + key) * args.dv.row_stride + kv_head * D;
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd) {
      *reinterpret_cast<std::uint32_t*>(dk_dst + nd * 8 + 2 * t) =
          detail::pack_bf16(dk[nd][2 * r] * args.softmax_scale, dk[nd][2 * r + 1] * args.softmax_scale);
      *reinterpret_cast<std::uint32_t*>(dv_dst + nd * 8 + 2 * t) = detail::pack_bf16(dv[nd][2 * r], dv[nd][2 * r + 1]);
    }
  }
}

template <int D>
void launch_backward(const AttentionBackwardArgs& args, Workspace ws, cudaStream_t stream) {
  const int bytes = BackwardTiles<D>::kSharedBytes;
  check_cuda(cudaFuncSetAttribute(attention_backward_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
             "attention_backward: shared-memory limit");
  const dim3 grid((args.layout.max_seqlen + kBlockRows - 1) / kBlockRows, args.dims.kv_heads, args.layout.num_seqs);
  attention_backward_kernel<D><<<grid, kThreads, bytes, stream>>>(args, ws);
  check_launch("attention_backward");
}

}  // namespace

void attention_backward(const AttentionBackwardArgs& args, void* workspace, cudaStream_t stream) {
  check_attention_args(args.layout, args.dims, "attention_backward");
  const int heads = args.dims.heads;
  const int kv_heads = args.dims.kv_heads;
  const int d = args.dims.head_dim;
  check_rows(args.q, heads, d, "q");
  check_rows(args.k, kv_heads, d, "k");
  check_rows(args.v, kv_heads, d, "v");
  check_rows(args.out, heads, d, "out");
  check_rows(args.dout, heads, d, "dout");
  check_rows(args.dq, heads, d, "dq");
  check_rows(args.dk, kv_heads, d, "dk");
  check_rows(args.dv, kv_heads, d, "dv");
  if (args.lse == nullptr || workspace == nullptr)
    throw std::invalid_argument("attention_backward: null lse/workspace");
  if (args.layout.num_seqs == 0 || args.layout.total_tokens == 0) return;

  const Workspace ws = split_workspace(workspace, args.layout, args.dims);
  const std::int64_t rows = static_cast<std::int64_t>(args.layout.total_tokens) * heads;
  check_cuda(cudaMemsetAsync(ws.dq_accumulator, 0, static_cast<std::size_t>(rows) * d * sizeof(float), stream),
             "attention_backward: clearing dQ");
  constexpr int kDeltaThreads = 256;
  const auto delta_blocks = static_cast<unsigned>((rows * 32 + kDeltaThreads - 1) / kDeltaThreads);
  attention_delta_kernel<<<delta_blocks, kDeltaThreads, 0, stream>>>(args, ws.delta);
  check_launch("attention_backward delta");
  if (d == 64) {
    launch_backward<64>(args, ws, stream);
  } else {
    launch_backward<128>(args, ws, stream);
  }
  const std::int64_t elements = rows * d;
  const auto convert_blocks = static_cast<unsigned>(std::min<std::int64_t>((elements + 255) / 256, 65535));
  attention_dq_convert_kernel<<<convert_blocks, 256, 0, stream>>>(args, ws.dq_accumulator);
  check_launch("attention_backward dq convert");
}

}  // namespace lcsim::kernels
