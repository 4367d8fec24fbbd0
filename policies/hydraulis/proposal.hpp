#pragma once
// Hydraulis's data distribution-aware strategy proposal (Sec. 7): the dynamic program
//   t[n][l] = min( t[n - dn][l],  min_{(k, d) in Cond(n, l), l' < l} max( t[n - d N(P_k)][l - l'],
//                                                                          (1/d) sum_{x in D(l - l', l]} T(x, P_k) ) )
//   Cond(n, l) = {(k, d) : MaxLen(P_k) >= l, d N(P_k) <= n},   t[n][0] = 0,  t[0][l > 0] = inf      (Eq. 4)
// with the continuous relaxation (n and d non-integer, multiples of `gpu_step`, paper 0.1), lengths in buckets
// of `length_step` tokens (paper 128), then rounding the relaxed pipeline counts to nearby integer strategies.
//
// How it is computed (same optimum, different order): for a latency bound tau, let g_tau[b] be the fewest GPUs
// (a multiple of gpu_step) that process every sequence of the first b length buckets within tau, each segment
// (a, b] of buckets on d = gpu_step ceil(W_k(a, b] / (tau gpu_step)) pipelines of one scheme k:
//   g_tau[b] = min_{a < b, k feasible} g_tau[a] + N(P_k) d.
// Then t[N][L_b] = min{tau : g_tau[b] <= N}, and the segments of g at that tau are S[N][L_b]. Splitting the
// ceiling into integer and fractional parts of W/(tau step) turns the inner minimum over a into two range
// minima over the fractional parts (Fenwick trees), so one tau costs O(buckets x schemes x log buckets), and
// one tau answers every L at once (g grows with b): a bisection over tau shared by all L finds every t[N][L]
// to the relative `precision`. Only non-empty buckets are segment ends (an empty bucket adds nothing);
// "MaxLen(P_k) >= l" is checked against the longest sequence of the segment, not the bucket's upper bound.
//
// Two additions to Eq. 4: a segment's latency is max((1/d) sum T(x, P_k), PP_k T(longest, P_k)) + sync_k.
//   - The relaxation may spread a segment's work over fractional pipelines, but one sequence runs whole on one
//     pipeline (Eq. 1 with V = 1). Without the max, a rare 32K sequence costs its expected share of an iteration
//     and no proposed strategy can run it fast when it comes; with it, t[N][L] >= the fastest any scheme runs the
//     longest sequence up to L. In g_tau this is a feasibility test of (k, b): PP_k T(longest of b) + sync_k <= tau.
//   - sync_k (SchemeInfo::sync) is what every pipeline of P_k spends after propagation under lcsim's estimate (0
//     under the paper's hidden optimisation phase); in g_tau it leaves tau - sync_k for the segment's work.
//
// Schemes dominated for this program are dropped first, which changes no t[N][L]: with M = min(MaxLen(k), the
// longest sequence of the data), k' dominates k when MaxLen(k') >= M, N(k') divides N(k), N(k') T(x, k') <=
// N(k) T(x, k), PP(k') T(x, k') <= PP(k) T(x, k) on [1, M] and sync(k') <= sync(k) -- any segment then runs on
// k' within the same latency on no more GPUs (ceil(m x) <= m ceil(x)).
//
// Rounding ("include all nearby integer solutions ... total GPUs <= N"): the relaxed pipeline counts are scaled
// to all N GPUs (at t[N][L] the program holds the fewest GPUs that meet it), then every combination of floor /
// ceil of each scheme's count is kept when it fits N GPUs and holds the longest sequence up to L; GPUs left over
// are filled, one pipeline at a time, with the combination's scheme furthest below its relaxed count that still
// fits (ties: fewer GPUs, lower index) -- an extra pipeline never slows an iteration (dispatch may leave it
// empty). Problem 1 defines a strategy for every L, so when no floor / ceil combination both fits and holds L (a
// small share of a wide holder beside many narrow pipelines), the nearest one that does is kept: one holder
// pipeline, the others' floors reduced, then the fill. With roundings_per_length 0 every such strategy is a candidate,
// as in the paper; by default the 4 the relaxed model finds fastest (segments on their schemes, or moved to the
// cheapest scheme present that holds them; per scheme, work over pipelines + sync) -- at 1024 GPUs "all" gives
// thousands of near-identical candidates. The union over all L, without repeats, is the candidate set.
#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "policies/hydraulis/strategy.hpp"

namespace lcsim::hydraulis {

struct ProposalOptions {
  Tokens length_step = 128;  ///< l step, tokens
  double gpu_step = 0.1;     ///< n and d step, in GPUs / pipelines; in (0, 1]
  double precision = 1e-3;   ///< relative precision of each t[N][L]
  /// Nearby integer strategies kept per L, the fastest by the relaxed model first; 0 keeps all (the paper).
  int roundings_per_length = 4;
};

struct RelaxedSegment {
  Tokens from = 0;  ///< lengths (from, to] -- bucket bounds
  Tokens to = 0;
  std::size_t scheme = 0;
  double pipelines = 0;  ///< d, a multiple of gpu_step
};

/// S[N][L] of the relaxed program for one L.
struct RelaxedSolution {
  Tokens length = 0;                     ///< L: the upper bound of its last non-empty bucket
  double latency = 0;                    ///< t[N][L], seconds per iteration (within `precision`)
  std::vector<RelaxedSegment> segments;  ///< in length order
};

struct Proposal {
  std::vector<std::size_t> schemes;      ///< the schemes the program used (dominated ones removed)
  std::vector<RelaxedSolution> relaxed;  ///< one per non-empty bucket that some scheme can hold, L ascending
  std::vector<Strategy> strategies;      ///< the rounded candidates, in order of first appearance
  Tokens longest_held = 0;               ///< the longest L the program covered (0 if none)
};

/// `lengths`: the dataset (lcsim: the scenario's data window) over `iterations` iterations (counts are divided
/// by it, so latencies are per iteration; the strategies do not depend on it).
Proposal propose_strategies(std::span<const Tokens> lengths, double iterations, const SchemeSpace& space,
                            const ProposalOptions& options);

/// propose_strategies(), memoised: sampled worlds propose from the nominal world's space and data (Hydraulis
/// proposes offline, once; PlanningContext::nominal), so every world asks for the same proposal, which costs more
/// than the rest of a world. The key is the full content the proposal reads -- the space's schemes, the lengths,
/// `iterations`, the options -- never an address; the memo holds the 8 most recent proposals. A second caller with
/// the same key while the first computes waits for it. Thread-safe; the result is propose_strategies()' exactly.
std::shared_ptr<const Proposal> shared_proposal(std::span<const Tokens> lengths, double iterations,
                                                const SchemeSpace& space, const ProposalOptions& options);

/// `strategies` of space `from` in space `to`: each scheme found by its <TP, PP>. A strategy with a scheme `to`
/// lacks (there, it cannot hold a single token) is left out; the others keep their order.
std::vector<Strategy> strategies_in_space(const std::vector<Strategy>& strategies, const SchemeSpace& from,
                                          const SchemeSpace& to);

/// Indices of the schemes of `space` no other scheme dominates for sequences of at most `longest` tokens (see
/// above), ascending.
std::vector<std::size_t> undominated_schemes(const SchemeSpace& space, Tokens longest);

/// The rounding step alone: integer strategies near the relaxed pipeline counts (scheme, count) that fit
/// `total_gpus` and include a scheme with MaxLen >= `longest`; never empty when a relaxed scheme holds `longest`.
std::vector<Strategy> round_relaxed(const std::vector<std::pair<std::size_t, double>>& relaxed, Tokens longest,
                                    const SchemeSpace& space);

}  // namespace lcsim::hydraulis
