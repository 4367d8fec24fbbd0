// Hydraulis stage 1: dispatch across pipelines (Eq. 2-3, Algorithm 1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>

#include "base/random.hpp"
#include "policies/hydraulis/dispatch.hpp"

namespace lcsim::hydraulis {
namespace hydraulis_dispatch_test {

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

/// Algorithm 1 as dispatch.hpp states it, by brute force over every pipeline and without the early stop at the
/// floor bound: what the segment trees, the shared batch and the stop must reproduce.
DispatchResult reference_dispatch(std::span<const Tokens> lengths, std::span<const std::size_t> pipelines,
                                  const SchemeSpace& space, int trials, std::uint64_t seed, double give_up_at) {
  const std::size_t d = pipelines.size();
  const Tokens top_len = space[pipelines.front()].max_len;
  double idle = 0;
  for (std::size_t s : pipelines) idle = std::max(idle, space[s].sync);
  // Eligible pipelines of each sequence, and how many distinct schemes that is (the order's key).
  std::vector<std::vector<std::size_t>> eligible(lengths.size());
  std::vector<std::size_t> groups_of(lengths.size());
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    for (std::size_t j = 0; j < d; ++j)
      if (lengths[i] <= space[pipelines[j]].max_len || (lengths[i] > top_len && space[pipelines[j]].max_len == top_len))
        eligible[i].push_back(j);
    std::vector<std::size_t> schemes;
    for (std::size_t j : eligible[i]) schemes.push_back(pipelines[j]);
    groups_of[i] = static_cast<std::size_t>(std::unique(schemes.begin(), schemes.end()) - schemes.begin());
  }
  double best_objective = give_up_at;
  std::vector<std::size_t> best(lengths.size(), 0);
  bool found = false;
  Rng master(seed);
  for (int trial = 0; trial < trials; ++trial) {
    Rng rng = master.split(static_cast<std::uint64_t>(trial));
    std::vector<std::size_t> order(lengths.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    rng.shuffle(order);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t x, std::size_t y) { return groups_of[x] < groups_of[y]; });
    std::vector<double> load(d, 0), longest(d, 0);
    std::vector<bool> used(d, false);
    std::vector<std::size_t> assignment(lengths.size());
    double objective = idle;
    bool gave_up = false;
    for (std::size_t i : order) {
      // (objective, loaded, bound, pipeline), smallest first.
      std::tuple<double, bool, double, std::size_t> pick{std::numeric_limits<double>::infinity(), true, 0, d};
      for (std::size_t j : eligible[i]) {
        const SchemeInfo& s = space[pipelines[j]];
        const double t = s.work(lengths[i]);
        const double bound =
            used[j] ? s.scheme.pp * s.overhead() + t + (load[j] + (s.scheme.pp - 1) * std::max(longest[j], t)) + s.sync
                    : s.scheme.pp * (t + s.overhead()) + s.sync;
        pick = std::min(pick, std::make_tuple(std::max(bound, objective), static_cast<bool>(used[j]), bound, j));
      }
      if (std::get<0>(pick) >= best_objective) {
        gave_up = true;
        break;
      }
      const std::size_t j = std::get<3>(pick);
      const double t = space[pipelines[j]].work(lengths[i]);
      load[j] = used[j] ? load[j] + t : t;
      longest[j] = used[j] ? std::max(longest[j], t) : t;
      used[j] = true;
      assignment[i] = j;
      objective = std::max(objective, std::get<2>(pick));
    }
    if (!gave_up && objective < best_objective) {
      best_objective = objective;
      best = assignment;
      found = true;
    }
  }
  DispatchResult result;
  result.objective = lengths.empty() ? idle : found ? best_objective : std::numeric_limits<double>::infinity();
  result.per_pipeline.resize(d);
  for (std::size_t i = 0; i < lengths.size(); ++i) result.per_pipeline[best[i]].push_back(i);
  return result;
}

/// Schemes whose costs are dyadic (a = 0, b and c powers of two, whole lengths): every sum is exact, so the
/// reference's brute force and the trees' branch and bound see the same numbers, ties included.
std::vector<SchemeInfo> dyadic_schemes() {
  std::vector<SchemeInfo> schemes{linear(8, 1, 32768, 0x1p-14, 0x1p-6), linear(4, 2, 16384, 0x1p-14, 0x1p-7),
                                  linear(2, 1, 16384, 0x1p-13, 0x1p-6), linear(1, 4, 6144, 0x1p-13, 0x1p-8),
                                  linear(1, 1, 4096, 0x1p-12, 0x1p-5)};
  schemes[1].sync = 0x1p-3;
  schemes[3].sync = 0x1p-2;
  return schemes;
}

TEST(HydraulisDispatch, MatchesAReferenceGreedyWithoutTheFloorStop) {
  // The floor bound stops the trials early and every dispatch of a batch shares its shuffles and work: neither may
  // change a result. Many pipeline sets on one DispatchBatch, each against the brute-force reference.
  const SchemeSpace space(dyadic_schemes(), 64, 8);
  Rng rng(91);
  int compared = 0;
  for (int round = 0; round < 40; ++round) {
    std::vector<Tokens> lengths(1 + rng.below(80));
    for (auto& l : lengths) l = 16 + static_cast<Tokens>(rng.below(rng.below(4) == 0 ? 40000 : 3000));
    const auto seed = rng.next();
    DispatchBatch batch(lengths, space, seed);
    for (int set = 0; set < 6; ++set) {
      std::vector<std::size_t> pipelines;
      for (std::size_t k = 0; k < space.size(); ++k)
        for (std::uint64_t c = 0, n = rng.below(4); c < n; ++c) pipelines.push_back(k);
      if (pipelines.empty()) pipelines.push_back(rng.below(space.size()));
      const int trials = 1 + static_cast<int>(rng.below(12));
      const DispatchResult want = reference_dispatch(lengths, pipelines, space, trials, seed, INFINITY);
      const DispatchResult got = dispatch(batch, pipelines, trials);
      ASSERT_EQ(got.objective, want.objective) << "round " << round << " set " << set;
      ASSERT_EQ(got.per_pipeline, want.per_pipeline) << "round " << round << " set " << set;
      // With a cutoff: the same below it, +inf at or above it.
      const double cutoff = want.objective * (rng.below(2) == 0 ? 1.0 : 1.0 + 0x1p-4);
      const DispatchResult cut = reference_dispatch(lengths, pipelines, space, trials, seed, cutoff);
      EXPECT_EQ(dispatch_objective(batch, pipelines, trials, cutoff), cut.objective);
      EXPECT_EQ(dispatch(lengths, pipelines, space, trials, seed, cutoff).objective, cut.objective);
      ++compared;
    }
  }
  EXPECT_EQ(compared, 240);
}

TEST(HydraulisDispatch, KeepBestKeepsWhatScreeningInCandidateOrderKeeps) {
  // keep_best visits candidates by floor bound and stops early; the selection's definition is every candidate in
  // order, each given up at the keep-th best objective of those before it, the keep best kept (ties: earlier).
  // Half the rounds balance well (many short sequences, no per-micro-batch constant, no sync): the floor bounds
  // are then tight, and the candidates with few pipelines are ruled out by theirs.
  const SchemeSpace general(dyadic_schemes(), 64, 8);
  const SchemeSpace balanced({linear(4, 1, 8192, 0x1p-14), linear(2, 1, 4096, 0x1p-13), linear(1, 1, 2048, 0x1p-12)},
                             64, 8);
  Rng rng(5);
  int kept_total = 0;
  for (int round = 0; round < 80; ++round) {
    const bool tight = round % 2 == 1;
    const SchemeSpace& space = tight ? balanced : general;
    std::vector<Tokens> lengths(1 + rng.below(tight ? 300 : 60));
    for (auto& l : lengths)
      l = 16 + static_cast<Tokens>(tight ? rng.below(1000) : rng.below(rng.below(3) == 0 ? 30000 : 2000));
    const auto seed = rng.next();
    std::vector<std::vector<std::size_t>> candidates(2 + rng.below(20));
    for (auto& pipelines : candidates) {
      for (std::size_t k = 0; k < space.size(); ++k)
        for (std::uint64_t c = 0, n = rng.below(tight ? 6 : 3); c < n; ++c) pipelines.push_back(k);
      if (pipelines.empty()) pipelines.push_back(0);
    }
    if (rng.below(3) == 0) candidates.push_back(candidates.front());  // ties on the objective
    const int trials = 1 + static_cast<int>(rng.below(3));
    const std::size_t keep = 1 + rng.below(5);

    std::vector<std::pair<double, std::size_t>> scored;
    std::vector<double> objectives;
    for (std::size_t c = 0; c < candidates.size(); ++c) {
      std::vector<double> sorted = objectives;
      std::sort(sorted.begin(), sorted.end());
      const double cutoff = sorted.size() < keep ? INFINITY : sorted[keep - 1];
      const double objective = reference_dispatch(lengths, candidates[c], space, trials, seed, cutoff).objective;
      scored.emplace_back(objective, c);
      objectives.push_back(objective);
    }
    std::stable_sort(scored.begin(), scored.end());
    if (candidates.size() > keep) scored.resize(keep);
    std::vector<std::pair<std::size_t, double>> want;
    for (const auto& [objective, c] : scored) want.emplace_back(c, objective);
    std::sort(want.begin(), want.end());

    DispatchBatch batch(lengths, space, seed);
    EXPECT_EQ(keep_best(batch, candidates, trials, keep), want) << "round " << round;
    kept_total += static_cast<int>(want.size());
  }
  EXPECT_GT(kept_total, 100);
}

}  // namespace hydraulis_dispatch_test
}  // namespace lcsim::hydraulis
