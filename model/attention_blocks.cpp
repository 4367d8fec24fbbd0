#include "model/attention_blocks.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace lcsim {
namespace {

/// Blocks of at least `size` tile pairs.
double blocks_at_least(std::span<const BlockRun> runs, double size) {
  double count = 0;
  for (const BlockRun& r : runs) count += r.copies * std::max(0.0, r.tiles - std::ceil(size / r.scale - 1e-9) + 1);
  return count;
}

/// The block of rank `k` (0: the largest): the largest size s with at least k + 1 blocks of s or more.
double block_at_rank(std::span<const BlockRun> runs, double k, double largest) {
  if (blocks_at_least(runs, 0) < k + 1) return 0;
  // Invariant: blocks_at_least(low) >= k + 1 > blocks_at_least(high). Block sizes are whole tile pairs, so a gap
  // of 1e-9 largest (< 1) between low and high leaves exactly one size, the answer, at or below high.
  double low = 0, high = largest * (1 + 1e-6);
  for (int i = 0; i < 200 && high - low > 1e-9 * largest; ++i) {
    const double mid = (low + high) / 2;
    (blocks_at_least(runs, mid) >= k + 1 ? low : high) = mid;
  }
  // Snap to the largest block size at or below the threshold.
  double size = 0;
  for (const BlockRun& r : runs) {
    const double i = std::min(r.tiles, std::floor(high / r.scale + 1e-9));
    if (r.copies > 0 && i >= 1 && i * r.scale <= high * (1 + 1e-12)) size = std::max(size, i * r.scale);
  }
  return size;
}

}  // namespace

double busiest_sm_tile_pairs(std::span<const BlockRun> runs, int sms, int blocks_per_sm) {
  if (sms < 1 || blocks_per_sm < 1) throw std::invalid_argument("busiest_sm_tile_pairs: sms, blocks_per_sm >= 1");
  double largest = 0;
  for (const BlockRun& r : runs)
    if (r.copies > 0 && r.tiles >= 1) largest = std::max(largest, r.tiles * r.scale);
  double pairs = 0;
  for (int k = 0; k < blocks_per_sm; ++k) pairs += block_at_rank(runs, static_cast<double>(k) * sms, largest);
  return pairs;
}

}  // namespace lcsim
