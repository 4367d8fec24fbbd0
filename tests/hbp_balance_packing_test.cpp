// HBP balance packing (Algorithm 2, Appendix J): GroupData, GreedyFill, attention balance sort, batching, shuffle
// across groups, curriculum order.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "base/errors.hpp"
#include "policies/hbp/balance_packing.hpp"

namespace lcsim::hbp {
namespace hbp_balance_packing_test {

std::vector<Sequence> seqs(std::int64_t first_id, std::vector<Tokens> tokens) {
  std::vector<Sequence> out;
  for (std::size_t i = 0; i < tokens.size(); ++i) out.push_back({first_id + static_cast<std::int64_t>(i), tokens[i]});
  return out;
}

std::vector<Tokens> lengths_of(const std::vector<Sequence>& sequences) {
  std::vector<Tokens> out;
  for (const auto& s : sequences) out.push_back(s.tokens);
  return out;
}

/// A Tulu3 + LongCite-like window: mostly short chats, a few long documents.
std::vector<Sequence> mixed_window(std::size_t count, std::uint64_t seed) {
  const std::vector<MixComponent> mix = {{&named_distribution("tulu3"), 0.97}, {&named_distribution("longcite"), 0.03}};
  return sample_dataset("mix", mix, count, seed).sequences();
}

TEST(HbpGroupData, SplitsByHalfOpenIntervalsInInputOrder) {
  const std::vector<Tokens> lengths = {4, 8, 16};
  const auto groups = group_data(seqs(0, {5, 3, 16, 4, 9, 8, 1}), lengths);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(lengths_of(groups[0]), (std::vector<Tokens>{3, 4, 1}));  // (0, 4]
  EXPECT_EQ(lengths_of(groups[1]), (std::vector<Tokens>{5, 8}));     // (4, 8]
  EXPECT_EQ(lengths_of(groups[2]), (std::vector<Tokens>{16, 9}));    // (8, 16]
  EXPECT_EQ(groups[2][0].id, 2);
}

TEST(HbpGroupData, RejectsSequencesLongerThanTheLastGroup) {
  const std::vector<Tokens> lengths = {4, 8};
  try {
    group_data(seqs(40, {3, 9}), lengths);
    FAIL() << "expected a PlanningError";
  } catch (const PlanningError& e) {
    EXPECT_NE(std::string(e.what()).find("sequence 41 has 9 tokens"), std::string::npos) << e.what();
  }
}

TEST(HbpGreedyFill, FillsEachPackFromTheNearestSmallerGroupFirstInOrder) {
  // Packs of capacity 16 holding 10 and 12 tokens; D2 = [7, 5, 3], D1 = [2, 1, 1].
  // Pack 1 (6 free): D2 7 no, 5 yes (1 free), 3 no; D1 2 no, 1 yes (0 free).
  // Pack 2 (4 free): D2 7 no, 3 yes (1 free); D1 2 no, the remaining 1 yes.
  std::vector<Pack> packs = {seqs(100, {10}), seqs(101, {12})};
  std::vector<Sequence> d2 = seqs(20, {7, 5, 3});
  std::vector<Sequence> d1 = seqs(10, {2, 1, 1});
  std::vector<std::vector<Sequence>*> sources = {&d2, &d1};
  greedy_fill(packs, 16, sources);
  EXPECT_EQ(lengths_of(packs[0]), (std::vector<Tokens>{10, 5, 1}));
  EXPECT_EQ(packs[0][2].id, 11);
  EXPECT_EQ(lengths_of(packs[1]), (std::vector<Tokens>{12, 3, 1}));
  EXPECT_EQ(packs[1][2].id, 12);
  EXPECT_EQ(lengths_of(d2), (std::vector<Tokens>{7}));
  EXPECT_EQ(lengths_of(d1), (std::vector<Tokens>{2}));
}

TEST(HbpGreedyFill, MatchesThePapersLinearScan) {
  // The min-tree must take exactly what Algorithm 6's scan takes, on random data.
  Rng rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    const Tokens capacity = 64 + static_cast<Tokens>(rng.below(64));
    std::vector<Pack> packs;
    for (int p = 0; p < 20; ++p) packs.push_back(seqs(1000 + p, {1 + static_cast<Tokens>(rng.below(64))}));
    std::vector<std::vector<Sequence>> sources(3);
    std::int64_t id = 0;
    for (auto& source : sources)
      for (int k = 0; k < 30; ++k) source.push_back({id++, 1 + static_cast<Tokens>(rng.below(40))});

    std::vector<Pack> expected_packs = packs;
    auto expected_sources = sources;
    for (auto& pack : expected_packs) {
      Tokens held = baselines::pack_tokens(pack);
      for (auto& source : expected_sources) {
        for (auto it = source.begin(); it != source.end();) {
          if (held + it->tokens <= capacity) {
            held += it->tokens;
            pack.push_back(*it);
            it = source.erase(it);
          } else {
            ++it;
          }
        }
      }
    }
    std::vector<std::vector<Sequence>*> pointers;
    for (auto& source : sources) pointers.push_back(&source);
    greedy_fill(packs, capacity, pointers);
    ASSERT_EQ(packs, expected_packs) << "trial " << trial;
    ASSERT_EQ(sources, expected_sources) << "trial " << trial;
  }
}

TEST(HbpAttentionSort, SortsBySumOfSquaredLengthsStably) {
  // Costs: 4^2 + 4^2 = 32; 8 x 1 = 8; 6^2 = 36; 5^2 + 1 = 26; 2^2 x 2 = 8 (ties with the second, keeps order).
  std::vector<Pack> packs = {seqs(0, {4, 4}), seqs(10, {1, 1, 1, 1, 1, 1, 1, 1}), seqs(20, {6}), seqs(30, {5, 1}),
                             seqs(40, {2, 2})};
  EXPECT_DOUBLE_EQ(attention_cost(packs[3]), 26.0);
  attention_balance_sort(packs);
  std::vector<std::int64_t> first_ids;
  for (const auto& p : packs) first_ids.push_back(p.front().id);
  EXPECT_EQ(first_ids, (std::vector<std::int64_t>{10, 40, 30, 0, 20}));
}

TEST(HbpBalancePack, PacksEverySampleOnceWithinItsGroupLength) {
  const auto window = mixed_window(20000, 3);
  const std::vector<Tokens> lengths = {8 * kKiloTokens, 16 * kKiloTokens, 128 * kKiloTokens};
  Rng rng(11);
  const auto groups = balance_pack(window, lengths, rng);
  ASSERT_EQ(groups.size(), 3u);
  std::map<std::int64_t, int> seen;
  // The 16K group may end empty: GreedyFill hands its few samples to the 128K packs first.
  EXPECT_FALSE(groups[0].empty());
  EXPECT_FALSE(groups[2].empty());
  for (std::size_t i = 0; i < groups.size(); ++i) {
    for (const auto& pack : groups[i]) {
      ASSERT_FALSE(pack.empty());
      EXPECT_LE(baselines::pack_tokens(pack), lengths[i]) << "group " << i;
      for (const auto& s : pack) ++seen[s.id];
    }
  }
  ASSERT_EQ(seen.size(), window.size());
  for (const auto& s : window) EXPECT_EQ(seen[s.id], 1) << "sequence " << s.id;
}

TEST(HbpBalancePack, GreedyFillOnlyMovesSamplesIntoLargerGroups) {
  const auto window = mixed_window(20000, 4);
  const std::vector<Tokens> lengths = {4 * kKiloTokens, 16 * kKiloTokens, 128 * kKiloTokens};
  const auto home = group_data(window, lengths);
  std::map<std::int64_t, std::size_t> home_group;
  for (std::size_t i = 0; i < home.size(); ++i)
    for (const auto& s : home[i]) home_group[s.id] = i;

  Rng rng(12);
  const auto groups = balance_pack(window, lengths, rng);
  std::size_t moved = 0;
  for (std::size_t i = 0; i < groups.size(); ++i)
    for (const auto& pack : groups[i])
      for (const auto& s : pack) {
        ASSERT_GE(i, home_group.at(s.id)) << "sequence " << s.id << " moved to a smaller group";
        moved += i > home_group.at(s.id);
      }
  // The long group cannot fill its packs alone: GreedyFill moved short samples up.
  EXPECT_GT(moved, 0u);
  // Filling adds to existing packs only: the long group has exactly as many packs as ISF made of D_3 alone.
  Rng isf_rng(12);
  Rng group_rng = isf_rng.split(2);
  EXPECT_EQ(groups[2].size(), baselines::pack_isf(home[2], lengths[2], group_rng).size());
}

TEST(HbpBalancePack, BalanceSortOrdersEachGroupByAttentionCost) {
  const auto window = mixed_window(5000, 5);
  const std::vector<Tokens> lengths = {8 * kKiloTokens, 128 * kKiloTokens};
  Rng sorted_rng(1), shuffled_rng(1);
  const auto sorted = balance_pack(window, lengths, sorted_rng);
  BalancePackingOptions no_sort;
  no_sort.balance_sort = false;
  const auto shuffled = balance_pack(window, lengths, shuffled_rng, no_sort);
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    ASSERT_EQ(sorted[i].size(), shuffled[i].size());
    EXPECT_TRUE(std::is_sorted(sorted[i].begin(), sorted[i].end(),
                               [](const Pack& a, const Pack& b) { return attention_cost(a) < attention_cost(b); }))
        << "group " << i;
  }
  EXPECT_FALSE(std::is_sorted(shuffled[0].begin(), shuffled[0].end(),
                              [](const Pack& a, const Pack& b) { return attention_cost(a) < attention_cost(b); }));
}

TEST(HbpBalancePack, IsDeterministicForASeed) {
  const auto window = mixed_window(5000, 6);
  const std::vector<Tokens> lengths = {8 * kKiloTokens, 16 * kKiloTokens, 128 * kKiloTokens};
  Rng a(21), b(21), c(22);
  const auto first = balance_pack(window, lengths, a);
  EXPECT_EQ(first, balance_pack(window, lengths, b));
  EXPECT_NE(first, balance_pack(window, lengths, c));
}

TEST(HbpMakeBatches, CutsEachGroupInOrderAndShufflesAcrossGroups) {
  std::vector<std::vector<Pack>> groups(2);
  for (int p = 0; p < 7; ++p) groups[0].push_back(seqs(p, {1}));
  for (int p = 0; p < 3; ++p) groups[1].push_back(seqs(100 + p, {9}));
  const std::vector<std::size_t> sizes = {3, 2};
  Rng rng(8), again(8);
  const auto batches = make_batches(groups, sizes, rng);
  EXPECT_EQ(batches.size(), 5u);  // 3 + 3 + 1 from group 0, 2 + 1 from group 1
  std::map<std::size_t, std::vector<std::int64_t>> firsts;
  for (const auto& batch : batches) {
    ASSERT_FALSE(batch.packs.empty());
    for (std::size_t k = 1; k < batch.packs.size(); ++k)  // consecutive packs of the group, in order
      EXPECT_EQ(batch.packs[k].front().id, batch.packs[k - 1].front().id + 1);
    firsts[batch.group].push_back(batch.packs.front().front().id);
  }
  std::sort(firsts[0].begin(), firsts[0].end());
  std::sort(firsts[1].begin(), firsts[1].end());
  EXPECT_EQ(firsts[0], (std::vector<std::int64_t>{0, 3, 6}));
  EXPECT_EQ(firsts[1], (std::vector<std::int64_t>{100, 102}));
  const auto repeated = make_batches(groups, sizes, again);
  ASSERT_EQ(repeated.size(), batches.size());
  for (std::size_t b = 0; b < batches.size(); ++b) EXPECT_EQ(repeated[b].packs, batches[b].packs);
}

TEST(HbpCurriculum, PutsTheFirstShortBatchesFirstAndKeepsTheRestInOrder) {
  // Groups in order: 2 1 0 2 0 1 0; short groups are 0 and 1.
  std::vector<PackBatch> batches;
  const std::size_t order[] = {2, 1, 0, 2, 0, 1, 0};
  for (std::size_t k = 0; k < std::size(order); ++k)
    batches.push_back(PackBatch{order[k], {seqs(static_cast<std::int64_t>(k), {1})}});
  EXPECT_EQ(apply_curriculum(batches, 3, 2), 3u);
  std::vector<std::int64_t> ids;
  for (const auto& b : batches) ids.push_back(b.packs.front().front().id);
  EXPECT_EQ(ids, (std::vector<std::int64_t>{1, 2, 4, 0, 3, 5, 6}));
  // More curriculum iterations than short batches: all short ones first.
  EXPECT_EQ(apply_curriculum(batches, 100, 1), 3u);
  EXPECT_EQ(batches[0].group, 0u);
  EXPECT_EQ(batches[2].group, 0u);
  EXPECT_NE(batches[3].group, 0u);
}

}  // namespace hbp_balance_packing_test
}  // namespace lcsim::hbp
