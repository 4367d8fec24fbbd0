#pragma once
// Warp-level tensor-core building blocks (sm_80+): mma.sync m16n8k16 BF16 -> FP32, ldmatrix fragment loads
// from shared memory, cp.async tile copies.
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"), with g = lane / 4 and t = lane % 4:
//   A 16x16: a0 = (row g, cols 2t, 2t+1), a1 = (row g+8, same), a2 = (row g, cols 2t+8, 2t+9), a3 = (row g+8, ...)
//   B 16x8:  b0 = (rows 2t, 2t+1, col g), b1 = (rows 2t+8, 2t+9, col g)
//   C 16x8:  c0, c1 = (row g, cols 2t, 2t+1), c2, c3 = (row g+8, cols 2t, 2t+1)
// Two 32-bit halves hold two BF16, the lower column (or row, for B) in the low 16 bits.
// ldmatrix x4 loads four 8x8 BF16 matrices; lanes 8i..8i+7 give the row addresses of matrix i, and lane l
// receives row l/4, elements 2(l%4) and 2(l%4)+1 of each (with .trans: of the transposed matrix).
#include <cstdint>

#include <cuda_bf16.h>

namespace lcsim::kernels::detail {

__device__ __forceinline__ std::uint32_t smem_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

/// 16-byte asynchronous copy; when `valid` is false nothing is read and the 16 bytes are zero-filled.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(smem)), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(row)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(row)));
}

/// d += a * b for one 16x8 output block.
__device__ __forceinline__ void mma_16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                          std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (lo) in the low half
  std::uint32_t bits;
  __builtin_memcpy(&bits, &v, sizeof(bits));
  return bits;
}

// ---- Fragment loads from a shared-memory tile with leading dimension `ld` (elements). Lane l gives the row
// address of row l % 8 of matrix l / 8; the offsets below place the four matrices. ----

/// A fragment (rows m0..m0+15, cols k0..k0+15) of a tile stored row-major as [m][k].
/// Matrices: (m0, k0) -> a0, (m0+8, k0) -> a1, (m0, k0+8) -> a2, (m0+8, k0+8) -> a3.
__device__ __forceinline__ void load_a(std::uint32_t (&a)[4], const __nv_bfloat16* tile, int ld, int m0, int k0,
                                       int lane) {
  const int mat = lane >> 3;
  ldmatrix_x4(a, tile + (m0 + (lane & 7) + (mat & 1) * 8) * ld + k0 + (mat >> 1) * 8);
}

/// A fragment of the transpose of a tile stored as [k][m] (A(m, k) = tile[k][m]).
/// Stored matrices: (k0, m0) -> a0, (k0, m0+8) -> a1, (k0+8, m0) -> a2, (k0+8, m0+8) -> a3, read transposed.
__device__ __forceinline__ void load_a_trans(std::uint32_t (&a)[4], const __nv_bfloat16* tile, int ld, int m0, int k0,
                                             int lane) {
  const int mat = lane >> 3;
  ldmatrix_x4_trans(a, tile + (k0 + (lane & 7) + (mat >> 1) * 8) * ld + m0 + (mat & 1) * 8);
}

/// B fragments of two adjacent 8-column blocks (k0..k0+15, n0..n0+15) of a tile stored as [n][k]
/// (B(k, n) = tile[n][k], e.g. K in S = Q K^T): b[0], b[1] for columns n0.., b[2], b[3] for n0+8...
/// Matrices: (n0, k0) -> b[0], (n0, k0+8) -> b[1], (n0+8, k0) -> b[2], (n0+8, k0+8) -> b[3].
__device__ __forceinline__ void load_b_nk(std::uint32_t (&b)[4], const __nv_bfloat16* tile, int ld, int k0, int n0,
                                          int lane) {
  const int mat = lane >> 3;
  ldmatrix_x4(b, tile + (n0 + (lane & 7) + (mat >> 1) * 8) * ld + k0 + (mat & 1) * 8);
}

/// As load_b_nk for a tile stored as [k][n] (B(k, n) = tile[k][n], e.g. V in O = P V), read transposed.
/// Matrices: (k0, n0) -> b[0], (k0+8, n0) -> b[1], (k0, n0+8) -> b[2], (k0+8, n0+8) -> b[3].
__device__ __forceinline__ void load_b_kn(std::uint32_t (&b)[4], const __nv_bfloat16* tile, int ld, int k0, int n0,
                                          int lane) {
  const int mat = lane >> 3;
  ldmatrix_x4_trans(b, tile + (k0 + (lane & 7) + (mat & 1) * 8) * ld + n0 + (mat >> 1) * 8);
}

/// The A fragment of a 16x16 block held as two C fragments (columns 0..7 in c_lo, 8..15 in c_hi): how P = softmax(S)
/// feeds P V without leaving registers.
__device__ __forceinline__ void c_to_a(std::uint32_t (&a)[4], const float (&c_lo)[4], const float (&c_hi)[4]) {
  a[0] = pack_bf16(c_lo[0], c_lo[1]);
  a[1] = pack_bf16(c_lo[2], c_lo[3]);
  a[2] = pack_bf16(c_hi[0], c_hi[1]);
  a[3] = pack_bf16(c_hi[2], c_hi[3]);
}

/// An A fragment already held in registers (Q in the forward kernel), handed to gemm() as is.
__device__ __forceinline__ void copy_fragment(std::uint32_t (&to)[4], const std::uint32_t (&from)[4]) {
  to[0] = from[0];
  to[1] = from[1];
  to[2] = from[2];
  to[3] = from[3];
}

/// How a B operand's tile lies in shared memory: [n][k] (K in S = Q K^T) or [k][n] (V in O = P V).
enum class BTile { kNK, kKN };

/// One warp's 16 x N block: acc += A(16 x K) B(K x N), B read from a shared tile from column n0 on. `a_fragment(kk,
/// a)` fills the A fragment of columns 16kk..16kk+15 (from shared memory, registers or a previous product), which is
/// how the seven products of the forward and backward kernels differ; the k/n walk and the mma pairs are shared.
template <BTile Layout, int K, int N, typename AFragment>
__device__ __forceinline__ void gemm(float (&acc)[N / 8][4], AFragment&& a_fragment, const __nv_bfloat16* b_tile,
                                     int ld, int n0, int lane) {
  static_assert(K % 16 == 0 && N % 16 == 0, "a warp GEMM walks 16 x 16 blocks");
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    std::uint32_t a[4];
    a_fragment(kk, a);
#pragma unroll
    for (int nb2 = 0; nb2 < N / 16; ++nb2) {
      std::uint32_t b[4];
      if constexpr (Layout == BTile::kNK) {
        load_b_nk(b, b_tile, ld, kk * 16, n0 + nb2 * 16, lane);
      } else {
        load_b_kn(b, b_tile, ld, kk * 16, n0 + nb2 * 16, lane);
      }
      mma_16816(acc[2 * nb2], a, b[0], b[1]);
      mma_16816(acc[2 * nb2 + 1], a, b[2], b[3]);
    }
  }
}

/// Copies rows [row0, row0 + Rows) of one head (head_dim D) into a shared tile [Rows][D + pad] with 16-byte
/// cp.async; rows at or past `row_end` are zero-filled. `src` points at the head's first element of row 0.
template <int Rows, int D, int Ld, int Threads>
__device__ __forceinline__ void load_tile_async(__nv_bfloat16* tile, const __nv_bfloat16* src, std::int64_t row_stride,
                                                int row0, int row_end, int tid) {
  constexpr int kChunksPerRow = D / 8;
  constexpr int kChunks = Rows * kChunksPerRow;
  static_assert(kChunks % Threads == 0, "tile chunks must divide evenly among the threads");
#pragma unroll
  for (int i = 0; i < kChunks / Threads; ++i) {
    const int chunk = tid + i * Threads;
    const int r = chunk / kChunksPerRow;
    const int c = (chunk % kChunksPerRow) * 8;
    const bool valid = row0 + r < row_end;
    const __nv_bfloat16* g = valid ? src + static_cast<std::int64_t>(row0 + r) * row_stride + c : src;
    cp_async_16(tile + r * Ld + c, g, valid);
  }
}

}  // namespace lcsim::kernels::detail
