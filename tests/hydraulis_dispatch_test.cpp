// Hydraulis stage 1: dispatch across pipelines (Eq. 2-3, Algorithm 1).
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "base/random.hpp"
#include "policies/hydraulis/dispatch.hpp"

namespace lcsim::hydraulis {
namespace {

/// A scheme whose micro-batch costs c + b l (a = 0) -- easy to follow by hand.
SchemeInfo linear(int tp, int pp, Tokens max_len, double b, double c = 0) {
  SchemeInfo s;
  s.scheme.tp = tp;
  s.scheme.pp = pp;
  s.max_len = max_len;
  s.util_len = 1;
  s.latency.b = b;
  s.latency.c = c;
  return s;
}

TEST(HydraulisDispatch, LowerBoundOfEq2) {
  const SchemeInfo s = linear(1, 2, 1000, 1e-3, 0.1);
  const std::vector<Tokens> lengths{300, 500};
  // sum of work 0.8, + c, + (PP - 1) (work of the longest + c) = 0.8 + 0.1 + 0.6
  EXPECT_DOUBLE_EQ(dispatch_lower_bound(lengths, s), 1.5);
  EXPECT_EQ(dispatch_lower_bound({}, s), 0.0);
}

TEST(HydraulisDispatch, SyncCountsForEveryPipeline) {
  // As HandWorkedBatch, but P1 pays 0.5 s of sync after propagation: it takes 400 alone (2 x 0.4 + 0.5 = 1.3)
  // and P0 the rest, 800 + 400 + 200 = 1.4 (P1 with 400 + 200 would reach 2 x 0.6 + 0.5 = 1.7).
  SchemeInfo p0 = linear(2, 1, 1000, 1e-3);
  SchemeInfo p1 = linear(1, 1, 500, 2e-3);
  p1.sync = 0.5;
  const SchemeSpace space({p0, p1}, 3, 8);
  const std::vector<Tokens> lengths{400, 800, 200, 400};
  const DispatchResult r = dispatch(lengths, std::vector<std::size_t>{0, 1}, space, 100, 7);
  EXPECT_DOUBLE_EQ(r.objective, 1.4);
  EXPECT_EQ(r.per_pipeline[1].size(), 1u);
  EXPECT_DOUBLE_EQ(dispatch_lower_bound({}, p1), 0.5);
  // Nothing to dispatch: the sync alone.
  EXPECT_DOUBLE_EQ(dispatch({}, std::vector<std::size_t>{0, 1}, space, 5, 1).objective, 0.5);
}

TEST(HydraulisDispatch, HandWorkedBatch) {
  // P0 = <2,1> holds 1000 tokens, P1 = <1,1> holds 500 at twice the cost per token. 800 fits only P0; then the
  // greedy balances the rest: P0 {800, 400} = 1.2, P1 {400, 200} = 2 x 0.6 = 1.2, the optimum of Eq. 3.
  const SchemeSpace space({linear(2, 1, 1000, 1e-3), linear(1, 1, 500, 2e-3)}, 3, 8);
  const std::vector<Tokens> lengths{400, 800, 200, 400};
  const std::vector<std::size_t> pipelines{0, 1};
  const DispatchResult r = dispatch(lengths, pipelines, space, 100, 7);
  EXPECT_DOUBLE_EQ(r.objective, 1.2);
  std::vector<Tokens> p0, p1;
  for (std::size_t i : r.per_pipeline[0]) p0.push_back(lengths[i]);
  for (std::size_t i : r.per_pipeline[1]) p1.push_back(lengths[i]);
  std::sort(p0.begin(), p0.end());
  std::sort(p1.begin(), p1.end());
  EXPECT_EQ(p0, (std::vector<Tokens>{400, 800}));
  EXPECT_EQ(p1, (std::vector<Tokens>{200, 400}));
}

TEST(HydraulisDispatch, TiesGoToAnEmptyPipeline) {
  // The 1500-token sequence sets the objective at 1.5 on P0; either 300 fits below it on P1 or P2, and the tie goes
  // to the empty one, so they end up on different pipelines (Algorithm 1's first-index rule would stack them).
  const SchemeSpace space({linear(2, 1, 2000, 1e-3), linear(1, 1, 1000, 1e-3)}, 4, 8);
  const std::vector<Tokens> lengths{300, 1500, 300};
  const std::vector<std::size_t> pipelines{0, 1, 1};
  const DispatchResult r = dispatch(lengths, pipelines, space, 10, 3);
  EXPECT_EQ(r.per_pipeline[0], (std::vector<std::size_t>{1}));
  EXPECT_EQ(r.per_pipeline[1].size(), 1u);
  EXPECT_EQ(r.per_pipeline[2].size(), 1u);
  EXPECT_DOUBLE_EQ(r.objective, 1.5);
}

TEST(HydraulisDispatch, TooLongSequenceGoesToTheLargestMaxLen) {
  const SchemeSpace space({linear(4, 1, 2000, 1e-3), linear(1, 1, 1000, 1e-3)}, 8, 8);
  const std::vector<Tokens> lengths{5000, 100};
  const std::vector<std::size_t> pipelines{0, 1};
  const DispatchResult r = dispatch(lengths, pipelines, space, 5, 1);
  EXPECT_EQ(r.per_pipeline[0], (std::vector<std::size_t>{0}));
}

TEST(HydraulisDispatch, RejectsPipelinesOutOfOrder) {
  const SchemeSpace space({linear(4, 1, 2000, 1e-3), linear(1, 1, 1000, 1e-3)}, 8, 8);
  const std::vector<Tokens> lengths{100};
  EXPECT_THROW(dispatch(lengths, std::vector<std::size_t>{1, 0}, space, 5, 1), std::invalid_argument);
  EXPECT_THROW(dispatch(lengths, std::vector<std::size_t>{0, 1, 0}, space, 5, 1), std::invalid_argument);
  EXPECT_THROW(dispatch(lengths, std::vector<std::size_t>{0}, space, 0, 1), std::invalid_argument);
}

TEST(HydraulisDispatch, RandomBatchesPlaceEverySequenceOnceWhereItFits) {
  // Schemes with quadratic costs, PP up to 4 and a per-micro-batch constant.
  std::vector<SchemeInfo> schemes{linear(8, 1, 32768, 2e-5, 0.02), linear(4, 2, 16384, 2e-5, 0.01),
                                  linear(2, 1, 8192, 6e-5, 0.02), linear(1, 4, 6000, 3e-5, 0.005),
                                  linear(1, 1, 4096, 1e-4, 0.03)};
  for (auto& s : schemes) s.latency.a = 1e-10 * 8 / (s.scheme.tp * s.scheme.pp);
  const SchemeSpace space(schemes, 64, 8);
  Rng rng(11);
  for (int round = 0; round < 200; ++round) {
    // A strategy: 1..3 pipelines of each of 1..5 schemes, in dispatch order (schemes are listed by MaxLen).
    std::vector<std::size_t> pipelines;
    const std::size_t kinds = 1 + rng.below(schemes.size());
    for (std::size_t k = 0; k < kinds; ++k)
      for (std::uint64_t c = 0, n = 1 + rng.below(3); c < n; ++c) pipelines.push_back(k);
    std::vector<Tokens> lengths(1 + rng.below(60));
    for (auto& l : lengths) l = 64 + static_cast<Tokens>(rng.below(40000));
    const auto seed = rng.next();
    const DispatchResult r = dispatch(lengths, pipelines, space, 20, seed);

    ASSERT_EQ(r.per_pipeline.size(), pipelines.size());
    std::vector<int> placed(lengths.size(), 0);
    double objective = 0;
    for (std::size_t j = 0; j < pipelines.size(); ++j) {
      const SchemeInfo& s = space[pipelines[j]];
      std::vector<Tokens> mine;
      for (std::size_t i : r.per_pipeline[j]) {
        ++placed[i];
        mine.push_back(lengths[i]);
        // Only where it fits, or -- longer than every pipeline -- on one of the largest MaxLen.
        if (lengths[i] > space[pipelines.front()].max_len)
          EXPECT_EQ(s.max_len, space[pipelines.front()].max_len);
        else
          EXPECT_LE(lengths[i], s.max_len);
      }
      EXPECT_TRUE(std::is_sorted(r.per_pipeline[j].begin(), r.per_pipeline[j].end()));
      objective = std::max(objective, dispatch_lower_bound(mine, s));
    }
    for (int count : placed) EXPECT_EQ(count, 1);
    EXPECT_NEAR(r.objective, objective, 1e-12 * objective);

    // Deterministic; more trials never worse (trial 0 is the same stream).
    const DispatchResult again = dispatch(lengths, pipelines, space, 20, seed);
    EXPECT_EQ(again.per_pipeline, r.per_pipeline);
    EXPECT_LE(r.objective, dispatch(lengths, pipelines, space, 1, seed).objective);
  }
}

TEST(HydraulisDispatch, GivingUpAtACutoffKeepsEveryResultBelowIt) {
  // The selection screens and skips candidates with give_up_at: below the cutoff the result must be the one
  // without it (same objective, same pipelines), at or above it +inf.
  std::vector<SchemeInfo> schemes{linear(8, 1, 32768, 2e-5, 0.02), linear(4, 2, 16384, 2e-5, 0.01),
                                  linear(1, 4, 6000, 3e-5, 0.005), linear(1, 1, 4096, 1e-4, 0.03)};
  const SchemeSpace space(schemes, 64, 8);
  Rng rng(32);
  int gave_up = 0;
  int kept = 0;
  for (int round = 0; round < 300; ++round) {
    std::vector<std::size_t> pipelines;
    const std::size_t kinds = 1 + rng.below(schemes.size());
    for (std::size_t k = 0; k < kinds; ++k)
      for (std::uint64_t c = 0, n = 1 + rng.below(3); c < n; ++c) pipelines.push_back(k);
    std::vector<Tokens> lengths(1 + rng.below(60));
    for (auto& l : lengths) l = 64 + static_cast<Tokens>(rng.below(40000));
    const auto seed = rng.next();
    const int trials = 1 + static_cast<int>(rng.below(20));
    const DispatchResult full = dispatch(lengths, pipelines, space, trials, seed);
    // Cutoffs around the objective: just below, equal, just above, far above.
    for (const double factor : {0.5, 0.999, 1.0, 1.001, 2.0}) {
      const double cutoff = full.objective * factor;
      const DispatchResult cut = dispatch(lengths, pipelines, space, trials, seed, cutoff);
      if (full.objective < cutoff) {
        ++kept;
        EXPECT_EQ(cut.objective, full.objective);
        EXPECT_EQ(cut.per_pipeline, full.per_pipeline);
      } else {
        ++gave_up;
        EXPECT_EQ(cut.objective, std::numeric_limits<double>::infinity());
      }
    }
  }
  EXPECT_GT(gave_up, 500);
  EXPECT_GT(kept, 500);
}

}  // namespace
}  // namespace lcsim::hydraulis
