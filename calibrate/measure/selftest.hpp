#pragma once
// `lcsim-gpu selftest`: correctness of the GPU kernels on fresh random inputs, checked against references.
//   attention  tiled forward/backward vs the naive GPU kernel (FP32) on every case, and vs the CPU reference
//              (double) on the small ones; the naive kernel vs the CPU too. Outputs are poisoned with NaN first,
//              so an unwritten element fails; the forward must be bitwise deterministic.
//   layer ops  RMSNorm, rotary, SwiGLU (forward and backward) and the cuBLASLt GEMM wrapper (all four transpose
//              combinations, and accumulation) vs the CPU reference.
//   layer      the layer proxy's gradients agree across recomputation modes (none, selective, full).
// Errors are ||x - ref|| / ||ref||; tolerances follow BF16 inputs with FP32 accumulation (1e-2, 2e-2 for
// gradients that pass through BF16 P and dS tiles).
#include <cstdint>
#include <iosfwd>

#include <cuda_runtime_api.h>

namespace lcsim::gpu {

/// Prints one row per check and returns true when every check passed.
bool run_selftest(std::uint64_t seed, cudaStream_t stream, std::ostream& out);

}  // namespace lcsim::gpu
