// Hydraulis stage 2: packing inside a pipeline (Eq. 1, Appendix C) -- the V range, the heuristic, the CBC MILP,
// and the heuristic's gap to the exact solution on random small instances.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <numeric>
#include <tuple>

#include "base/random.hpp"
#include "policies/hydraulis/packing.hpp"

namespace lcsim::hydraulis {
namespace hydraulis_packing_test {

SchemeInfo make_scheme(int pp, Tokens max_len, Tokens util_len, double a, double b, double c) {
  SchemeInfo s;
  s.scheme.tp = 1;
  s.scheme.pp = pp;
  s.max_len = max_len;
  s.util_len = util_len;
  s.latency.a = a;
  s.latency.b = b;
  s.latency.c = c;
  return s;
}

void expect_valid(std::span<const Tokens> lengths, const PackingResult& r, const SchemeInfo& s) {
  std::vector<int> seen(lengths.size(), 0);
  for (const auto& mb : r.micro_batches) {
    ASSERT_FALSE(mb.empty());
    Tokens tokens = 0;
    for (std::size_t i : mb) {
      ++seen[i];
      tokens += lengths[i];
    }
    EXPECT_TRUE(tokens <= s.max_len || mb.size() == 1) << "micro-batch over MaxLen";
  }
  for (int n : seen) EXPECT_EQ(n, 1);
  EXPECT_NEAR(r.cost, packing_cost(lengths, r.micro_batches, s), 1e-12 * r.cost);
}

/// Eq. 1 by brute force over every set partition with V in the pruned range (tiny instances only).
double brute_force(std::span<const Tokens> lengths, const SchemeInfo& s) {
  Tokens total = 0;
  for (Tokens l : lengths) total += l;
  const MicroBatchRange range = micro_batch_range(total, lengths.size(), s);
  double best = std::numeric_limits<double>::infinity();
  std::vector<int> label(lengths.size(), 0);
  std::function<void(std::size_t, int)> go = [&](std::size_t i, int used) {
    if (i == lengths.size()) {
      if (used < range.lo || used > range.hi) return;
      std::vector<std::vector<std::size_t>> mbs(static_cast<std::size_t>(used));
      for (std::size_t k = 0; k < lengths.size(); ++k) mbs[static_cast<std::size_t>(label[k])].push_back(k);
      for (const auto& mb : mbs) {
        Tokens t = 0;
        for (std::size_t k : mb) t += lengths[k];
        if (t > s.max_len) return;
      }
      best = std::min(best, packing_cost(lengths, mbs, s));
      return;
    }
    for (int b = 0; b <= used && b < range.hi; ++b) {
      label[i] = b;
      go(i + 1, std::max(used, b + 1));
    }
  };
  go(0, 0);
  return best;
}

TEST(HydraulisPacking, MicroBatchRangeOfAppendixC) {
  const SchemeInfo s = make_scheme(2, 8000, 1000, 0, 1e-3, 0);
  // 10 sequences, 20,500 tokens: at least ceil(20500 / 8000) = 3, at most min(20500 / 1000, 10) = 10.
  EXPECT_EQ(micro_batch_range(20500, 10, s).lo, 3);
  EXPECT_EQ(micro_batch_range(20500, 10, s).hi, 10);
  // 4 sequences, 3,500 tokens: [1, 3].
  EXPECT_EQ(micro_batch_range(3500, 4, s).lo, 1);
  EXPECT_EQ(micro_batch_range(3500, 4, s).hi, 3);
  // Fewer tokens than UtilLen: the upper end is raised to the lower.
  EXPECT_EQ(micro_batch_range(500, 2, s).hi, 1);
}

TEST(HydraulisPacking, HandWorkedPipeline) {
  // PP 2, cost per micro-batch 0.1 + l / 1000. Lengths 3000, 3000, 2000, 2000 (10,000 tokens), MaxLen 6000,
  // UtilLen 2000: V in [2, 4].
  //   V = 2: {3000, 2000} x 2 -> (0.1 + 5) x 3 = 15.3
  //   V = 3: best max {3000, 2000}? no: {3000}, {3000}, {2000, 2000} -> (0.1 + 4) x 4 = 16.4
  //   V = 4: (0.1 + 3) x 5 = 15.5
  const SchemeInfo s = make_scheme(2, 6000, 2000, 0, 1e-3, 0.1);
  const std::vector<Tokens> lengths{3000, 2000, 3000, 2000};
  for (const PackingResult& r : {pack_heuristic(lengths, s), pack_exact(lengths, s, {})}) {
    expect_valid(lengths, r, s);
    EXPECT_NEAR(r.cost, 15.3, 1e-9);
    ASSERT_EQ(r.micro_batches.size(), 2u);
  }
  EXPECT_TRUE(pack_exact(lengths, s, {}).proven_optimal);
}

TEST(HydraulisPacking, OverlongSequenceRunsAlone) {
  const SchemeInfo s = make_scheme(1, 1000, 100, 0, 1e-3, 0);
  const std::vector<Tokens> lengths{1500, 400, 300};
  const PackingResult r = pack_heuristic(lengths, s);
  ASSERT_EQ(r.micro_batches.size(), 2u);
  EXPECT_EQ(r.micro_batches[0], (std::vector<std::size_t>{0}));  // most expensive first
  EXPECT_EQ(r.micro_batches[1], (std::vector<std::size_t>{1, 2}));
}

TEST(HydraulisPacking, PartitionsRespectCapacity) {
  Rng rng(5);
  for (int round = 0; round < 300; ++round) {
    std::vector<Tokens> lengths(1 + rng.below(40));
    std::vector<double> costs;
    for (auto& l : lengths) {
      l = 1 + static_cast<Tokens>(rng.below(8000));
      costs.push_back(static_cast<double>(l) * (1 + static_cast<double>(l) / 4000));
    }
    const int v = 1 + static_cast<int>(rng.below(lengths.size()));
    const auto part = partition_heuristic(lengths, costs, 8000, v);
    if (part.empty()) continue;  // no fit found for this V
    ASSERT_EQ(part.size(), static_cast<std::size_t>(v));
    std::vector<int> seen(lengths.size(), 0);
    for (const auto& mb : part) {
      Tokens t = 0;
      for (std::size_t i : mb) {
        ++seen[i];
        t += lengths[i];
      }
      EXPECT_LE(t, 8000);
    }
    for (int n : seen) EXPECT_EQ(n, 1);
  }
}

TEST(HydraulisPacking, ExactMatchesBruteForceOnTinyInstances) {
  Rng rng(17);
  for (int round = 0; round < 40; ++round) {
    const SchemeInfo s = make_scheme(1 + static_cast<int>(rng.below(4)), 6000, 800, 2e-10, 1e-4, 0.02);
    std::vector<Tokens> lengths(2 + rng.below(5));
    for (auto& l : lengths) l = 100 + static_cast<Tokens>(rng.below(4000));
    const PackingResult exact = pack_exact(lengths, s, {});
    expect_valid(lengths, exact, s);
    EXPECT_TRUE(exact.proven_optimal);
    EXPECT_NEAR(exact.cost, brute_force(lengths, s), 1e-9 * exact.cost);
  }
}

TEST(HydraulisPacking, LowerBoundNeverExceedsAPackingAndIsTight) {
  // The selection skips a strategy when a pipeline's packing_lower_bound already loses: it must never be above
  // what the heuristic or the MILP finds, sequences over MaxLen included; and close enough to be of use.
  Rng rng(32);
  double worst_ratio = 0;
  for (int round = 0; round < 200; ++round) {
    const int pp = 1 << rng.below(4);
    const SchemeInfo s = make_scheme(pp, 12000, 1500, 3e-10, 8e-5, 0.01);
    std::vector<Tokens> lengths(rng.below(40));
    for (auto& l : lengths) l = 64 + static_cast<Tokens>(rng.below(rng.below(6) == 0 ? 14000 : 3000));
    const double bound = packing_lower_bound(lengths, s);
    const PackingResult heuristic = pack_heuristic(lengths, s);
    ASSERT_LE(bound, heuristic.cost * (1 + 1e-12)) << "round " << round;
    if (lengths.size() <= 8) {
      ASSERT_LE(bound, pack_exact(lengths, s, {}).cost * (1 + 1e-12)) << "round " << round;
    }
    if (!lengths.empty()) worst_ratio = std::max(worst_ratio, heuristic.cost / bound);
  }
  EXPECT_EQ(packing_lower_bound({}, make_scheme(2, 12000, 1500, 3e-10, 8e-5, 0.01)), 0.0);
  EXPECT_LT(worst_ratio, 2.0);
}

TEST(HydraulisPacking, HeuristicGapToExactOnRandomSmallInstances) {
  // 200 random pipelines of 4..10 sequences: the heuristic is never better than the MILP (which starts from
  // it), and its mean gap stays small. The figures are printed and recorded.
  Rng rng(23);
  double sum_gap = 0;
  double max_gap = 0;
  int optimal = 0;
  constexpr int kRounds = 200;
  for (int round = 0; round < kRounds; ++round) {
    const int pp = 1 << rng.below(3);
    const SchemeInfo s = make_scheme(pp, 12000, 1500, 3e-10, 8e-5, 0.01);
    std::vector<Tokens> lengths(4 + rng.below(7));
    for (auto& l : lengths) l = 64 + static_cast<Tokens>(rng.below(rng.below(4) == 0 ? 11000 : 3000));
    const PackingResult heuristic = pack_heuristic(lengths, s);
    const PackingResult exact = pack_exact(lengths, s, {});
    expect_valid(lengths, heuristic, s);
    expect_valid(lengths, exact, s);
    ASSERT_LE(exact.cost, heuristic.cost * (1 + 1e-12));
    const double gap = heuristic.cost / exact.cost - 1;
    sum_gap += gap;
    max_gap = std::max(max_gap, gap);
    optimal += exact.proven_optimal ? 1 : 0;
  }
  const double mean_gap = sum_gap / kRounds;
  std::printf(
      "[ HydraulisPacking ] heuristic vs exact on %d instances: mean gap %.3f%%, max gap %.3f%%, %d proven "
      "optimal\n",
      kRounds, 100 * mean_gap, 100 * max_gap, optimal);
  RecordProperty("mean_gap_percent", std::to_string(100 * mean_gap));
  RecordProperty("max_gap_percent", std::to_string(100 * max_gap));
  EXPECT_LT(mean_gap, 0.02);
  EXPECT_LT(max_gap, 0.15);
  EXPECT_GE(optimal, kRounds * 9 / 10);
}

/// The heuristic as packing.hpp states it, plainly: LPT by a scan for the cheapest micro-batch with room and the
/// local search without pruning, every V built and priced in full. What the pruned local search, the heap and the first
/// pass's pricing without building must reproduce.
std::vector<std::vector<std::size_t>> reference_partition(std::span<const Tokens> lengths,
                                                          std::span<const double> costs, Tokens capacity, int v,
                                                          bool polish) {
  struct Bin {
    double cost = 0;
    Tokens tokens = 0;
    std::vector<std::size_t> items;
  };
  std::vector<std::size_t> order(lengths.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    if (costs[x] != costs[y]) return costs[x] > costs[y];
    return lengths[x] > lengths[y];
  });
  std::vector<Bin> bins(static_cast<std::size_t>(v));
  for (std::size_t i : order) {
    std::size_t chosen = bins.size();
    for (std::size_t b = 0; b < bins.size(); ++b)
      if (bins[b].tokens + lengths[i] <= capacity && (chosen == bins.size() || bins[b].cost < bins[chosen].cost))
        chosen = b;
    if (chosen == bins.size()) return {};
    bins[chosen].items.push_back(i);
    bins[chosen].cost += costs[i];
    bins[chosen].tokens += lengths[i];
  }
  for (std::size_t step = 0; polish && step < 4 * lengths.size() + 16; ++step) {
    std::size_t m = 0;
    for (std::size_t b = 1; b < bins.size(); ++b)
      if (bins[b].cost > bins[m].cost) m = b;
    const double top = bins[m].cost;
    double best = top;
    std::size_t best_x = 0, best_bin = 0, best_y = 0;
    bool swap = false;
    for (std::size_t xi = 0; xi < bins[m].items.size(); ++xi) {
      const std::size_t x = bins[m].items[xi];
      for (std::size_t b = 0; b < bins.size(); ++b) {
        if (b == m) continue;
        if (bins[b].tokens + lengths[x] <= capacity && std::max(top - costs[x], bins[b].cost + costs[x]) < best) {
          best = std::max(top - costs[x], bins[b].cost + costs[x]);
          std::tie(best_x, best_bin, swap) = std::make_tuple(xi, b, false);
        }
        for (std::size_t yi = 0; yi < bins[b].items.size(); ++yi) {
          const std::size_t y = bins[b].items[yi];
          if (costs[y] >= costs[x] || bins[b].tokens - lengths[y] + lengths[x] > capacity ||
              bins[m].tokens - lengths[x] + lengths[y] > capacity)
            continue;
          const double pair = std::max(top - costs[x] + costs[y], bins[b].cost - costs[y] + costs[x]);
          if (pair < best) {
            best = pair;
            std::tie(best_x, best_bin, best_y, swap) = std::make_tuple(xi, b, yi, true);
          }
        }
      }
    }
    if (!(best < top)) break;
    const std::size_t x = bins[m].items[best_x];
    bins[m].items.erase(bins[m].items.begin() + static_cast<std::ptrdiff_t>(best_x));
    bins[m].cost -= costs[x];
    bins[m].tokens -= lengths[x];
    if (swap) {
      const std::size_t y = bins[best_bin].items[best_y];
      bins[best_bin].items.erase(bins[best_bin].items.begin() + static_cast<std::ptrdiff_t>(best_y));
      bins[best_bin].cost -= costs[y];
      bins[best_bin].tokens -= lengths[y];
      bins[m].items.push_back(y);
      bins[m].cost += costs[y];
      bins[m].tokens += lengths[y];
    }
    bins[best_bin].items.push_back(x);
    bins[best_bin].cost += costs[x];
    bins[best_bin].tokens += lengths[x];
  }
  std::vector<std::vector<std::size_t>> out;
  for (auto& b : bins) out.push_back(std::move(b.items));
  return out;
}

/// pack_heuristic's definition: LPT on every V of the range (skipping a V whose bound cannot beat the best so far),
/// then the local search on the 3 V of best LPT objective, over-long sequences alone, micro-batches sorted and
/// most expensive first.
PackingResult reference_pack(std::span<const Tokens> lengths, const SchemeInfo& s) {
  PackingResult result;
  if (lengths.empty()) return result;
  std::vector<std::vector<std::size_t>> alone;
  std::vector<std::size_t> rest;
  double alone_top = 0;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] > s.max_len) {
      alone.push_back({i});
      alone_top = std::max(alone_top, s.overhead() + s.work(lengths[i]));
    } else {
      rest.push_back(i);
    }
  }
  std::vector<Tokens> sub;
  std::vector<double> costs;
  Tokens total = 0;
  double work_total = 0, work_top = 0;
  for (std::size_t i : rest) {
    sub.push_back(lengths[i]);
    costs.push_back(s.work(lengths[i]));
    total += lengths[i];
    work_total += costs.back();
    work_top = std::max(work_top, costs.back());
  }
  std::vector<std::vector<std::size_t>> best = alone;
  double best_cost = rest.empty() ? packing_cost(lengths, alone, s) : INFINITY;
  std::vector<std::pair<double, int>> lpt;
  const auto run = [&](int v, bool polish) {
    const double slots = s.scheme.pp - 1 + v + static_cast<double>(alone.size());
    if (std::max(alone_top, s.overhead() + std::max(work_top, work_total / v)) * slots >= best_cost) return false;
    auto part = reference_partition(sub, costs, s.max_len, v, polish);
    if (part.empty()) return false;
    if (!polish) {
      double top = 0;
      for (const auto& mb : part) {
        double sum = 0;
        for (std::size_t i : mb) sum += costs[i];
        top = std::max(top, sum);
      }
      lpt.emplace_back((top + s.overhead()) * (s.scheme.pp - 1 + v), v);
    }
    std::vector<std::vector<std::size_t>> candidate = alone;
    for (auto& mb : part) {
      if (mb.empty()) continue;
      for (auto& i : mb) i = rest[i];
      candidate.push_back(std::move(mb));
    }
    const double cost = packing_cost(lengths, candidate, s);
    if (cost < best_cost) {
      best_cost = cost;
      best = std::move(candidate);
    }
    return true;
  };
  if (!rest.empty()) {
    const MicroBatchRange range = micro_batch_range(total, rest.size(), s);
    bool found = false;
    for (int v = range.lo; v <= range.hi || (!found && v <= static_cast<int>(rest.size())); ++v)
      found = run(v, false) || found;
    std::stable_sort(lpt.begin(), lpt.end());
    for (int v = range.lo; v <= range.hi; ++v)
      for (std::size_t k = 0; k < lpt.size() && k < 3; ++k)
        if (lpt[k].second == v) run(v, true);
  }
  for (auto& mb : best) std::sort(mb.begin(), mb.end());
  std::vector<double> mb_costs;
  for (const auto& mb : best) {
    double c = 0;
    for (std::size_t i : mb) c += s.work(lengths[i]);
    mb_costs.push_back(c);
  }
  std::vector<std::size_t> order(best.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    if (mb_costs[x] != mb_costs[y]) return mb_costs[x] > mb_costs[y];
    return best[x].front() < best[y].front();
  });
  for (std::size_t k : order) result.micro_batches.push_back(best[k]);
  result.cost = best_cost;
  return result;
}

TEST(HydraulisPacking, HeuristicMatchesItsPlainDefinition) {
  // The local search's pruning (a move or swap is skipped only when it cannot go below the best step so far), the
  // heap, and pricing LPT's packings without building them must change nothing: random pipelines, quadratic
  // costs with ties, over-long sequences, V ranges from one micro-batch to one per sequence.
  Rng rng(77);
  int polished_differs = 0;
  for (int round = 0; round < 400; ++round) {
    const int pp = 1 + static_cast<int>(rng.below(8));
    const Tokens max_len = 2000 + static_cast<Tokens>(rng.below(14000));
    const Tokens util_len = 50 + static_cast<Tokens>(rng.below(2000));
    const SchemeInfo s = make_scheme(pp, max_len, util_len, rng.below(2) == 0 ? 0.0 : 3e-10, 8e-5,
                                     0.01 * static_cast<double>(rng.below(3)));
    std::vector<Tokens> lengths(rng.below(120));
    for (auto& l : lengths)
      l = rng.below(4) == 0 ? 512 * (1 + static_cast<Tokens>(rng.below(8)))  // repeated lengths: ties
                            : 16 + static_cast<Tokens>(rng.below(
                                       static_cast<std::uint64_t>(rng.below(10) == 0 ? 2 * max_len : max_len / 3)));
    const PackingResult want = reference_pack(lengths, s);
    const PackingResult got = pack_heuristic(lengths, s);
    ASSERT_EQ(got.micro_batches, want.micro_batches) << "round " << round;
    ASSERT_EQ(got.cost, want.cost) << "round " << round;

    std::vector<double> costs;
    for (Tokens l : lengths) costs.push_back(s.work(std::min(l, max_len)));
    std::vector<Tokens> capped;
    for (Tokens l : lengths) capped.push_back(std::min(l, max_len));
    // A few micro-batches more than the tokens need: LPT leaves them uneven, the local search has work to do.
    Tokens total = 0;
    for (Tokens l : capped) total += l;
    const int v =
        static_cast<int>(std::max<Tokens>(1, (total + max_len - 1) / max_len)) + static_cast<int>(rng.below(6));
    const auto polished = partition_heuristic(capped, costs, max_len, v);
    ASSERT_EQ(polished, reference_partition(capped, costs, max_len, v, true)) << "round " << round;
    polished_differs += polished != reference_partition(capped, costs, max_len, v, false) ? 1 : 0;
  }
  EXPECT_GT(polished_differs, 20);  // the local search did move sequences
}

}  // namespace hydraulis_packing_test
}  // namespace lcsim::hydraulis
