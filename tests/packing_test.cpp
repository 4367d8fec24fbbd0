#include "policies/baselines/packing_algorithms.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <span>

#include "base/errors.hpp"

namespace lcsim::baselines {
namespace packing_test {

std::vector<Sequence> random_sequences(std::size_t count, Tokens longest, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<Sequence> sequences;
  for (std::size_t i = 0; i < count; ++i)
    sequences.push_back(
        {static_cast<std::int64_t>(1000 + i), 1 + static_cast<Tokens>(rng.below(static_cast<std::uint64_t>(longest)))});
  return sequences;
}

std::vector<Sequence> sequences_of(std::vector<Tokens> tokens) {
  std::vector<Sequence> sequences;
  for (std::size_t i = 0; i < tokens.size(); ++i) sequences.push_back({static_cast<std::int64_t>(i), tokens[i]});
  return sequences;
}

std::vector<std::vector<Tokens>> pack_lengths(const std::vector<Pack>& packs) {
  std::vector<std::vector<Tokens>> result;
  for (const auto& p : packs) {
    result.emplace_back();
    for (const auto& s : p) result.back().push_back(s.tokens);
  }
  return result;
}

const PackingAlgorithm kAll[] = {PackingAlgorithm::Isf, PackingAlgorithm::Ffd, PackingAlgorithm::Ffs,
                                 PackingAlgorithm::Bfs, PackingAlgorithm::Random};

TEST(PackingAlgorithms, EverySequenceOnceAndNoPackOverCapacity) {
  for (auto algorithm : kAll) {
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
      const Tokens capacity = 4096;
      const auto sequences = random_sequences(300, capacity, seed);
      Rng rng(seed * 7);
      const auto packs = pack_sequences(algorithm, sequences, capacity, rng);
      std::map<std::int64_t, int> seen;
      for (const auto& pack : packs) {
        EXPECT_FALSE(pack.empty()) << to_string(algorithm);
        EXPECT_LE(pack_tokens(pack), capacity) << to_string(algorithm);
        for (const auto& s : pack) ++seen[s.id];
      }
      ASSERT_EQ(seen.size(), sequences.size()) << to_string(algorithm);
      for (const auto& s : sequences) EXPECT_EQ(seen[s.id], 1) << to_string(algorithm) << " sequence " << s.id;
    }
  }
}

TEST(PackingAlgorithms, FirstFitDecreasingKnownInstance) {
  // Sorted 8 7 5 4 3 2 1 into packs of 10: 8 -> A, 7 -> B, 5 -> C, 4 -> C, 3 -> B, 2 -> A, 1 -> C: three full
  // packs, the optimum for 30 tokens.
  const auto packs = pack_ffd(sequences_of({2, 5, 4, 7, 1, 3, 8}), 10);
  EXPECT_EQ(pack_lengths(packs), (std::vector<std::vector<Tokens>>{{8, 2}, {7, 3}, {5, 4, 1}}));
}

TEST(PackingAlgorithms, FirstFitDecreasingBeatsNextFitOnAlternatingSizes) {
  // 6 4 6 4 ... in random order leaves next fit with many 6-only packs; FFD pairs every 6 with a 4.
  std::vector<Tokens> tokens;
  for (int i = 0; i < 20; ++i) tokens.push_back(i % 2 == 0 ? 6 : 4);
  const auto sequences = sequences_of(tokens);
  EXPECT_EQ(pack_ffd(sequences, 10).size(), 10u);
  Rng rng(3);
  EXPECT_GT(pack_random(sequences, 10, rng).size(), 10u);
}

TEST(PackingAlgorithms, AnyFitLeavesAtMostOnePackHalfEmpty) {
  // First fit and best fit only open a pack when nothing open fits, so two packs at most half full cannot
  // both exist; next fit only guarantees it for neighbouring packs.
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    const auto sequences = random_sequences(200, 1000, seed);
    Rng rng(seed);
    for (const auto& packs :
         {pack_ffd(sequences, 1000), pack_ffs(sequences, 1000, rng), pack_bfs(sequences, 1000, rng)}) {
      const auto half_empty =
          std::count_if(packs.begin(), packs.end(), [](const Pack& p) { return pack_tokens(p) <= 500; });
      EXPECT_LE(half_empty, 1);
    }
    const auto next = pack_random(sequences, 1000, rng);
    for (std::size_t i = 1; i < next.size(); ++i) EXPECT_GT(pack_tokens(next[i - 1]) + pack_tokens(next[i]), 1000);
  }
}

TEST(PackingAlgorithms, FitRulesInGivenOrder) {
  // 6 and 7 open two packs. The 3 joins the earliest that fits (first fit: the 6), the tightest (best fit: the
  // 7, free 3 < 4) or the only open one (next fit: the 7); the 4 then fits only best fit's 6.
  const auto order = sequences_of({6, 7, 3, 4});
  EXPECT_EQ(pack_lengths(first_fit_in_order(order, 10)), (std::vector<std::vector<Tokens>>{{6, 3}, {7}, {4}}));
  EXPECT_EQ(pack_lengths(best_fit_in_order(order, 10)), (std::vector<std::vector<Tokens>>{{6, 4}, {7, 3}}));
  EXPECT_EQ(pack_lengths(next_fit_in_order(order, 10)), (std::vector<std::vector<Tokens>>{{6}, {7, 3}, {4}}));
  // Ties in free space go to the earlier pack.
  EXPECT_EQ(pack_lengths(best_fit_in_order(sequences_of({5, 5, 5, 5}), 10)),
            (std::vector<std::vector<Tokens>>{{5, 5}, {5, 5}}));
  EXPECT_EQ(pack_lengths(best_fit_in_order(sequences_of({7, 7, 2}), 10)),
            (std::vector<std::vector<Tokens>>{{7, 2}, {7}}));
}

TEST(PackingAlgorithms, IsfWithOneRoundIsRandomNextFit) {
  const auto sequences = random_sequences(100, 512, 5);
  Rng a(11), b(11);
  EXPECT_EQ(pack_isf(sequences, 512, a, IsfOptions{1, 0.99}), pack_random(sequences, 512, b));
}

TEST(PackingAlgorithms, IsfFillsBetterThanOneRandomRound) {
  // 3s and 7s: a random next-fit round leaves many packs short of 10; ISF keeps the full ones and re-samples
  // the rest.
  std::vector<Tokens> tokens;
  for (int i = 0; i < 200; ++i) tokens.push_back(i % 2 == 0 ? 3 : 7);
  const auto sequences = sequences_of(tokens);
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    Rng a(seed), b(seed);
    const auto random = pack_random(sequences, 10, a);
    const auto isf = pack_isf(sequences, 10, b, IsfOptions{30, 1.0});
    EXPECT_LT(isf.size(), random.size());
    // Kept packs come first and are all full.
    std::size_t full_prefix = 0;
    while (full_prefix < isf.size() && pack_tokens(isf[full_prefix]) == 10) ++full_prefix;
    EXPECT_GE(full_prefix, isf.size() * 8 / 10);
  }
}

/// ISF written the plain way (OmniBal's rounds over per-pack vectors and Rng::shuffle), against which the flat,
/// prefetching implementation must give the very same packs and leave the Rng in the same state.
std::vector<Pack> reference_isf(std::span<const Sequence> sequences, Tokens capacity, Rng& rng, IsfOptions options) {
  const auto shuffled_next_fit = [&](std::vector<Sequence> order) {
    rng.shuffle(order);
    return next_fit_in_order(order, capacity);
  };
  std::vector<Pack> kept;
  std::vector<Pack> round = shuffled_next_fit({sequences.begin(), sequences.end()});
  for (int i = 1; i < options.iterations; ++i) {
    std::vector<Sequence> pending;
    for (auto& pack : round) {
      if (static_cast<double>(pack_tokens(pack)) >= options.fill_threshold * static_cast<double>(capacity))
        kept.push_back(std::move(pack));
      else
        pending.insert(pending.end(), pack.begin(), pack.end());
    }
    round = shuffled_next_fit(pending);
    if (pending.empty()) break;
  }
  kept.insert(kept.end(), round.begin(), round.end());
  return kept;
}

TEST(PackingAlgorithms, IsfAndRandomMatchTheirPlainReference) {
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    auto narrow = random_sequences(3000, 4096, seed);
    for (std::size_t i = 0; i < narrow.size(); i += 97) narrow[i].tokens = 0;  // empty samples join any pack
    auto wide = narrow;  // ids beyond 32 bits and negative ones take the other item type
    for (auto& s : wide) s.id = s.id * 1000003 - (std::int64_t{1} << 40);
    for (const auto& sequences : {narrow, wide}) {
      for (const IsfOptions options :
           {IsfOptions{1, 0.99}, IsfOptions{4, 0.95}, IsfOptions{10, 0.99}, IsfOptions{30, 1.0}}) {
        Rng a(seed), b(seed);
        EXPECT_EQ(pack_isf(sequences, 4096, a, options), reference_isf(sequences, 4096, b, options))
            << "seed " << seed << ", " << options.iterations << " rounds";
        EXPECT_EQ(a.next(), b.next());
      }
      Rng a(seed), b(seed);
      EXPECT_EQ(pack_random(sequences, 4096, a), reference_isf(sequences, 4096, b, IsfOptions{1, 0.99}));
      EXPECT_EQ(a.next(), b.next());
    }
  }
}

TEST(PackingAlgorithms, DeterministicPerSeed) {
  const auto sequences = random_sequences(200, 2048, 9);
  for (auto algorithm : kAll) {
    Rng a(42), b(42), c(43);
    const auto first = pack_sequences(algorithm, sequences, 2048, a);
    EXPECT_EQ(first, pack_sequences(algorithm, sequences, 2048, b)) << to_string(algorithm);
    if (algorithm != PackingAlgorithm::Ffd) {
      EXPECT_NE(first, pack_sequences(algorithm, sequences, 2048, c)) << to_string(algorithm);
    }
  }
}

TEST(PackingAlgorithms, TooLongSequenceIsAnErrorNotATruncation) {
  Rng rng(1);
  try {
    pack_ffd(sequences_of({5, 11, 3}), 10);
    FAIL() << "expected PlanningError";
  } catch (const PlanningError& e) {
    EXPECT_NE(std::string(e.what()).find("sequence 1 has 11 tokens"), std::string::npos) << e.what();
  }
  for (auto algorithm : kAll) EXPECT_THROW(pack_sequences(algorithm, sequences_of({11}), 10, rng), PlanningError);
  EXPECT_TRUE(pack_sequences(PackingAlgorithm::Isf, {}, 10, rng).empty());
}

TEST(PackingAlgorithms, NamesRoundTrip) {
  for (auto algorithm : kAll) EXPECT_EQ(packing_algorithm_from_string(to_string(algorithm)), algorithm);
  EXPECT_FALSE(packing_algorithm_from_string("spfhp").has_value());
}

}  // namespace packing_test
}  // namespace lcsim::baselines
