#include "policies/hydraulis/proposal.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>

namespace lcsim::hydraulis {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
constexpr double kGpuTolerance = 1e-9;  // g is a sum of multiples of gpu_step: compare with N up to rounding

struct Bucket {
  Tokens upper = 0;    ///< bucket bound (from, upper]
  Tokens longest = 0;  ///< longest sequence in it
  double count = 0;    ///< sequences per iteration
  double sum_x = 0;
  double sum_x2 = 0;
};

/// Prefix minima of (value, index) pairs under point decreases.
class MinFenwick {
 public:
  explicit MinFenwick(std::size_t n = 0) : tree_(n + 1, {kInf, kNone}) {}
  void assign(std::size_t n) { tree_.assign(n + 1, {kInf, kNone}); }
  void lower(std::size_t pos, std::pair<double, std::size_t> value) {
    for (std::size_t i = pos + 1; i < tree_.size(); i += i & (~i + 1))
      if (value < tree_[i]) tree_[i] = value;
  }
  /// Minimum over positions [0, count).
  std::pair<double, std::size_t> prefix(std::size_t count) const {
    std::pair<double, std::size_t> best{kInf, kNone};
    for (std::size_t i = count; i > 0; i -= i & (~i + 1))
      if (tree_[i] < best) best = tree_[i];
    return best;
  }

 private:
  std::vector<std::pair<double, std::size_t>> tree_;
};

/// A pipeline running one sequence alone: PP T(l, P) (Eq. 1 with V = 1), then its sync.
double single_sequence_seconds(const SchemeInfo& s, Tokens l) {
  return s.scheme.pp * s.seconds(l) + s.sync;
}

/// Whole units of gpu_step a segment needs: ceil(y_b - y_a) with y = P / (tau step), written as integer and
/// fractional parts so the probe can group starts by their fractional part.

double units(double floor_a, double frac_a, double floor_b, double frac_b) {
  return floor_b - floor_a + (frac_b > frac_a ? 1.0 : 0.0);
}

class Program {
 public:
  Program(std::vector<Bucket> buckets, const SchemeSpace& space, std::vector<std::size_t> schemes,
          const ProposalOptions& options)
      : buckets_(std::move(buckets)), space_(space), schemes_(std::move(schemes)), options_(options) {
    prefix_.assign(schemes_.size(), std::vector<double>(buckets_.size() + 1, 0.0));
    for (std::size_t k = 0; k < schemes_.size(); ++k) {
      const auto& fit = space_[schemes_[k]].latency;
      for (std::size_t b = 0; b < buckets_.size(); ++b) {
        const auto& bucket = buckets_[b];
        prefix_[k][b + 1] = prefix_[k][b] + fit.a * bucket.sum_x2 + fit.b * bucket.sum_x + fit.c * bucket.count;
      }
    }
    alone_.assign(schemes_.size(), std::vector<double>(buckets_.size() + 1, 0.0));
    for (std::size_t k = 0; k < schemes_.size(); ++k)
      for (std::size_t b = 1; b <= buckets_.size(); ++b)
        alone_[k][b] = single_sequence_seconds(space_[schemes_[k]], bucket(b).longest);
  }

  std::size_t buckets() const { return buckets_.size(); }
  const Bucket& bucket(std::size_t b) const { return buckets_[b - 1]; }

  bool feasible(std::size_t k, std::size_t b) const { return space_[schemes_[k]].max_len >= bucket(b).longest; }
  /// Segments ending at b may run on k within tau: k holds their longest sequence and runs it within tau.
  bool feasible(std::size_t k, std::size_t b, double tau) const { return feasible(k, b) && alone_[k][b] <= tau; }

  /// Lower bounds of t[N][L_b], b = 0..buckets: the larger of the fastest any scheme runs the longest sequence
  /// up to L_b alone, and every bucket's work on its best feasible scheme spread over all N GPUs (no rounding).
  /// Also `breaks`: the first of the two, at which t[N][L_b] is often exactly met.
  void lower_bounds(std::vector<double>& bound, std::vector<double>& breaks) const {
    bound.assign(buckets_.size() + 1, 0.0);
    breaks.assign(buckets_.size() + 1, 0.0);
    double gpu_seconds = 0;
    for (std::size_t i = 1; i <= buckets_.size(); ++i) {
      double work = kInf;
      double alone = kInf;
      for (std::size_t k = 0; k < schemes_.size(); ++k) {
        if (!feasible(k, i)) continue;
        work = std::min(work, gpus(k) * (prefix_[k][i] - prefix_[k][i - 1]));
        alone = std::min(alone, alone_[k][i]);
      }
      gpu_seconds += work;
      breaks[i] = std::max(breaks[i - 1], alone);
      bound[i] = std::max(breaks[i], gpu_seconds / space_.total_gpus());
    }
  }

  struct Probe {
    double tau = 0;
    std::size_t covered = 0;  ///< g[b] <= N for b <= covered
    std::vector<double> g;
    std::vector<std::pair<std::size_t, std::size_t>> back;  ///< per b: (a, scheme slot)
  };

  /// g_tau[b] for b = 1..upto, stopping at the first b over N GPUs (g grows with b).
  /// Seconds per gpu_step of pipelines of slot k within tau: what is left after the sync (<= 0: unusable).
  double unit(std::size_t k, double tau) const { return (tau - space_[schemes_[k]].sync) * options_.gpu_step; }

  Probe probe(double tau, std::size_t upto) const {
    const std::size_t n = upto + 1;  // starts a = 0..upto
    const std::size_t kk = schemes_.size();
    const std::size_t stride = buckets_.size() + 1;
    floor_.resize(kk * stride);
    frac_.resize(kk * stride);
    rank_.resize(kk * stride);
    split_.resize(kk * stride);
    at_or_above_.resize(kk);
    lowest_.assign(kk, {kInf, kNone});
    sorted_.resize(n);
    active_.assign(kk, false);
    for (std::size_t k = 0; k < kk; ++k) {
      const double u = unit(k, tau);
      if (!(u > 0)) continue;
      active_[k] = true;
      double* fl = &floor_[k * stride];
      double* fr = &frac_[k * stride];
      for (std::size_t i = 0; i < n; ++i) {
        const double y = prefix_[k][i] / u;
        fl[i] = std::floor(y);
        fr[i] = y - fl[i];
      }
      sort_by_fraction(fr, n);
      // split: the first rank whose fractional part equals (or exceeds) this one's.
      std::size_t first_equal = 0;
      for (std::size_t r = 0; r < n; ++r) {
        if (r > 0 && sorted_[r].first != sorted_[r - 1].first) first_equal = r;
        rank_[k * stride + sorted_[r].second] = r;
        split_[k * stride + sorted_[r].second] = first_equal;
      }
      at_or_above_[k].assign(n);
    }

    Probe out;
    out.tau = tau;
    out.g.assign(n, kInf);
    out.back.assign(n, {kNone, kNone});
    out.g[0] = 0;
    insert(0, 0.0, n);
    const double limit = space_.total_gpus() + kGpuTolerance;
    for (std::size_t b = 1; b <= upto; ++b) {
      double best = kInf;
      std::pair<std::size_t, std::size_t> from{kNone, kNone};
      for (std::size_t k = 0; k < kk; ++k) {
        if (!active_[k] || !feasible(k, b, tau)) continue;
        const double step = gpus(k) * options_.gpu_step;
        const std::size_t split = split_[k * stride + b];
        // Starts whose fractional part is >= b's (rank >= split) need floor_b - floor_a units, the others one
        // more: the best is the smallest (h, a) of the first kind, or of the second plus a step. The smallest of all
        // starts, `lowest`, is the first kind's when it has a rank >= split (the second kind then loses by a whole
        // step), else the second kind's, and the first kind's is needed only if `lowest` does not already rule it
        // out. The same choice, ties included, as querying both kinds.
        const auto lowest = lowest_[k];
        if (lowest.second == kNone) continue;
        const double base = step * floor_[k * stride + b];
        std::pair<double, std::size_t> same{kInf, kNone}, more{kInf, kNone};
        if (rank_[k * stride + lowest.second] >= split) {
          same = lowest;
        } else {
          more = lowest;
          if (base + lowest.first < best) same = at_or_above_[k].prefix(n - split);
        }
        if (same.second != kNone && base + same.first < best) {
          best = base + same.first;
          from = {same.second, k};
        }
        if (more.second != kNone && base + more.first + step < best) {
          best = base + more.first + step;
          from = {more.second, k};
        }
      }
      if (!(best <= limit)) break;
      out.g[b] = best;
      out.back[b] = from;
      out.covered = b;
      insert(b, best, n);
    }
    return out;
  }

  /// The segments of S[N][L_b] as (first bucket before, last bucket, scheme slot), in length order.
  std::vector<std::array<std::size_t, 3>> segment_slots(const Probe& p, std::size_t b) const {
    std::vector<std::array<std::size_t, 3>> out;
    for (std::size_t end = b; end > 0; end = p.back[end].first)
      out.push_back({p.back[end].first, end, p.back[end].second});
    std::reverse(out.begin(), out.end());
    return out;
  }

  /// The relaxed model's latency of an integer strategy (pipelines per scheme index) on the data of the given
  /// segments: each segment on its scheme, or -- when the strategy has no pipeline of it -- on the scheme with
  /// pipelines that holds it at the fewest GPU-seconds; per scheme, its work over its pipelines plus the sync, and
  /// at least its longest sequence alone. Infinite when some segment has nowhere to go.
  double integer_latency(const std::vector<std::array<std::size_t, 3>>& segments,
                         const std::map<std::size_t, int>& pipelines) const {
    std::vector<double> load(schemes_.size(), 0.0), alone(schemes_.size(), 0.0);
    auto count = [&](std::size_t slot) {
      const auto it = pipelines.find(schemes_[slot]);
      return it == pipelines.end() ? 0 : it->second;
    };
    for (const auto& [start, end, slot] : segments) {
      std::size_t target = slot;
      if (count(slot) == 0) {
        target = schemes_.size();
        double best = kInf;
        for (std::size_t j = 0; j < schemes_.size(); ++j) {
          if (count(j) == 0 || !feasible(j, end)) continue;
          const double gpu_seconds = gpus(j) * (prefix_[j][end] - prefix_[j][start]);
          if (gpu_seconds < best) {
            best = gpu_seconds;
            target = j;
          }
        }
        if (target == schemes_.size()) return kInf;
      }
      load[target] += prefix_[target][end] - prefix_[target][start];
      alone[target] = std::max(alone[target], alone_[target][end]);
    }
    double latency = 0;
    for (std::size_t j = 0; j < schemes_.size(); ++j)
      if (count(j) > 0) latency = std::max({latency, load[j] / count(j) + space_[schemes_[j]].sync, alone[j]});
    return latency;
  }

  /// S[N][L_b] from a probe that covers b.
  RelaxedSolution solution(const Probe& p, std::size_t b) const {
    RelaxedSolution s;
    s.length = bucket(b).upper;
    s.latency = p.tau;
    for (std::size_t end = b; end > 0;) {
      const auto [start, k] = p.back[end];
      const double u = unit(k, p.tau);
      const double ya = prefix_[k][start] / u;
      const double yb = prefix_[k][end] / u;
      RelaxedSegment seg;
      seg.from = start == 0 ? 0 : bucket(start).upper;
      seg.to = bucket(end).upper;
      seg.scheme = schemes_[k];
      seg.pipelines =
          options_.gpu_step * units(std::floor(ya), ya - std::floor(ya), std::floor(yb), yb - std::floor(yb));
      s.segments.push_back(seg);
      end = start;
    }
    std::reverse(s.segments.begin(), s.segments.end());
    return s;
  }

 private:
  double gpus(std::size_t k) const { return space_[schemes_[k]].gpus(); }

  /// sorted_[0, n) = the pairs (fr[i], i) in ascending order, as std::sort would give them: a counting sort by
  /// the leading digit of fr (n buckets over [0, 1)), then an insertion sort in each bucket that moves an entry only
  /// past larger fractions, so that equal ones keep index order. Expected O(n): the fractions spread over [0, 1).
  void sort_by_fraction(const double* fr, std::size_t n) const {
    const auto bucket = [&](double f) { return std::min(n - 1, static_cast<std::size_t>(f * static_cast<double>(n))); };
    bucket_start_.assign(n + 1, 0);
    for (std::size_t i = 0; i < n; ++i) ++bucket_start_[bucket(fr[i]) + 1];
    for (std::size_t b = 0; b < n; ++b) bucket_start_[b + 1] += bucket_start_[b];
    bucket_next_.assign(bucket_start_.begin(), bucket_start_.end() - 1);
    for (std::size_t i = 0; i < n; ++i) sorted_[bucket_next_[bucket(fr[i])]++] = {fr[i], i};
    for (std::size_t b = 0; b < n; ++b)
      for (std::size_t r = bucket_start_[b] + 1; r < bucket_start_[b + 1]; ++r) {
        const auto entry = sorted_[r];
        std::size_t at = r;
        for (; at > bucket_start_[b] && sorted_[at - 1].first > entry.first; --at) sorted_[at] = sorted_[at - 1];
        sorted_[at] = entry;
      }
  }

  void insert(std::size_t a, double g, std::size_t n) const {
    const std::size_t stride = buckets_.size() + 1;
    for (std::size_t k = 0; k < schemes_.size(); ++k) {
      if (!active_[k]) continue;
      const double h = g - gpus(k) * options_.gpu_step * floor_[k * stride + a];
      const std::size_t r = rank_[k * stride + a];
      at_or_above_[k].lower(n - 1 - r, {h, a});
      if (std::pair<double, std::size_t>{h, a} < lowest_[k]) lowest_[k] = {h, a};
    }
  }

  std::vector<Bucket> buckets_;
  const SchemeSpace& space_;
  std::vector<std::size_t> schemes_;
  ProposalOptions options_;
  std::vector<std::vector<double>> prefix_;  ///< per scheme slot, work of buckets 1..b
  std::vector<std::vector<double>> alone_;   ///< per scheme slot, single_sequence_seconds of bucket b's longest
  // Probe scratch (per scheme slot), reused between probes.
  mutable std::vector<double> floor_, frac_;       ///< [slot * (buckets + 1) + a]
  mutable std::vector<std::size_t> rank_, split_;  ///< likewise
  mutable std::vector<std::pair<double, std::size_t>> sorted_;
  mutable std::vector<std::size_t> bucket_start_, bucket_next_;  ///< sort_by_fraction's buckets
  mutable std::vector<bool> active_;                             ///< per slot: usable within the probe's tau
  mutable std::vector<MinFenwick> at_or_above_;                  ///< starts by fractional part, largest first
  mutable std::vector<std::pair<double, std::size_t>> lowest_;   ///< the smallest (h, a) of every start inserted
};

/// Bisection over tau shared by all L: every b in [lo, hi] has t_b in (tau_lo, at_hi.tau], and at_hi covers hi.
/// A probe between them splits [lo, hi] where g exceeds N. The probe goes to a breakpoint (the longest sequence
/// alone) when one lies strictly inside, else to the geometric middle; a range is done when its upper end is
/// within `precision` of its lower bound.
struct Bisection {
  const Program& program;
  const std::vector<double>& bound;
  const std::vector<double>& breaks;
  double precision;
  std::vector<RelaxedSolution>& out;
  std::vector<std::vector<std::array<std::size_t, 3>>>& slots;  ///< per b, Program::segment_slots

  void run(std::size_t lo, std::size_t hi, double tau_lo, const Program::Probe& at_hi) {
    if (lo > hi) return;
    const double lower = std::max(tau_lo, bound[lo]);
    if (at_hi.tau <= lower * (1 + precision)) {
      for (std::size_t b = lo; b <= hi; ++b) {
        out[b - 1] = program.solution(at_hi, b);
        slots[b - 1] = program.segment_slots(at_hi, b);
      }
      return;
    }
    std::size_t first = lo;
    while (first <= hi && !(breaks[first] > tau_lo)) ++first;
    std::size_t last = first;
    while (last <= hi && breaks[last] < at_hi.tau) ++last;
    const double mid = last > first ? breaks[first + (last - first - 1) / 2] : std::sqrt(lower * at_hi.tau);
    const Program::Probe at_mid = program.probe(mid, hi);
    const std::size_t cut = at_mid.covered;  // b <= cut: t_b <= mid
    if (cut >= lo) run(lo, cut, tau_lo, at_mid);
    run(std::max(lo, cut + 1), hi, mid, at_hi);
  }
};

}  // namespace

Proposal propose_strategies(std::span<const Tokens> lengths, double iterations, const SchemeSpace& space,
                            const ProposalOptions& options) {
  if (options.length_step < 1) throw std::invalid_argument("hydraulis proposal: length_step must be >= 1");
  if (!(options.gpu_step > 0 && options.gpu_step <= 1))
    throw std::invalid_argument("hydraulis proposal: gpu_step must be in (0, 1]");
  if (!(options.precision > 0)) throw std::invalid_argument("hydraulis proposal: precision must be > 0");
  if (!(iterations > 0)) throw std::invalid_argument("hydraulis proposal: iterations must be > 0");

  std::map<Tokens, Bucket> by_index;
  for (Tokens l : lengths) {
    if (l < 1) throw std::invalid_argument("hydraulis proposal: sequence lengths must be >= 1");
    const Tokens index = (l + options.length_step - 1) / options.length_step;
    Bucket& b = by_index[index];
    b.upper = index * options.length_step;
    b.longest = std::max(b.longest, l);
    const double x = static_cast<double>(l);
    b.count += 1 / iterations;
    b.sum_x += x / iterations;
    b.sum_x2 += x * x / iterations;
  }
  std::vector<Bucket> buckets;
  for (auto& entry : by_index) buckets.push_back(entry.second);

  Proposal proposal;
  proposal.schemes = undominated_schemes(space, buckets.empty() ? 0 : buckets.back().longest);
  const Program program(buckets, space, proposal.schemes, options);

  // The covered prefix: buckets some scheme can hold.
  std::size_t end = 0;
  while (end < program.buckets()) {
    bool held = false;
    for (std::size_t k = 0; k < proposal.schemes.size() && !held; ++k) held = program.feasible(k, end + 1);
    if (!held) break;
    ++end;
  }
  if (end == 0) return proposal;

  std::vector<double> bound, breaks;
  program.lower_bounds(bound, breaks);
  double tau_hi = std::max(bound[end], 1e-12);
  Program::Probe at_hi = program.probe(tau_hi, end);
  for (int doubling = 0; at_hi.covered < end; ++doubling) {
    if (doubling > 200) throw std::logic_error("hydraulis proposal: no latency bound fits the GPUs");
    tau_hi *= 2;
    at_hi = program.probe(tau_hi, end);
  }
  proposal.relaxed.resize(end);
  std::vector<std::vector<std::array<std::size_t, 3>>> slots(end);
  Bisection{program, bound, breaks, options.precision, proposal.relaxed, slots}.run(
      1, end, std::max(bound[1] / 2, tau_hi * 1e-12), at_hi);
  proposal.longest_held = program.bucket(end).upper;

  std::set<std::vector<std::pair<std::size_t, int>>> seen;
  for (std::size_t b = 1; b <= end; ++b) {
    // At t[N][L] the program's allocation uses the fewest GPUs that meet it; scaled to all N GPUs it keeps the
    // schemes' proportions and leaves no GPU to the rounding's fill.
    double used = 0;
    for (const auto& seg : proposal.relaxed[b - 1].segments) used += seg.pipelines * space[seg.scheme].gpus();
    const double scale = used > 0 ? space.total_gpus() / used : 1.0;
    std::vector<std::pair<std::size_t, double>> relaxed;
    for (const auto& seg : proposal.relaxed[b - 1].segments) relaxed.emplace_back(seg.scheme, seg.pipelines * scale);
    std::vector<Strategy> rounded = round_relaxed(relaxed, program.bucket(b).longest, space);
    const auto keep = static_cast<std::size_t>(options.roundings_per_length);
    if (keep > 0 && rounded.size() > keep) {
      std::vector<std::pair<double, std::size_t>> ranked;
      for (std::size_t r = 0; r < rounded.size(); ++r) {
        const std::map<std::size_t, int> pipelines(rounded[r].counts.begin(), rounded[r].counts.end());
        ranked.emplace_back(program.integer_latency(slots[b - 1], pipelines), r);
      }
      std::stable_sort(ranked.begin(), ranked.end());
      std::vector<Strategy> kept;
      for (std::size_t r = 0; r < keep; ++r) kept.push_back(std::move(rounded[ranked[r].second]));
      rounded = std::move(kept);
    }
    for (auto& s : rounded)
      if (seen.insert(s.counts).second) proposal.strategies.push_back(std::move(s));
  }
  return proposal;
}

}  // namespace lcsim::hydraulis
