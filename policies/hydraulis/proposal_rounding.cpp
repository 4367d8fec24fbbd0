// The proposal's scheme pruning (dominance) and rounding of relaxed pipeline counts (see proposal.hpp).
#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include "policies/hydraulis/proposal.hpp"

namespace lcsim::hydraulis {
namespace {

/// m_w T_w(x) >= m_s T_s(x) for x in [1, hi] (up to rounding), T the schemes' fitted latencies.
bool scaled_latency_no_less(const SchemeInfo& weak, double m_w, const SchemeInfo& strong, double m_s, double hi) {
  const double qa = m_w * weak.latency.a - m_s * strong.latency.a;
  const double qb = m_w * weak.latency.b - m_s * strong.latency.b;
  const double qc = m_w * weak.latency.c - m_s * strong.latency.c;
  auto ok = [&](double x) {
    const double f = (qa * x + qb) * x + qc;
    const double scale = m_w * std::abs((weak.latency.a * x + weak.latency.b) * x + weak.latency.c);
    return f >= -1e-12 * scale;
  };
  if (!ok(1.0) || !ok(hi)) return false;
  const double vertex = qa > 0 ? -qb / (2 * qa) : 0;  // a convex difference has its minimum there
  return !(vertex > 1 && vertex < hi) || ok(vertex);
}

/// `strong` can take over any segment of `weak` whose sequences are at most `longest` tokens (see the header): it
/// holds as much, its GPU count divides weak's, its GPU-seconds per sequence are no more, and it runs one sequence
/// alone no slower.
bool dominates(const SchemeInfo& strong, const SchemeInfo& weak, Tokens longest) {
  const Tokens needed = std::min(weak.max_len, longest);
  if (strong.max_len < needed || weak.gpus() % strong.gpus() != 0 || strong.sync > weak.sync) return false;
  const double hi = static_cast<double>(std::max<Tokens>(needed, 1));
  return scaled_latency_no_less(weak, weak.gpus(), strong, strong.gpus(), hi) &&
         scaled_latency_no_less(weak, weak.scheme.pp, strong, strong.scheme.pp, hi);
}

}  // namespace

std::vector<std::size_t> undominated_schemes(const SchemeSpace& space, Tokens longest) {
  std::vector<std::size_t> kept;
  for (std::size_t k = 0; k < space.size(); ++k) {
    bool dominated = false;
    for (std::size_t s = 0; s < space.size() && !dominated; ++s) {
      if (s == k || !dominates(space[s], space[k], longest)) continue;
      // Two schemes dominating each other are equivalent: keep the lower index.
      dominated = !dominates(space[k], space[s], longest) || s < k;
    }
    if (!dominated) kept.push_back(k);
  }
  return kept;
}

namespace {

/// GPUs left over by `counts` are filled, one pipeline at a time, with the entry furthest below its relaxed count
/// that still fits (ties: fewer GPUs, lower index); an entry the combination does not use is not added.
void fill_left_over(const std::vector<std::pair<std::size_t, double>>& entries, const SchemeSpace& space,
                    std::vector<int>& counts, int& used) {
  while (true) {
    std::size_t chosen = entries.size();
    for (std::size_t e = 0; e < entries.size(); ++e) {
      const int width = space[entries[e].first].gpus();
      if (counts[e] == 0 || width > space.total_gpus() - used) continue;
      if (chosen == entries.size()) {
        chosen = e;
        continue;
      }
      const double deficit = entries[e].second - counts[e];
      const double best = entries[chosen].second - counts[chosen];
      const int best_width = space[entries[chosen].first].gpus();
      if (deficit > best || (deficit == best && width < best_width)) chosen = e;
    }
    if (chosen == entries.size()) return;
    ++counts[chosen];
    used += space[entries[chosen].first].gpus();
  }
}

Strategy strategy_of(const std::vector<std::pair<std::size_t, double>>& entries, const std::vector<int>& counts) {
  std::vector<std::pair<std::size_t, int>> pairs;
  for (std::size_t e = 0; e < entries.size(); ++e) pairs.emplace_back(entries[e].first, counts[e]);
  return make_strategy(pairs);
}

/// When no floor / ceil combination both holds `longest` and fits (a small share of a wide holder beside many
/// narrow pipelines: ceil(holder) + floor(others) can exceed N), the nearest strategy that does: one holder
/// pipeline at least, the other entries' floors reduced one pipeline at a time where the fewest are lost relative
/// to their relaxed counts (the entry with the most pipelines left over its share first; ties: wider, lower
/// index), then the fill. One per holding entry.
std::vector<Strategy> repair(const std::vector<std::pair<std::size_t, double>>& entries, Tokens longest,
                             const SchemeSpace& space) {
  std::vector<Strategy> out;
  for (std::size_t h = 0; h < entries.size(); ++h) {
    const SchemeInfo& holder = space[entries[h].first];
    if (holder.max_len < longest || holder.gpus() > space.total_gpus()) continue;
    std::vector<int> counts(entries.size());
    int used = 0;
    for (std::size_t e = 0; e < entries.size(); ++e) {
      counts[e] = std::max(e == h ? 1 : 0, static_cast<int>(std::floor(entries[e].second)));
      used += counts[e] * space[entries[e].first].gpus();
    }
    while (used > space.total_gpus()) {
      std::size_t drop = entries.size();
      for (std::size_t e = 0; e < entries.size(); ++e) {
        if (counts[e] == 0 || (e == h && counts[e] == 1)) continue;
        if (drop == entries.size()) {
          drop = e;
          continue;
        }
        const double over = counts[e] - entries[e].second;
        const double best = counts[drop] - entries[drop].second;
        if (over > best || (over == best && space[entries[e].first].gpus() > space[entries[drop].first].gpus()))
          drop = e;
      }
      if (drop == entries.size()) throw std::logic_error("hydraulis::round_relaxed: a holder alone exceeds N");
      --counts[drop];
      used -= space[entries[drop].first].gpus();
    }
    fill_left_over(entries, space, counts, used);
    Strategy s = strategy_of(entries, counts);
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

std::vector<Strategy> round_relaxed(const std::vector<std::pair<std::size_t, double>>& relaxed, Tokens longest,
                                    const SchemeSpace& space) {
  std::map<std::size_t, double> merged;
  for (const auto& [scheme, d] : relaxed)
    if (d > 0) merged[scheme] += d;
  std::vector<std::pair<std::size_t, double>> entries(merged.begin(), merged.end());
  constexpr std::size_t kMaxEntries = 20;  // 2^20 combinations; the programs here use a handful of schemes
  if (entries.size() > kMaxEntries) throw std::logic_error("hydraulis::round_relaxed: too many schemes to round");

  std::vector<std::vector<int>> choices;
  for (const auto& [scheme, d] : entries) {
    const double nearest = std::round(d);
    if (std::abs(d - nearest) < 1e-9)
      choices.push_back({static_cast<int>(nearest)});
    else
      choices.push_back({static_cast<int>(std::floor(d)), static_cast<int>(std::ceil(d))});
  }
  std::vector<Strategy> out;
  std::vector<std::size_t> pick(entries.size(), 0);
  while (true) {
    std::vector<int> counts(entries.size());
    int used = 0;
    bool holds = false;
    for (std::size_t e = 0; e < entries.size(); ++e) {
      counts[e] = choices[e][pick[e]];
      used += counts[e] * space[entries[e].first].gpus();
      if (counts[e] > 0 && space[entries[e].first].max_len >= longest) holds = true;
    }
    if (holds && used <= space.total_gpus()) {
      fill_left_over(entries, space, counts, used);
      Strategy s = strategy_of(entries, counts);
      if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(std::move(s));
    }
    std::size_t e = 0;
    while (e < pick.size() && ++pick[e] == choices[e].size()) pick[e++] = 0;
    if (e == pick.size()) break;
  }
  return out.empty() ? repair(entries, longest, space) : out;
}

}  // namespace lcsim::hydraulis
