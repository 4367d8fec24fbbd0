#pragma once
// The attention kernels' tile, plain C++ so that host code (the calibration fit's critical-path model,
// model/profile.hpp AttentionBlocks) names the same number the kernels are built with.
namespace lcsim::kernels {

/// Query rows of a forward block and key rows of a backward block; both walk the other side a tile at a time.
inline constexpr int kAttentionTileRows = 64;

/// Blocks of each kernel one Hopper SM holds at once. Registers bound them: 128 threads a block, the counts
/// `nvcc -arch=sm_90 -O3 -Xptxas -v` reports (CUDA 13.0) rounded up to 8, of 65536 registers: forward 166 (head_dim
/// 64) and 247 (128), backward 230 and 255. Rederive after changing a kernel (docs/measurements/h200-2026-11-26.md).
constexpr int attention_forward_blocks_per_sm(int head_dim) {
  return head_dim <= 64 ? 3 : 2;
}
constexpr int attention_backward_blocks_per_sm(int /*head_dim*/) {
  return 2;
}

}  // namespace lcsim::kernels
