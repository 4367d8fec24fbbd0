// Hydraulis strategy proposal (Sec. 7): the DP t[n][l] on a hand-worked dataset, against the literal recurrence of
// Eq. 4 on random small instances, dominance and rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "base/random.hpp"
#include "policies/hydraulis/proposal.hpp"

namespace lcsim::hydraulis {
namespace hydraulis_proposal_test {

constexpr double kInf = std::numeric_limits<double>::infinity();

SchemeInfo make_scheme(int tp, int pp, Tokens max_len, double a, double b, double c) {
  SchemeInfo s;
  s.scheme.tp = tp;
  s.scheme.pp = pp;
  s.max_len = max_len;
  s.util_len = 1;
  s.latency.a = a;
  s.latency.b = b;
  s.latency.c = c;
  return s;
}

// Hand-worked: length step 100, gpu step 0.5, N = 3 GPUs, one iteration.
//   data: ten sequences of 100 tokens (bucket (0, 100]), five of 200 (bucket (100, 200]).
//   A = <1,1>: N 1, MaxLen 100, T(x) = x / 120: bucket 1 costs 10 x 100/120 = 25/3; alone 0.83.
//   B = <2,1>: N 2, MaxLen 200, T(x) = x / 200: buckets cost 5 and 5; alone 0.5 and 1.
// L = 100: on A, 0.5 ceil((25/3) / (0.5 t)) <= 3 GPUs needs t >= 25/9; on B, ceil(10 / t) <= 3 needs t >= 10/3.
//   t[3][100] = 25/9 with d = 3 pipelines of A.
// L = 200: all on B, ceil(20 / t) <= 3: t >= 20/3 (d = 1.5); A for bucket 1 and B for bucket 2:
//   0.5 ceil(50 / (3t)) + ceil(10 / t) <= 3 first at t = 25/3. t[3][200] = 20/3 with 1.5 x B, rounded to 1 x B
//   (2 x B needs 4 GPUs; the GPU left over cannot host another B).
std::vector<Tokens> hand_worked_lengths() {
  std::vector<Tokens> lengths(10, 100);
  lengths.insert(lengths.end(), 5, 200);
  return lengths;
}

ProposalOptions hand_worked_options() {
  ProposalOptions options;
  options.length_step = 100;
  options.gpu_step = 0.5;
  return options;
}

TEST(HydraulisProposal, HandWorkedDataset) {
  const SchemeSpace space({make_scheme(1, 1, 100, 0, 1.0 / 120, 0), make_scheme(2, 1, 200, 0, 1.0 / 200, 0)}, 3, 8);
  const std::vector<Tokens> lengths = hand_worked_lengths();
  ProposalOptions options = hand_worked_options();
  options.precision = 1e-9;
  const Proposal p = propose_strategies(lengths, 1.0, space, options);
  ASSERT_EQ(p.relaxed.size(), 2u);
  EXPECT_EQ(p.relaxed[0].length, 100);
  EXPECT_NEAR(p.relaxed[0].latency, 25.0 / 9, 1e-8);
  ASSERT_EQ(p.relaxed[0].segments.size(), 1u);
  EXPECT_EQ(p.relaxed[0].segments[0].scheme, 0u);
  EXPECT_DOUBLE_EQ(p.relaxed[0].segments[0].pipelines, 3.0);
  EXPECT_EQ(p.relaxed[1].length, 200);
  EXPECT_NEAR(p.relaxed[1].latency, 20.0 / 3, 1e-8);
  ASSERT_EQ(p.relaxed[1].segments.size(), 1u);
  EXPECT_EQ(p.relaxed[1].segments[0].scheme, 1u);
  EXPECT_EQ(p.relaxed[1].segments[0].from, 0);
  EXPECT_DOUBLE_EQ(p.relaxed[1].segments[0].pipelines, 1.5);
  ASSERT_EQ(p.strategies.size(), 2u);
  EXPECT_EQ(p.strategies[0], make_strategy({{0, 3}}));
  EXPECT_EQ(p.strategies[1], make_strategy({{1, 1}}));
  EXPECT_EQ(p.longest_held, 200);
  // Per iteration: the same data over two iterations halves every latency and changes no strategy.
  const Proposal halved = propose_strategies(lengths, 2.0, space, options);
  EXPECT_NEAR(halved.relaxed[1].latency, 10.0 / 3, 1e-8);
  EXPECT_EQ(halved.strategies, p.strategies);
}

/// Eq. 4 as written (plus the one-sequence bound of proposal.hpp), on a grid of n and d in units of `step`:
/// t[n][l] = min(t[n - step][l], min_{k, l', d} max(t[n - d N_k][l - l'], W_k(l - l', l] / d, PP_k T_k(longest))).
std::vector<double> literal_recurrence(const std::vector<std::vector<Tokens>>& buckets, const SchemeSpace& space,
                                       double step) {
  const auto units = static_cast<int>(std::lround(space.total_gpus() / step));
  const std::size_t m = buckets.size();
  auto work = [&](std::size_t k, std::size_t from, std::size_t to) {  // buckets (from, to], 1-based
    double w = 0;
    for (std::size_t b = from; b < to; ++b)
      for (Tokens x : buckets[b]) w += space[k].seconds(x);
    return w;
  };
  std::vector<std::vector<double>> t(static_cast<std::size_t>(units) + 1, std::vector<double>(m + 1, kInf));
  for (auto& row : t) row[0] = 0;
  for (int n = 1; n <= units; ++n) {
    for (std::size_t l = 1; l <= m; ++l) {
      double best = t[static_cast<std::size_t>(n - 1)][l];
      const Tokens longest = *std::max_element(buckets[l - 1].begin(), buckets[l - 1].end());
      for (std::size_t k = 0; k < space.size(); ++k) {
        if (space[k].max_len < longest) continue;
        const double alone = space[k].scheme.pp * space[k].seconds(longest);
        const int width = space[k].gpus();
        for (std::size_t from = 0; from < l; ++from) {
          const double w = work(k, from, l);
          for (int d = 1; d * width <= n; ++d)
            best = std::min(best, std::max({t[static_cast<std::size_t>(n - d * width)][from], w / (d * step), alone}));
        }
      }
      t[static_cast<std::size_t>(n)][l] = best;
    }
  }
  return t[static_cast<std::size_t>(units)];
}

TEST(HydraulisProposal, AgreesWithTheLiteralRecurrence) {
  Rng rng(31);
  for (int round = 0; round < 60; ++round) {
    // 2..3 schemes with N in {1, 2, 4}, 1..4 non-empty buckets of 100 tokens, N = 4 GPUs, step 0.5.
    std::vector<SchemeInfo> schemes;
    const std::size_t kinds = 2 + rng.below(2);
    for (std::size_t k = 0; k < kinds; ++k) {
      const int tp = 1 << rng.below(3);
      const int pp = 1 + static_cast<int>(rng.below(2));
      if (tp * pp > 4) continue;
      schemes.push_back(make_scheme(tp, pp, 100 * static_cast<Tokens>(1 + rng.below(4)), 1e-6 * rng.uniform(),
                                    (0.5 + rng.uniform()) / (tp * pp * 100.0), 0.01 * rng.uniform()));
    }
    if (schemes.empty()) continue;
    schemes.front().max_len = 400;  // something holds every bucket
    const SchemeSpace space(schemes, 4, 8);
    const std::size_t m = 1 + rng.below(4);
    std::vector<std::vector<Tokens>> buckets(m);
    std::vector<Tokens> lengths;
    for (std::size_t b = 0; b < m; ++b) {
      for (std::uint64_t i = 0, n = 1 + rng.below(6); i < n; ++i) {
        const Tokens x = static_cast<Tokens>(100 * b + 1 + rng.below(100));
        buckets[b].push_back(x);
        lengths.push_back(x);
      }
    }
    ProposalOptions options;
    options.length_step = 100;
    options.gpu_step = 0.5;
    options.precision = 1e-7;
    const Proposal p = propose_strategies(lengths, 1.0, space, options);
    const std::vector<double> literal = literal_recurrence(buckets, space, 0.5);
    ASSERT_EQ(p.relaxed.size(), m);
    for (std::size_t b = 1; b <= m; ++b) {
      EXPECT_GE(p.relaxed[b - 1].latency, literal[b] * (1 - 1e-12)) << "round " << round << " L " << b;
      EXPECT_LE(p.relaxed[b - 1].latency, literal[b] * (1 + 1e-6)) << "round " << round << " L " << b;
      // The segments cover (0, L] and fit the GPUs.
      double gpus = 0;
      Tokens next = 0;
      for (const auto& seg : p.relaxed[b - 1].segments) {
        EXPECT_EQ(seg.from, next);
        next = seg.to;
        gpus += seg.pipelines * space[seg.scheme].gpus();
        EXPECT_EQ(std::fmod(seg.pipelines, 0.5), 0.0);
      }
      EXPECT_EQ(next, static_cast<Tokens>(100 * b));
      EXPECT_LE(gpus, 4 + 1e-9);
    }
    for (const auto& s : p.strategies) {
      EXPECT_LE(s.gpus(space), 4);
      EXPECT_GE(s.pipelines(), 1);
    }
  }
}

TEST(HydraulisProposal, DominatedSchemesAreDropped) {
  // <1,1> holds as much as <1,2> up to 1000 tokens and costs no more GPU-seconds nor time alone; <2,1> is faster
  // alone and holds more, so it stays; <4,1> costs more everywhere but holds 8000.
  const SchemeSpace space({make_scheme(1, 1, 1000, 0, 1e-3, 0.01), make_scheme(1, 2, 1000, 0, 6e-4, 0.01),
                           make_scheme(2, 1, 2000, 0, 6e-4, 0.01), make_scheme(4, 1, 8000, 0, 5e-4, 0.02)},
                          8, 8);
  EXPECT_EQ(undominated_schemes(space, 8000), (std::vector<std::size_t>{0, 2, 3}));
  // Data no longer than 1000 tokens: <1,1> holds it all, yet <2,1> and <4,1> stay: they run one long sequence
  // faster than <1,1> (6e-4 and 5e-4 s per token against 1e-3).
  EXPECT_EQ(undominated_schemes(space, 1000), (std::vector<std::size_t>{0, 2, 3}));
  // A twin of <1,1> is dropped, the first of the two kept.
  const SchemeSpace twins({make_scheme(1, 1, 1000, 0, 1e-3, 0.01), make_scheme(1, 1, 1000, 0, 1e-3, 0.01)}, 8, 8);
  EXPECT_EQ(undominated_schemes(twins, 1000), (std::vector<std::size_t>{0}));
}

TEST(HydraulisProposal, RoundingKeepsNearbyIntegerStrategiesThatFit) {
  // 16 GPUs: relaxed 0.4 x <8,1> + 7.6 x <1,1>. Floors and ceilings: <8,1> 0 or 1, <1,1> 7 or 8. Without <8,1>
  // nothing holds 5000 tokens; 1 + 7 (15 GPUs) is filled with the one <1,1> that fits, 1 + 8 is full: both give
  // 1x<8,1> + 8x<1,1>.
  const SchemeSpace space({make_scheme(1, 1, 1000, 0, 1e-3, 0), make_scheme(8, 1, 8000, 0, 2e-4, 0)}, 16, 8);
  const auto rounded = round_relaxed({{0, 7.6}, {1, 0.4}}, 5000, space);
  ASSERT_EQ(rounded.size(), 1u);
  EXPECT_EQ(rounded[0], make_strategy({{0, 8}, {1, 1}}));
  // Short data only: 0 x <8,1> is allowed too: 7 or 8 x <1,1> filled to 16 (a scheme the combination does not use
  // is not added), then 1x<8,1> + 8x<1,1> as above.
  const auto short_data = round_relaxed({{0, 7.6}, {1, 0.4}}, 800, space);
  ASSERT_EQ(short_data.size(), 2u);
  EXPECT_EQ(short_data[0], make_strategy({{0, 16}}));
  EXPECT_EQ(short_data[1], make_strategy({{0, 8}, {1, 1}}));
  // Integral counts are kept as they are.
  EXPECT_EQ(round_relaxed({{1, 2.0}}, 5000, space), (std::vector<Strategy>{make_strategy({{1, 2}})}));
}

TEST(HydraulisProposal, RoundingHoldsTheLongestWhenNoFloorOrCeilFits) {
  // 8 GPUs, relaxed 3.8 x <1,2> + 0.1 x <4,1>, as the LLaMA2-7B CommonCrawl 8-GPU proposal finds at 25K tokens.
  // Floors and ceilings: 3 x <1,2> + 1 x <4,1> needs 10 GPUs, 4 + 1 needs 12, and 3 or 4 x <1,2> alone holds no
  // 25K sequence. Problem 1 defines a strategy for every L, so the nearest one that holds it is kept: one <4,1>,
  // and the <1,2> floor reduced to what fits.
  const SchemeSpace space({make_scheme(1, 2, 15000, 0, 1e-4, 0), make_scheme(4, 1, 60000, 0, 5e-5, 0)}, 8, 8);
  const auto rounded = round_relaxed({{0, 3.8}, {1, 0.1}}, 25000, space);
  ASSERT_EQ(rounded.size(), 1u);
  EXPECT_EQ(rounded[0], make_strategy({{0, 2}, {1, 1}}));
  EXPECT_GE(rounded[0].max_len(space), 25000);
  // Where a floor / ceil combination fits, the repair is not used: 3.5 x <1,2> + 0.5 x <2,1> on 8 GPUs gives
  // 3 + 1 (8 GPUs), filled to nothing more.
  const SchemeSpace fits({make_scheme(1, 2, 15000, 0, 1e-4, 0), make_scheme(2, 1, 30000, 0, 5e-5, 0)}, 8, 8);
  EXPECT_EQ(round_relaxed({{0, 3.5}, {1, 0.5}}, 25000, fits), (std::vector<Strategy>{make_strategy({{0, 3}, {1, 1}})}));
}

TEST(HydraulisProposal, KeptRoundingsAreAmongAllRoundings) {
  // Three schemes on 16 GPUs and a spread of lengths.
  const SchemeSpace space({make_scheme(1, 1, 2000, 1e-9, 1e-3, 0.01), make_scheme(2, 1, 6000, 1e-9, 6e-4, 0.01),
                           make_scheme(8, 1, 20000, 1e-9, 2e-4, 0.02)},
                          16, 8);
  Rng rng(3);
  std::vector<Tokens> lengths(300);
  for (auto& l : lengths) l = 1 + static_cast<Tokens>(rng.below(rng.below(10) == 0 ? 20000 : 2000));
  // And a relaxed solution with two fractional schemes: every rounding is a candidate with "all", one with "best".
  const auto rounded =
      round_relaxed({{0, 7.6}, {1, 0.4}}, 800,
                    SchemeSpace({make_scheme(1, 1, 1000, 0, 1e-3, 0), make_scheme(8, 1, 8000, 0, 2e-4, 0)}, 16, 8));
  EXPECT_EQ(rounded.size(), 2u);
  ProposalOptions best_options;
  best_options.roundings_per_length = 1;
  ProposalOptions all_options;
  all_options.roundings_per_length = 0;
  const Proposal best = propose_strategies(lengths, 3.0, space, best_options);
  const Proposal all = propose_strategies(lengths, 3.0, space, all_options);
  EXPECT_GE(all.strategies.size(), best.strategies.size());
  EXPECT_LE(best.strategies.size(), best.relaxed.size());  // at most one per L
  for (const auto& s : best.strategies)
    EXPECT_NE(std::find(all.strategies.begin(), all.strategies.end(), s), all.strategies.end()) << s.describe(space);
  for (const auto& s : all.strategies) EXPECT_LE(s.gpus(space), 16);
}

TEST(HydraulisProposal, NothingHoldsTheData) {
  const SchemeSpace space({make_scheme(1, 1, 1000, 0, 1e-3, 0)}, 4, 8);
  const std::vector<Tokens> lengths{500, 2000};
  const Proposal p = propose_strategies(lengths, 1.0, space, {});
  // Only L up to the 500-token bucket is covered.
  ASSERT_EQ(p.relaxed.size(), 1u);
  EXPECT_EQ(p.longest_held, 512);
  EXPECT_FALSE(p.strategies.empty());
  EXPECT_TRUE(propose_strategies({}, 1.0, space, {}).strategies.empty());
}

// Sampled worlds share the nominal proposal through a memo: it must give propose_strategies()' result for the content
// asked, whatever was asked before (a space, lengths or iterations that differ is another proposal), and translate
// the strategies into a world's space by <TP, PP>, leaving out those with a scheme the world lacks.
TEST(HydraulisProposal, SharedProposalIsTheProposalOfItsContent) {
  const SchemeSpace space({make_scheme(1, 1, 100, 0, 1.0 / 120, 0), make_scheme(2, 1, 200, 0, 1.0 / 200, 0)}, 3, 8);
  const SchemeSpace slower({make_scheme(1, 1, 100, 0, 1.0 / 12, 0), make_scheme(2, 1, 200, 0, 1.0 / 200, 0)}, 3, 8);
  const std::vector<Tokens> lengths = hand_worked_lengths();
  const ProposalOptions options = hand_worked_options();
  for (int round = 0; round < 2; ++round) {  // the second round reads the memo
    for (const SchemeSpace* s : {&space, &slower})
      for (double iterations : {1.0, 3.0}) {
        const Proposal direct = propose_strategies(lengths, iterations, *s, options);
        const auto shared = shared_proposal(lengths, iterations, *s, options);
        EXPECT_EQ(shared->strategies, direct.strategies) << round << ' ' << iterations;
        EXPECT_EQ(shared->longest_held, direct.longest_held);
      }
  }
  const std::vector<Tokens> short_ones(15, 100);
  EXPECT_EQ(shared_proposal(short_ones, 1.0, space, options)->strategies,
            propose_strategies(short_ones, 1.0, space, options).strategies);

  // Into a space with the schemes in another order and without <1,1>: found by <TP, PP>, the <1,1> ones left out.
  const SchemeSpace other({make_scheme(2, 1, 150, 0, 1.0 / 200, 0), make_scheme(4, 1, 300, 0, 1.0 / 400, 0)}, 8, 8);
  const std::vector<Strategy> strategies{make_strategy({{0, 1}}), make_strategy({{1, 1}}),
                                         make_strategy({{0, 1}, {1, 1}})};
  const std::vector<Strategy> moved = strategies_in_space(strategies, space, other);
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(moved[0], make_strategy({{0, 1}}));
  EXPECT_EQ(strategies_in_space(strategies, space, space), strategies);
}

}  // namespace hydraulis_proposal_test
}  // namespace lcsim::hydraulis
