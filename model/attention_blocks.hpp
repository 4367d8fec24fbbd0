#pragma once
// The busiest SM of an attention kernel call (profile field compute.attention_blocks; derivation and measurements:
// docs/measurements/h200-2026-11-26.md). A causal call's blocks form triangles: tile i of a sequence walks i + 1
// tile pairs forward, and a backward block walks the later query tiles. Launched longest first and round-robin over
// the SMs, up to blocks_per_sm at once on each, the first SM holds the blocks of ranks 0, sms, 2 sms, ...: when the
// call has few blocks (a lone sequence, a Ulysses shard of two heads) that SM outlasts the call's work spread over
// the GPU.
#include <span>

namespace lcsim {

/// `copies` x blocks of scale x 1, 2, ..., tiles tile pairs (one sequence's heads, or its KV heads in backward).
struct BlockRun {
  double copies = 0;
  double tiles = 0;
  double scale = 1;
};

/// Tile pairs on the busiest SM: the sum of the blocks at ranks 0, sms, ..., (blocks_per_sm - 1) sms of the union of
/// `runs` in descending size (0 past the last block). Needs sms >= 1, blocks_per_sm >= 1.
double busiest_sm_tile_pairs(std::span<const BlockRun> runs, int sms, int blocks_per_sm);

}  // namespace lcsim
