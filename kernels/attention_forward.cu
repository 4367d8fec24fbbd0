// Tiled varlen causal attention forward (FlashAttention-2 scheme). One block = 64 query rows of one head of one
// sequence; each of its 4 warps owns 16 rows. Key/value tiles of 64 rows stream through shared memory (two
// cp.async stages), S = Q K^T and O += P V run on tensor cores, and the softmax is computed online so S and P stay
// in registers.
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/attention.hpp"
#include "kernels/attention_launch.hpp"
#include "kernels/attention_tiles.hpp"
#include "kernels/mma.cuh"

namespace lcsim::kernels {
namespace {

using detail::BTile;
using detail::c_to_a;
using detail::copy_fragment;
using detail::gemm;
using detail::load_a;

constexpr int kBlockRows = kAttentionTileRows;  // query rows per block (Br) == key rows per tile (Bc)
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr float kLog2e = 1.4426950408889634f;

template <int D>
struct ForwardTiles {
  static constexpr int kLd = D + 8;  // +16 bytes per row: ldmatrix rows fall in distinct banks
  static constexpr int kTile = kBlockRows * kLd;
  static constexpr int kSharedBytes = 2 /*stages*/ * 2 /*K, V*/ * kTile * 2 /*bytes*/;
};

template <int D>
__global__ void __launch_bounds__(kThreads) attention_forward_kernel(AttentionForwardArgs args) {
  using Tiles = ForwardTiles<D>;
  extern __shared__ __align__(16) unsigned char shared_raw[];
  bf16* shared = reinterpret_cast<bf16*>(shared_raw);
  // Stage s holds K at shared + (2s) * kTile and V at shared + (2s + 1) * kTile.
  const auto k_tile = [shared](int stage) { return shared + (2 * stage) * Tiles::kTile; };
  const auto v_tile = [shared](int stage) { return shared + (2 * stage + 1) * Tiles::kTile; };

  const int seq = blockIdx.z;
  const int head = blockIdx.y;
  const int m_block = gridDim.x - 1 - blockIdx.x;  // longest-running tiles first
  const int seq_start = args.layout.cu_seqlens[seq];
  const int seqlen = args.layout.cu_seqlens[seq + 1] - seq_start;
  if (m_block * kBlockRows >= seqlen) return;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int kv_head = head / (args.dims.heads / args.dims.kv_heads);
  const bf16* q_src = args.q.data + static_cast<std::int64_t>(seq_start) * args.q.row_stride + head * D;
  const bf16* k_src = args.k.data + static_cast<std::int64_t>(seq_start) * args.k.row_stride + kv_head * D;
  const bf16* v_src = args.v.data + static_cast<std::int64_t>(seq_start) * args.v.row_stride + kv_head * D;
  const int q_row0 = m_block * kBlockRows;

  // Q goes through stage 1's K buffer into registers; stage 0 receives the first K/V tile meanwhile.
  detail::load_tile_async<kBlockRows, D, Tiles::kLd, kThreads>(k_tile(1), q_src, args.q.row_stride, q_row0, seqlen,
                                                               tid);
  detail::load_tile_async<kBlockRows, D, Tiles::kLd, kThreads>(k_tile(0), k_src, args.k.row_stride, 0, seqlen, tid);
  detail::load_tile_async<kBlockRows, D, Tiles::kLd, kThreads>(v_tile(0), v_src, args.v.row_stride, 0, seqlen, tid);
  detail::cp_async_commit();
  detail::cp_async_wait<0>();
  __syncthreads();
  std::uint32_t qa[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) load_a(qa[kk], k_tile(1), Tiles::kLd, warp * 16, kk * 16, lane);
  __syncthreads();

  float o[D / 8][4];
#pragma unroll
  for (int nd = 0; nd < D / 8; ++nd) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.f, 0.f};  // this thread's share; the quad is summed at the end
  const float scale_log2 = args.softmax_scale * kLog2e;
  const int my_row[2] = {q_row0 + warp * 16 + g, q_row0 + warp * 16 + g + 8};

  const int n_tiles = m_block + 1;  // causal: keys up to the block's last row, Br == Bc
  for (int j = 0; j < n_tiles; ++j) {
    if (j + 1 < n_tiles) {
      const int next = (j + 1) & 1;
      detail::load_tile_async<kBlockRows, D, Tiles::kLd, kThreads>(k_tile(next), k_src, args.k.row_stride,
                                                                   (j + 1) * kBlockRows, seqlen, tid);
      detail::load_tile_async<kBlockRows, D, Tiles::kLd, kThreads>(v_tile(next), v_src, args.v.row_stride,
                                                                   (j + 1) * kBlockRows, seqlen, tid);
      detail::cp_async_commit();
      detail::cp_async_wait<1>();
    } else {
      detail::cp_async_wait<0>();
    }
    __syncthreads();
    const bf16* ks = k_tile(j & 1);
    const bf16* vs = v_tile(j & 1);

    float s[kBlockRows / 8][4];
#pragma unroll
    for (int nb = 0; nb < kBlockRows / 8; ++nb) s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.f;
    gemm<BTile::kNK, D, kBlockRows>(
        s, [&](int kk, std::uint32_t(&a)[4]) { copy_fragment(a, qa[kk]); }, ks, Tiles::kLd, 0, lane);

    const int key0 = j * kBlockRows;
    if (key0 + kBlockRows - 1 > q_row0 + warp * 16 || key0 + kBlockRows > seqlen) {
#pragma unroll
      for (int nb = 0; nb < kBlockRows / 8; ++nb) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = key0 + nb * 8 + 2 * t + (e & 1);
          if (key > my_row[e >> 1] || key >= seqlen) s[nb][e] = -INFINITY;
        }
      }
    }

#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int nb = 0; nb < kBlockRows / 8; ++nb) tile_max = fmaxf(tile_max, fmaxf(s[nb][2 * r], s[nb][2 * r + 1]));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      const float new_max = fmaxf(row_max[r], tile_max);
      // A row with every score masked so far keeps probabilities of exactly 0 (exp2(-inf)), never NaN.
      const float base = new_max == -INFINITY ? 0.f : new_max * scale_log2;
      const float correction = exp2f(row_max[r] * scale_log2 - base);
      row_max[r] = new_max;
      row_sum[r] *= correction;
#pragma unroll
      for (int nd = 0; nd < D / 8; ++nd) {
        o[nd][2 * r] *= correction;
        o[nd][2 * r + 1] *= correction;
      }
#pragma unroll
      for (int nb = 0; nb < kBlockRows / 8; ++nb) {
#pragma unroll
        for (int e = 2 * r; e < 2 * r + 2; ++e) {
          s[nb][e] = exp2f(fmaf(s[nb][e], scale_log2, -base));
          row_sum[r] += s[nb][e];
        }
      }
    }

    gemm<BTile::kKN, kBlockRows, D>(
        o, [&](int kk, std::uint32_t(&a)[4]) { c_to_a(a, s[2 * kk], s[2 * kk + 1]); }, vs, Tiles::kLd, 0, lane);
    __syncthreads();  // the stage just read is refilled by the next iteration's prefetch
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = row_sum[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int row = my_row[r];
    if (row >= seqlen) continue;
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    bf16* dst = args.out.data + static_cast<std::int64_t>(seq_start + row) * args.out.row_stride + head * D;
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd) {
      const std::uint32_t packed = detail::pack_bf16(o[nd][2 * r] * inv, o[nd][2 * r + 1] * inv);
      *reinterpret_cast<std::uint32_t*>(dst + nd * 8 + 2 * t) = packed;
    }
    if (t == 0) {
      args.lse[static_cast<std::int64_t>(head) * args.layout.total_tokens + seq_start + row] =
          row_max[r] * args.softmax_scale + logf(sum);
    }
  }
}

template <int D>
void launch_forward(const AttentionForwardArgs& args, cudaStream_t stream) {
  const int bytes = ForwardTiles<D>::kSharedBytes;
  check_cuda(cudaFuncSetAttribute(attention_forward_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
             "attention_forward: shared-memory limit");
  const dim3 grid((args.layout.max_seqlen + kBlockRows - 1) / kBlockRows, args.dims.heads, args.layout.num_seqs);
  attention_forward_kernel<D><<<grid, kThreads, bytes, stream>>>(args);
  check_cuda(cudaGetLastError(), "attention_forward launch");
}

}  // namespace

void attention_forward(const AttentionForwardArgs& args, cudaStream_t stream) {
  check_attention_args(args.layout, args.dims, "attention_forward");
  check_rows(args.q, args.dims.heads, args.dims.head_dim, "q");
  check_rows(args.k, args.dims.kv_heads, args.dims.head_dim, "k");
  check_rows(args.v, args.dims.kv_heads, args.dims.head_dim, "v");
  check_rows(args.out, args.dims.heads, args.dims.head_dim, "out");
  if (args.lse == nullptr) throw std::invalid_argument("attention_forward: lse is null");
  if (args.layout.num_seqs == 0 || args.layout.max_seqlen == 0) return;
  if (args.dims.head_dim == 64) {
    launch_forward<64>(args, stream);
  } else {
    launch_forward<128>(args, stream);
  }
}

}  // namespace lcsim::kernels
