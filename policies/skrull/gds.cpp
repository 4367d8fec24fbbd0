#include "policies/skrull/gds.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <queue>
#include <utility>

#include "base/check.hpp"

namespace lcsim::skrull {

std::vector<std::vector<std::size_t>> binpack_by_flops(std::span<const double> flops, int ranks) {
  LCSIM_CHECK(ranks >= 1, "bin packing needs at least one rank");
  std::vector<std::size_t> order(flops.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return flops[a] > flops[b]; });
  std::vector<std::vector<std::size_t>> bins(static_cast<std::size_t>(ranks));
  // The lightest rank first, ties to the lowest index: a heap of (load, rank) instead of a scan of every rank per
  // sequence (131,072 sequences over 2,048 ranks at 16,384 GPUs took half a second).
  using Load = std::pair<double, std::size_t>;
  std::vector<Load> heap;
  for (std::size_t r = 0; r < bins.size(); ++r) heap.emplace_back(0.0, r);
  std::priority_queue<Load, std::vector<Load>, std::greater<>> lightest(std::greater<>{}, std::move(heap));
  for (const std::size_t seq : order) {
    auto [load, rank] = lightest.top();
    lightest.pop();
    bins[rank].push_back(seq);
    lightest.emplace(load + flops[seq], rank);
  }
  for (auto& bin : bins) std::sort(bin.begin(), bin.end());
  return bins;
}

CpAssignment place_micro_batch(std::span<const Tokens> lengths, std::span<const double> flops,
                               std::span<const std::size_t> members, const GdsOptions& options) {
  std::vector<Tokens> member_lengths(members.size());
  std::vector<double> member_flops(members.size());
  for (std::size_t i = 0; i < members.size(); ++i) {
    member_lengths[i] = lengths[members[i]];
    member_flops[i] = flops[members[i]];
  }
  if (options.placer == CpPlacer::RoundRobin) {
    // Appendix B.2 walks the sequences in data order (GDS hands members over sorted by length, and on sorted input
    // "largest remaining bucket" picks the same ranks as DACP's "least load").
    std::vector<std::size_t> by_index(members.size());
    std::iota(by_index.begin(), by_index.end(), std::size_t{0});
    std::sort(by_index.begin(), by_index.end(), [&](std::size_t a, std::size_t b) { return members[a] < members[b]; });
    std::vector<Tokens> ordered(members.size());
    for (std::size_t i = 0; i < by_index.size(); ++i) ordered[i] = member_lengths[by_index[i]];
    const CpAssignment placed = round_robin_schedule(ordered, options.bucket_tokens, options.cp, options.rollback);
    CpAssignment out = placed;
    if (placed.scheduled)
      for (std::size_t i = 0; i < by_index.size(); ++i) out.ranks[by_index[i]] = placed.ranks[i];
    return out;
  }
  return dacp_schedule(member_lengths, member_flops, options.bucket_tokens, options.cp, options.rollback);
}

namespace {

Tokens sum_tokens(std::span<const Tokens> lengths, std::span<const std::size_t> members) {
  Tokens total = 0;
  for (const std::size_t m : members) total += lengths[m];
  return total;
}

// Cuts `sorted` into `count` interleaved micro-batches and places each; nullopt-like empty result on failure.
bool try_cut(std::span<const Tokens> lengths, std::span<const double> flops, const std::vector<std::size_t>& sorted,
             std::size_t count, const GdsOptions& options, RankSchedule& out) {
  const double group_capacity = options.bucket_tokens * options.cp;
  std::vector<ScheduledMicroBatch> cut(count);
  bool within_bucket = true;
  for (std::size_t j = 0; j < count; ++j) {
    for (std::size_t pos = j; pos < sorted.size(); pos += count) cut[j].sequences.push_back(sorted[pos]);
    if (static_cast<double>(sum_tokens(lengths, cut[j].sequences)) > group_capacity) return false;
    CpAssignment placed = place_micro_batch(lengths, flops, cut[j].sequences, options);
    out.rollbacks += placed.rollbacks;
    if (!placed.scheduled) return false;
    within_bucket = within_bucket && placed.within_bucket;
    cut[j].ranks = std::move(placed.ranks);
  }
  out.micro_batches = std::move(cut);
  out.within_bucket = within_bucket;
  return true;
}

// The largest token sum of the `count` interleaved micro-batches of `sorted_lengths` (ascending). With n = q count
// + r, micro-batch j holds q + 1 sequences when j < r and q otherwise, and within each group position by position
// a later j holds a sequence at least as long: the largest sums are those of j = r - 1 and j = count - 1. So one
// count is judged against Eq. 10 in O(n / count) additions, and trying counts first, first + 1, ... costs
// O(n log n) in all (a harmonic sum) instead of O(n) per count.
Tokens largest_interleaved_sum(std::span<const Tokens> sorted_lengths, std::size_t count) {
  const auto sum_from = [&](std::size_t j) {
    Tokens total = 0;
    for (std::size_t pos = j; pos < sorted_lengths.size(); pos += count) total += sorted_lengths[pos];
    return total;
  };
  const std::size_t remainder = sorted_lengths.size() % count;
  const Tokens full = sum_from(count - 1);
  return remainder == 0 ? full : std::max(full, sum_from(remainder - 1));
}

}  // namespace

RankSchedule gds_schedule_rank(std::span<const Tokens> lengths, std::span<const double> flops,
                               std::span<const std::size_t> subset, const GdsOptions& options) {
  LCSIM_CHECK(options.cp >= 1 && options.bucket_tokens > 0, "GDS needs a CP group and a positive bucket size");
  RankSchedule out;
  if (subset.empty()) return out;
  std::vector<std::size_t> sorted(subset.begin(), subset.end());
  std::stable_sort(sorted.begin(), sorted.end(), [&](std::size_t a, std::size_t b) { return lengths[a] < lengths[b]; });

  std::vector<Tokens> sorted_lengths(sorted.size());
  for (std::size_t i = 0; i < sorted.size(); ++i) sorted_lengths[i] = lengths[sorted[i]];

  const double group_capacity = options.bucket_tokens * options.cp;
  const double total = static_cast<double>(sum_tokens(lengths, sorted));
  const auto first = static_cast<std::size_t>(std::max(1.0, std::ceil(total / group_capacity)));
  for (std::size_t count = std::min(first, sorted.size()); count <= sorted.size(); ++count) {
    ++out.attempts;
    // A cut with one micro-batch over C N tokens fails in try_cut whatever the placer does: skip it unplaced.
    if (static_cast<double>(largest_interleaved_sum(sorted_lengths, count)) > group_capacity) continue;
    if (try_cut(lengths, flops, sorted, count, options, out)) return out;
  }
  // Not even one sequence per micro-batch fits: shard the ones that fail and report them outside the bucket.
  out.micro_batches.clear();
  out.within_bucket = true;
  for (const std::size_t seq : sorted) {
    const std::size_t alone[] = {seq};
    CpAssignment placed = place_micro_batch(lengths, flops, alone, options);
    out.within_bucket = out.within_bucket && placed.scheduled && placed.within_bucket;
    out.micro_batches.push_back({{seq}, placed.scheduled ? placed.ranks : std::vector<int>{CpAssignment::kSharded}});
  }
  return out;
}

}  // namespace lcsim::skrull
