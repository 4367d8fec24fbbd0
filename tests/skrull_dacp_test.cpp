// Skrull's DACP (Algorithm 1), round-robin (Appendix B.2) and GDS (Algorithm 2) on hand-worked examples, plus
// the invariants every schedule must keep: each sequence placed once, Eq. 7 on every CP rank, Eq. 10 per
// micro-batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/random.hpp"
#include "policies/skrull/dacp.hpp"
#include "policies/skrull/gds.hpp"

namespace lcsim::skrull {
namespace skrull_dacp_test {

constexpr int kS = CpAssignment::kSharded;

std::vector<double> squares(const std::vector<Tokens>& lengths) {
  std::vector<double> out;
  for (const Tokens s : lengths) out.push_back(static_cast<double>(s) * static_cast<double>(s));
  return out;
}

// Eq. 7: local tokens + sharded tokens / N within C on every rank.
void expect_within_bucket(const std::vector<Tokens>& lengths, const std::vector<int>& ranks, double bucket, int cp) {
  ASSERT_EQ(ranks.size(), lengths.size());
  std::vector<double> used(static_cast<std::size_t>(cp), 0.0);
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    ASSERT_TRUE(ranks[i] == kS || (ranks[i] >= 0 && ranks[i] < cp)) << "rank " << ranks[i];
    if (ranks[i] == kS) {
      for (auto& u : used) u += static_cast<double>(lengths[i]) / cp;
    } else {
      used[static_cast<std::size_t>(ranks[i])] += static_cast<double>(lengths[i]);
    }
  }
  for (int r = 0; r < cp; ++r) EXPECT_LE(used[static_cast<std::size_t>(r)], bucket + 1e-9) << "rank " << r;
}

TEST(SkrullDacp, PlacesOnLeastLoadedRankWhenItFits) {
  // 3 -> rank 0 (loads equal), 4 -> rank 1 (load 0), 5 -> rank 0 (load 9 < 16, 7 tokens left).
  const std::vector<Tokens> lengths = {5, 3, 4};
  const auto result = dacp_schedule(lengths, squares(lengths), 10, 2, true);
  ASSERT_TRUE(result.scheduled);
  EXPECT_EQ(result.ranks, (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(result.rollbacks, 0);
}

TEST(SkrullDacp, FallsBackToLargestRemainingBucket) {
  // Loads are FLOPs, not tokens: 1 (100 FLOPs) -> r0; 5 -> r1 (load 0); 9: least-loaded r1 has 5 left, so the
  // rank with the largest remaining bucket (r0, 9 left) takes it whole.
  const std::vector<Tokens> lengths = {9, 1, 5};
  const std::vector<double> flops = {1, 100, 1};
  const auto result = dacp_schedule(lengths, flops, 10, 2, true);
  ASSERT_TRUE(result.scheduled);
  EXPECT_EQ(result.ranks, (std::vector<int>{0, 0, 1}));
}

TEST(SkrullDacp, RollBackShardsALocalSequenceOfTheFullestRank) {
  // 2 -> r0 (RB 8); 6 -> r1 (load 0, RB 4); 9: least-loaded r0 has 8 < 9, largest remaining r0 8 < 9, fullest r1
  // has 4 < 4.5 -> roll back r1's 6 (r1: 4 + 6 - 3 = 7, r0: 8 - 3 = 5); retry 9: least-loaded r1 (18 < 22) has
  // 7 < 9, largest r1 7 < 9, fullest r0 has 5 >= 4.5 -> shard.
  const std::vector<Tokens> lengths = {2, 9, 6};
  const auto result = dacp_schedule(lengths, squares(lengths), 10, 2, true);
  ASSERT_TRUE(result.scheduled);
  EXPECT_EQ(result.ranks, (std::vector<int>{0, kS, kS}));
  EXPECT_EQ(result.rollbacks, 1);
  expect_within_bucket(lengths, result.ranks, 10, 2);
}

TEST(SkrullDacp, RollBackCascadesUntilTheShardFits) {
  // [3, 8, 8], C = 10, N = 2: 3 -> r0, 8 -> r1; the second 8 fits nowhere and r1 (2 left) cannot take 4, so
  // r1's 8 is rolled back (r0 3 left, r1 6); still no room and r0 cannot take 4, so r0's 3 is rolled back
  // (4.5 left each); now the shard fits: everything ends up distributed after two roll-backs.
  const std::vector<Tokens> lengths = {3, 8, 8};
  const auto result = dacp_schedule(lengths, squares(lengths), 10, 2, true);
  ASSERT_TRUE(result.scheduled);
  EXPECT_EQ(result.ranks, (std::vector<int>{kS, kS, kS}));
  EXPECT_EQ(result.rollbacks, 2);
}

TEST(SkrullDacp, RollBackRepairsEveryRankItOverflows) {
  // [2, 9, 9, 9, 10], C = 10, N = 4: ranks hold 2, 9, 9, 9 (1 left on r1..r3); 10 fits nowhere and r1 cannot
  // take 2.5. Rolling back r1's 9 puts 2.25 on r2 and r3 (-1.25): each is repaired by distributing its 9
  // (3 roll-backs, r0 left with 1.25). 10 still needs 2.5 on r0, so r0's 2 goes too (4): all sharded, 0.25 left.
  const std::vector<Tokens> lengths = {2, 9, 9, 9, 10};
  const auto result = dacp_schedule(lengths, squares(lengths), 10, 4, true);
  ASSERT_TRUE(result.scheduled);
  EXPECT_EQ(result.ranks, (std::vector<int>{kS, kS, kS, kS, kS}));
  EXPECT_EQ(result.rollbacks, 4);
  expect_within_bucket(lengths, result.ranks, 10, 4);
}

TEST(SkrullDacp, SchedulesExactlyTheMicroBatchesThatFitTheGroup) {
  // Summing Eq. 7 over the ranks gives Sum <= C N, and all-sharded meets it with equality: DACP must succeed
  // whenever Sum <= C N and fail otherwise.
  Rng rng(5);
  for (int trial = 0; trial < 3000; ++trial) {
    const int cp = 1 + static_cast<int>(rng.below(8));
    const double bucket = 100;
    std::vector<Tokens> lengths(1 + rng.below(10));
    Tokens total = 0;
    for (auto& s : lengths) total += (s = 1 + static_cast<Tokens>(rng.below(static_cast<std::uint64_t>(60 * cp))));
    const auto result = dacp_schedule(lengths, squares(lengths), bucket, cp, true);
    EXPECT_EQ(result.scheduled, static_cast<double>(total) <= bucket * cp) << "trial " << trial;
    if (result.scheduled) expect_within_bucket(lengths, result.ranks, bucket, cp);
  }
}

TEST(SkrullDacp, WithoutRollBackTheOverflowIsReportedNotRepaired) {
  const std::vector<Tokens> lengths = {2, 9, 9, 9, 10};
  const auto result = dacp_schedule(lengths, squares(lengths), 10, 4, false);
  ASSERT_TRUE(result.scheduled);
  EXPECT_FALSE(result.within_bucket);
  EXPECT_EQ(result.ranks, (std::vector<int>{0, 1, 2, 3, kS}));
}

TEST(SkrullDacp, EmptyAndSingleSequenceMicroBatches) {
  EXPECT_TRUE(dacp_schedule({}, {}, 10, 4, true).ranks.empty());
  const std::vector<Tokens> one = {30};  // > C but its shard 7.5 fits
  const auto result = dacp_schedule(one, squares(one), 10, 4, true);
  EXPECT_EQ(result.ranks, (std::vector<int>{kS}));
  const std::vector<Tokens> too_long = {41};  // > C * N
  EXPECT_FALSE(dacp_schedule(too_long, squares(too_long), 10, 4, true).scheduled);
}

TEST(SkrullRoundRobin, TakesLargestRemainingBucketIgnoringLoad) {
  // 5 -> r0 (tie), 5 -> r1 (10 > 5), 4 -> r0 (tie 5/5 -> lowest), 4 -> r1.
  const std::vector<Tokens> lengths = {5, 5, 4, 4};
  const auto result = round_robin_schedule(lengths, 10, 2, true);
  EXPECT_EQ(result.ranks, (std::vector<int>{0, 1, 0, 1}));
}

TEST(SkrullRoundRobin, WalksAMicroBatchInDataOrder) {
  // GDS hands members over sorted by length ([2, 0, 1]); round-robin still visits 0, 1, 2: 5 -> r0, 5 -> r1,
  // 4 -> r0 (remaining 5 / 5, lowest index).
  const std::vector<Tokens> lengths = {5, 5, 4};
  const std::vector<double> flops = {25, 25, 16};
  const std::size_t members[] = {2, 0, 1};
  const auto placed = place_micro_batch(lengths, flops, members, {10, 2, true, CpPlacer::RoundRobin});
  EXPECT_EQ(placed.ranks, (std::vector<int>{0, 0, 1}));
}

TEST(SkrullDacp, RandomMicroBatchesKeepEquationSevenAndPlaceEverySequenceOnce) {
  Rng rng(7);
  int scheduled = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int cp = 1 << static_cast<int>(rng.below(4));
    const double bucket = 1000 + static_cast<double>(rng.below(4000));
    std::vector<Tokens> lengths(1 + rng.below(12));
    for (auto& s : lengths) s = 1 + static_cast<Tokens>(rng.below(static_cast<std::uint64_t>(bucket * 1.5)));
    for (const bool rr : {false, true}) {
      const auto result = rr ? round_robin_schedule(lengths, bucket, cp, true)
                             : dacp_schedule(lengths, squares(lengths), bucket, cp, true);
      if (!result.scheduled) continue;
      ++scheduled;
      ASSERT_TRUE(result.within_bucket);
      expect_within_bucket(lengths, result.ranks, bucket, cp);
    }
  }
  EXPECT_GT(scheduled, 1000);  // the generator must exercise the scheduled path, not only failures
}

// GDS as it was before the Eq. 10 pre-check: every micro-batch count from ceil(Sum / (C N)) up is cut and placed
// micro-batch by micro-batch until one fails. Kept verbatim as the reference the faster search must match.
RankSchedule reference_gds_schedule_rank(std::span<const Tokens> lengths, std::span<const double> flops,
                                         std::span<const std::size_t> subset, const GdsOptions& options) {
  RankSchedule out;
  if (subset.empty()) return out;
  std::vector<std::size_t> sorted(subset.begin(), subset.end());
  std::stable_sort(sorted.begin(), sorted.end(), [&](std::size_t a, std::size_t b) { return lengths[a] < lengths[b]; });
  const auto sum_tokens = [&](const std::vector<std::size_t>& members) {
    Tokens total = 0;
    for (const std::size_t m : members) total += lengths[m];
    return total;
  };
  const double group_capacity = options.bucket_tokens * options.cp;
  const auto try_cut = [&](std::size_t count) {
    std::vector<ScheduledMicroBatch> cut(count);
    bool within_bucket = true;
    for (std::size_t j = 0; j < count; ++j) {
      for (std::size_t pos = j; pos < sorted.size(); pos += count) cut[j].sequences.push_back(sorted[pos]);
      if (static_cast<double>(sum_tokens(cut[j].sequences)) > group_capacity) return false;
      CpAssignment placed = place_micro_batch(lengths, flops, cut[j].sequences, options);
      if (!placed.scheduled) return false;
      within_bucket = within_bucket && placed.within_bucket;
      cut[j].ranks = std::move(placed.ranks);
    }
    out.micro_batches = std::move(cut);
    out.within_bucket = within_bucket;
    return true;
  };
  const auto first =
      static_cast<std::size_t>(std::max(1.0, std::ceil(static_cast<double>(sum_tokens(sorted)) / group_capacity)));
  for (std::size_t count = std::min(first, sorted.size()); count <= sorted.size(); ++count) {
    ++out.attempts;
    if (try_cut(count)) return out;
  }
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

TEST(SkrullGds, SkippingCutsOverEquationTenFindsTheReferenceSchedule) {
  // Random ranks from easy (one cut fits) to hard (many counts fail, or a sequence longer than C N makes every
  // count fail), with repeated lengths (stable order), both placers, with and without roll-back.
  Rng rng(32);
  int retried = 0;
  int overflowing = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    GdsOptions options;
    options.cp = 1 << static_cast<int>(rng.below(4));
    options.bucket_tokens = static_cast<double>(1 + rng.below(64));
    options.rollback = rng.below(4) != 0;
    options.placer = rng.below(2) == 0 ? CpPlacer::Dacp : CpPlacer::RoundRobin;
    const auto longest =
        static_cast<std::uint64_t>(options.bucket_tokens * options.cp * (rng.below(3) == 0 ? 1.3 : 1.0));
    std::vector<Tokens> lengths(1 + rng.below(48));
    for (auto& s : lengths) s = 1 + static_cast<Tokens>(rng.below(rng.below(2) == 0 ? 4 : longest));
    std::vector<std::size_t> subset;
    for (std::size_t i = 0; i < lengths.size(); ++i)
      if (rng.below(5) != 0) subset.push_back(i);
    const auto flops = squares(lengths);
    const RankSchedule expected = reference_gds_schedule_rank(lengths, flops, subset, options);
    const RankSchedule actual = gds_schedule_rank(lengths, flops, subset, options);
    ASSERT_EQ(actual.attempts, expected.attempts) << "trial " << trial;
    ASSERT_EQ(actual.within_bucket, expected.within_bucket) << "trial " << trial;
    ASSERT_EQ(actual.micro_batches.size(), expected.micro_batches.size()) << "trial " << trial;
    for (std::size_t j = 0; j < actual.micro_batches.size(); ++j) {
      ASSERT_EQ(actual.micro_batches[j].sequences, expected.micro_batches[j].sequences) << "trial " << trial;
      ASSERT_EQ(actual.micro_batches[j].ranks, expected.micro_batches[j].ranks) << "trial " << trial;
    }
    retried += expected.attempts > 1 ? 1 : 0;
    overflowing += expected.within_bucket ? 0 : 1;
  }
  // The generator must reach the paths the pre-check changes: several counts tried, and no count fitting.
  EXPECT_GT(retried, 2000);
  EXPECT_GT(overflowing, 500);
}

TEST(SkrullGds, BinPackingBalancesFlops) {
  const std::vector<double> flops = {10, 9, 8, 7, 6, 5, 4, 3};
  const auto bins = binpack_by_flops(flops, 2);
  // LPT: 10->a, 9->b, 8->b(9<10), 7->a, 6->a? a=17,b=17 -> a; 5->b; 4->a? a=23,b=22 -> b; 3 -> a? a=23,b=26 -> a.
  EXPECT_EQ(bins[0], (std::vector<std::size_t>{0, 3, 4, 7}));
  EXPECT_EQ(bins[1], (std::vector<std::size_t>{1, 2, 5, 6}));
}

TEST(SkrullGds, BinPackingMatchesTheLightestRankScan) {
  // The heap must pick what a scan of every rank picks: the lightest, ties to the lowest index. Small integer
  // FLOPs make many ties; the scan is the definition.
  Rng rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const int ranks = 1 + static_cast<int>(rng.below(12));
    std::vector<double> flops(rng.below(60));
    for (auto& f : flops) f = static_cast<double>(1 + rng.below(6));
    std::vector<std::size_t> order(flops.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return flops[a] > flops[b]; });
    std::vector<std::vector<std::size_t>> expected(static_cast<std::size_t>(ranks));
    std::vector<double> load(static_cast<std::size_t>(ranks), 0.0);
    for (const std::size_t seq : order) {
      const auto r = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
      expected[r].push_back(seq);
      load[r] += flops[seq];
    }
    for (auto& bin : expected) std::sort(bin.begin(), bin.end());
    EXPECT_EQ(binpack_by_flops(flops, ranks), expected) << "trial " << trial;
  }
}

TEST(SkrullGds, InterleavedCutWithFewestMicroBatches) {
  // Sum 36 over C * N = 20 -> first try 2 micro-batches: [1,3,5,7] (16) and [2,4,6,8] (20, placed after three
  // roll-backs as fully sharded).
  const std::vector<Tokens> lengths = {8, 7, 6, 5, 4, 3, 2, 1};
  const auto flops = squares(lengths);
  std::vector<std::size_t> subset(lengths.size());
  std::iota(subset.begin(), subset.end(), std::size_t{0});
  const auto schedule = gds_schedule_rank(lengths, flops, subset, {10, 2, true, CpPlacer::Dacp});
  ASSERT_EQ(schedule.micro_batches.size(), 2U);
  EXPECT_EQ(schedule.attempts, 1);
  EXPECT_EQ(schedule.micro_batches[0].sequences, (std::vector<std::size_t>{7, 5, 3, 1}));  // lengths 1,3,5,7
  EXPECT_EQ(schedule.micro_batches[0].ranks, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(schedule.micro_batches[1].sequences, (std::vector<std::size_t>{6, 4, 2, 0}));  // lengths 2,4,6,8
  EXPECT_EQ(schedule.micro_batches[1].ranks, (std::vector<int>{kS, kS, kS, kS}));
  EXPECT_EQ(schedule.rollbacks, 3);
}

TEST(SkrullGds, RetriesWithOneMoreMicroBatchWhenACutOverloadsTheGroup) {
  // Sum 40 = C N * 2 -> first try 2 micro-batches: [2, 20] holds 22 > 20 (Eq. 10), so the rank retries with 3.
  const std::vector<Tokens> lengths = {20, 18, 2};
  std::vector<std::size_t> subset = {0, 1, 2};
  const auto schedule = gds_schedule_rank(lengths, squares(lengths), subset, {10, 2, true, CpPlacer::Dacp});
  EXPECT_EQ(schedule.attempts, 2);
  ASSERT_EQ(schedule.micro_batches.size(), 3U);
  EXPECT_TRUE(schedule.within_bucket);
}

TEST(SkrullGds, SequenceLongerThanTheGroupIsReportedOutsideTheBucket) {
  const std::vector<Tokens> lengths = {5, 50};
  std::vector<std::size_t> subset = {0, 1};
  const auto schedule = gds_schedule_rank(lengths, squares(lengths), subset, {10, 4, true, CpPlacer::Dacp});
  EXPECT_FALSE(schedule.within_bucket);
  ASSERT_EQ(schedule.micro_batches.size(), 2U);
  EXPECT_EQ(schedule.micro_batches[1].ranks, (std::vector<int>{kS}));
}

TEST(SkrullGds, RandomRanksRespectEquationTenAndPlaceEachSequenceOnce) {
  Rng rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const int cp = 1 << static_cast<int>(rng.below(4));
    const double bucket = 2000 + static_cast<double>(rng.below(8000));
    std::vector<Tokens> lengths(1 + rng.below(64));
    for (auto& s : lengths) s = 1 + static_cast<Tokens>(rng.below(static_cast<std::uint64_t>(bucket * cp)));
    std::vector<std::size_t> subset(lengths.size());
    std::iota(subset.begin(), subset.end(), std::size_t{0});
    const auto schedule = gds_schedule_rank(lengths, squares(lengths), subset, {bucket, cp, true, CpPlacer::Dacp});
    ASSERT_TRUE(schedule.within_bucket);
    std::vector<int> seen(lengths.size(), 0);
    for (const auto& mb : schedule.micro_batches) {
      Tokens total = 0;
      std::vector<Tokens> mb_lengths;
      for (const auto i : mb.sequences) {
        ++seen[i];
        total += lengths[i];
        mb_lengths.push_back(lengths[i]);
      }
      EXPECT_LE(static_cast<double>(total), bucket * cp);
      expect_within_bucket(mb_lengths, mb.ranks, bucket, cp);
    }
    for (const int count : seen) EXPECT_EQ(count, 1);
  }
}

}  // namespace skrull_dacp_test
}  // namespace lcsim::skrull
