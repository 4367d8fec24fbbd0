#include "policies/hydraulis/packing.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>
#include <queue>
#include <stdexcept>

namespace lcsim::hydraulis {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::size_t kPolished = 3;  // V values the heuristic's local search runs on

struct Bin {
  double cost = 0;
  Tokens tokens = 0;
  std::vector<std::size_t> items;
};

/// One improving step of the local search on the most expensive bin: the move or swap that leaves the smaller
/// of max(its bin, the other bin) below the current maximum. False when none.
/// `nonnegative`: every cost >= 0, which the pruning below needs.
bool improve_once(std::vector<Bin>& bins, std::span<const Tokens> lengths, std::span<const double> costs,
                  Tokens capacity, bool nonnegative) {
  std::size_t m = 0;
  for (std::size_t b = 1; b < bins.size(); ++b)
    if (bins[b].cost > bins[m].cost) m = b;
  const double top = bins[m].cost;
  double best = top;
  std::size_t best_x = 0, best_bin = 0, best_y = 0;
  bool best_is_swap = false;
  for (std::size_t xi = 0; xi < bins[m].items.size(); ++xi) {
    const std::size_t x = bins[m].items[xi];
    // Pruning that never skips a step that would be taken (only pair < best is): with costs >= 0 and rounding
    // monotone, every move or swap of x leaves its bin at >= top - cost(x) and bin b at >= (cost(b) - cost(x)) +
    // cost(x) (a swapped-in y costs less than x).
    if (nonnegative && top - costs[x] >= best) continue;
    for (std::size_t b = 0; b < bins.size(); ++b) {
      if (b == m) continue;
      if (nonnegative && (bins[b].cost - costs[x]) + costs[x] >= best) continue;
      if (bins[b].tokens + lengths[x] <= capacity) {
        const double pair = std::max(top - costs[x], bins[b].cost + costs[x]);
        if (pair < best) {
          best = pair;
          best_x = xi;
          best_bin = b;
          best_is_swap = false;
        }
      }
      for (std::size_t yi = 0; yi < bins[b].items.size(); ++yi) {
        const std::size_t y = bins[b].items[yi];
        if (costs[y] >= costs[x]) continue;
        if (bins[b].tokens - lengths[y] + lengths[x] > capacity) continue;
        if (bins[m].tokens - lengths[x] + lengths[y] > capacity) continue;
        const double pair = std::max(top - costs[x] + costs[y], bins[b].cost - costs[y] + costs[x]);
        if (pair < best) {
          best = pair;
          best_x = xi;
          best_bin = b;
          best_y = yi;
          best_is_swap = true;
        }
      }
    }
  }
  if (!(best < top)) return false;
  Bin& from = bins[m];
  Bin& to = bins[best_bin];
  const std::size_t x = from.items[best_x];
  from.items.erase(from.items.begin() + static_cast<std::ptrdiff_t>(best_x));
  from.cost -= costs[x];
  from.tokens -= lengths[x];
  if (best_is_swap) {
    const std::size_t y = to.items[best_y];
    to.items.erase(to.items.begin() + static_cast<std::ptrdiff_t>(best_y));
    to.cost -= costs[y];
    to.tokens -= lengths[y];
    from.items.push_back(y);
    from.cost += costs[y];
    from.tokens += lengths[y];
  }
  to.items.push_back(x);
  to.cost += costs[x];
  to.tokens += lengths[x];
  return true;
}

/// LPT's visiting order: cost descending, then length descending, then index. The same for every V of a packing,
/// so it is sorted once per packing rather than once per V.
std::vector<std::size_t> lpt_order(std::span<const Tokens> lengths, std::span<const double> costs) {
  std::vector<std::size_t> order(lengths.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    if (costs[x] != costs[y]) return costs[x] > costs[y];
    return lengths[x] > lengths[y];
  });
  return order;
}

/// partition_heuristic with its LPT order given.
std::vector<std::vector<std::size_t>> partition_lpt(std::span<const Tokens> lengths, std::span<const double> costs,
                                                    std::span<const std::size_t> order, Tokens capacity, int v,
                                                    double polish_below = kInf) {
  if (v < 1) throw std::invalid_argument("hydraulis::partition_heuristic: v must be >= 1");
  // LPT: each sequence to the cheapest micro-batch with room (ties: the lower index), found through a min-heap;
  // micro-batches without room are set aside for that sequence only.
  std::vector<Bin> bins(static_cast<std::size_t>(v));
  using Entry = std::pair<double, std::size_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> cheapest;
  for (std::size_t b = 0; b < bins.size(); ++b) cheapest.push({0.0, b});
  std::vector<Entry> full;
  for (std::size_t i : order) {
    full.clear();
    while (!cheapest.empty() && bins[cheapest.top().second].tokens + lengths[i] > capacity) {
      full.push_back(cheapest.top());
      cheapest.pop();
    }
    if (cheapest.empty()) return {};
    const std::size_t chosen = cheapest.top().second;
    cheapest.pop();
    bins[chosen].items.push_back(i);
    bins[chosen].cost += costs[i];
    bins[chosen].tokens += lengths[i];
    cheapest.push({bins[chosen].cost, chosen});
    for (const auto& e : full) cheapest.push(e);
  }
  double top = 0;
  for (const auto& b : bins) top = std::max(top, b.cost);
  if (top < polish_below) {
    // Each step lowers the most expensive bin or hands the maximum to a cheaper-after-the-step bin, so the sorted
    // bin costs decrease lexicographically; the cap only bounds the work.
    const std::size_t max_steps = 4 * lengths.size() + 16;
    const bool nonnegative = std::all_of(costs.begin(), costs.end(), [](double c) { return c >= 0; });
    for (std::size_t step = 0; step < max_steps && improve_once(bins, lengths, costs, capacity, nonnegative); ++step) {
    }
  }
  std::vector<std::vector<std::size_t>> out;
  for (auto& b : bins) out.push_back(std::move(b.items));
  return out;
}

/// What pack_heuristic's first pass needs of LPT's packing for one V, without building it: the largest micro-batch
/// work as LPT sums it (from 0), the largest micro-batch cost as packing_cost sums it (c first) and the
/// micro-batches used. partition_lpt's choices exactly: the cheapest micro-batch with room, ties to the lower index.
struct LptFigures {
  double top = 0;
  double largest = 0;
  int used = 0;
};

/// Buffers of lpt_figures, reused across V: per micro-batch its sums and a min-heap of (work, index).
struct LptScratch {
  struct Slot {
    double cost;
    std::size_t bin;
    bool operator<(const Slot& o) const { return cost < o.cost || (cost == o.cost && bin < o.bin); }
  };
  std::vector<double> cost, cost_with_c;
  std::vector<Tokens> tokens;
  std::vector<std::size_t> held;  ///< sequences per micro-batch
  std::vector<Slot> heap, full;

  void sift_down(std::size_t at) {
    const std::size_t size = heap.size();
    const Slot moving = heap[at];
    for (std::size_t child = 2 * at + 1; child < size; child = 2 * at + 1) {
      if (child + 1 < size && heap[child + 1] < heap[child]) ++child;
      if (!(heap[child] < moving)) break;
      heap[at] = heap[child];
      at = child;
    }
    heap[at] = moving;
  }
  void push(const Slot& slot) {
    std::size_t at = heap.size();
    heap.push_back(slot);
    while (at > 0 && slot < heap[(at - 1) / 2]) {
      heap[at] = heap[(at - 1) / 2];
      at = (at - 1) / 2;
    }
    heap[at] = slot;
  }
  void pop() {
    heap.front() = heap.back();
    heap.pop_back();
    if (!heap.empty()) sift_down(0);
  }
};

/// False when a sequence finds no micro-batch with room.
bool lpt_figures(std::span<const Tokens> lengths, std::span<const double> costs, std::span<const std::size_t> order,
                 Tokens capacity, int v, double c0, LptScratch& scratch, LptFigures& out) {
  const auto bins = static_cast<std::size_t>(v);
  scratch.cost.assign(bins, 0.0);
  scratch.cost_with_c.assign(bins, c0);
  scratch.tokens.assign(bins, 0);
  scratch.held.assign(bins, 0);
  auto& heap = scratch.heap;
  heap.clear();
  for (std::size_t b = 0; b < bins; ++b) heap.push_back({0.0, b});  // ascending: already a min-heap
  for (std::size_t i : order) {
    // The cheapest micro-batch with room: those without room are set aside for this sequence only.
    scratch.full.clear();
    while (!heap.empty() && scratch.tokens[heap.front().bin] + lengths[i] > capacity) {
      scratch.full.push_back(heap.front());
      scratch.pop();
    }
    if (heap.empty()) return false;
    const std::size_t chosen = heap.front().bin;
    scratch.cost[chosen] += costs[i];
    scratch.cost_with_c[chosen] += costs[i];
    scratch.tokens[chosen] += lengths[i];
    ++scratch.held[chosen];
    heap.front().cost = scratch.cost[chosen];  // its work only grows: down the heap
    scratch.sift_down(0);
    for (const auto& slot : scratch.full) scratch.push(slot);
  }
  out = LptFigures{};
  for (std::size_t b = 0; b < bins; ++b) {
    out.top = std::max(out.top, scratch.cost[b]);
    if (scratch.held[b] == 0) continue;
    out.largest = std::max(out.largest, scratch.cost_with_c[b]);
    ++out.used;
  }
  return true;
}

/// A packing's micro-batches in execution order, each sorted: most expensive first (ties: lower first index), see
/// the header. Idempotent.
PackingResult finish_packing(PackingResult result, std::span<const Tokens> lengths, const SchemeInfo& scheme) {
  auto& best = result.micro_batches;
  for (auto& mb : best) std::sort(mb.begin(), mb.end());
  std::vector<double> mb_costs;
  for (const auto& mb : best) {
    double c = 0;
    for (std::size_t i : mb) c += scheme.work(lengths[i]);
    mb_costs.push_back(c);
  }
  std::vector<std::size_t> order(best.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    if (mb_costs[x] != mb_costs[y]) return mb_costs[x] > mb_costs[y];
    return best[x].front() < best[y].front();
  });
  std::vector<std::vector<std::size_t>> ordered;
  for (std::size_t k : order) ordered.push_back(std::move(best[k]));
  best = std::move(ordered);
  return result;
}

/// Solves one V over the packable sequences (`order`: their lpt_order): a partition into v micro-batches whose
/// costliest one works less than `below` (empty: none found); sets `optimal` when that answer is proven.
/// What both solvers start from: the sequences over MaxLen, each alone (and the costliest of them), and the rest
/// with their lengths and work, summed.
struct SplitAtMaxLen {
  std::vector<std::vector<std::size_t>> alone;
  std::vector<std::size_t> rest;
  double alone_top = 0;
  std::vector<Tokens> sub_lengths;
  std::vector<double> sub_costs;
  Tokens total = 0;
  double work_total = 0;
  double work_top = 0;
};

SplitAtMaxLen split_at_max_len(std::span<const Tokens> lengths, const SchemeInfo& scheme) {
  SplitAtMaxLen s;
  const double c0 = scheme.overhead();
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] > scheme.max_len) {
      s.alone.push_back({i});
      s.alone_top = std::max(s.alone_top, c0 + scheme.work(lengths[i]));
    } else {
      s.rest.push_back(i);
    }
  }
  for (std::size_t i : s.rest) {
    s.sub_lengths.push_back(lengths[i]);
    s.sub_costs.push_back(scheme.work(lengths[i]));
    s.total += lengths[i];
    s.work_total += s.sub_costs.back();
    s.work_top = std::max(s.work_top, s.sub_costs.back());
  }
  return s;
}

using PartitionSolver = std::function<std::vector<std::vector<std::size_t>>(
    std::span<const Tokens>, std::span<const double>, std::span<const std::size_t> order, int v, double below,
    bool& optimal)>;

/// Shared driver of both solvers: over-long sequences alone, the rest over the V range, starting from `start` (a
/// packing already known, e.g. the heuristic's, or none). A V whose lower bound -- the costliest sequence or the
/// mean load per micro-batch, times PP - 1 + V -- cannot beat the best so far is skipped: that proves it.
PackingResult pack_with(std::span<const Tokens> lengths, const SchemeInfo& scheme, const PartitionSolver& solve,
                        const PackingResult* start, std::span<const int> only = {}) {
  PackingResult result;
  result.proven_optimal = true;
  if (lengths.empty()) return result;
  const double c0 = scheme.overhead();
  SplitAtMaxLen split = split_at_max_len(lengths, scheme);
  // Named references, not a structured binding: the lambdas below capture them (clang refuses bindings there).
  auto& alone = split.alone;
  const auto& rest = split.rest;
  const auto& sub_lengths = split.sub_lengths;
  const auto& sub_costs = split.sub_costs;
  const double alone_top = split.alone_top, work_total = split.work_total, work_top = split.work_top;
  const Tokens total = split.total;

  const std::vector<std::size_t> visiting = lpt_order(sub_lengths, sub_costs);
  std::vector<std::vector<std::size_t>> best = start ? start->micro_batches : alone;
  double best_cost = start ? start->cost : rest.empty() ? packing_cost(lengths, alone, scheme) : kInf;
  if (!rest.empty()) {
    const MicroBatchRange range = micro_batch_range(total, rest.size(), scheme);
    bool found = start != nullptr;
    for (int v = range.lo; v <= range.hi || (!found && v <= static_cast<int>(rest.size())); ++v) {
      if (!only.empty() && std::find(only.begin(), only.end(), v) == only.end()) continue;
      const double slots = scheme.scheme.pp - 1 + v + static_cast<double>(alone.size());
      const double bound = std::max(alone_top, c0 + std::max(work_top, work_total / v)) * slots;
      if (found && bound >= best_cost) continue;
      bool optimal = false;
      auto part = solve(sub_lengths, sub_costs, visiting, v, best_cost / slots - c0, optimal);
      result.proven_optimal = result.proven_optimal && optimal;
      if (part.empty()) continue;
      found = true;
      std::vector<std::vector<std::size_t>> candidate = alone;
      for (auto& mb : part) {
        if (mb.empty()) continue;
        for (auto& i : mb) i = rest[i];
        candidate.push_back(std::move(mb));
      }
      const double cost = packing_cost(lengths, candidate, scheme);
      if (cost < best_cost) {
        best_cost = cost;
        best = std::move(candidate);
      }
    }
    if (!found) throw std::logic_error("hydraulis packing: no V admits a packing (one sequence per micro-batch must)");
  }
  result.micro_batches = std::move(best);
  result.cost = best_cost;
  return finish_packing(std::move(result), lengths, scheme);
}

}  // namespace

double packing_cost(std::span<const Tokens> lengths, const std::vector<std::vector<std::size_t>>& micro_batches,
                    const SchemeInfo& scheme) {
  double largest = 0;
  int count = 0;
  for (const auto& mb : micro_batches) {
    if (mb.empty()) continue;
    double cost = scheme.overhead();
    for (std::size_t i : mb) cost += scheme.work(lengths[i]);
    largest = std::max(largest, cost);
    ++count;
  }
  return count == 0 ? 0 : largest * (scheme.scheme.pp - 1 + count);
}

MicroBatchRange micro_batch_range(Tokens total, std::size_t count, const SchemeInfo& scheme) {
  if (count == 0 || scheme.max_len <= 0 || scheme.util_len <= 0)
    throw std::invalid_argument("hydraulis::micro_batch_range: needs sequences and positive MaxLen, UtilLen");
  MicroBatchRange range;
  range.lo = static_cast<int>(std::max<Tokens>(1, (total + scheme.max_len - 1) / scheme.max_len));
  range.hi = static_cast<int>(std::min<Tokens>(static_cast<Tokens>(count), total / scheme.util_len));
  range.hi = std::max(range.lo, range.hi);
  return range;
}

std::vector<std::vector<std::size_t>> partition_heuristic(std::span<const Tokens> lengths,
                                                          std::span<const double> costs, Tokens capacity, int v,
                                                          double polish_below) {
  return partition_lpt(lengths, costs, lpt_order(lengths, costs), capacity, v, polish_below);
}

double packing_lower_bound(std::span<const Tokens> lengths, const SchemeInfo& scheme) {
  // pack_with's per-V bound, minimised over every V it may reach: a packing with V non-empty micro-batches of the
  // packable sequences needs V >= ceil(their tokens / MaxLen), and V <= their count.
  const double c0 = scheme.overhead();
  double alone_top = 0;
  double alone = 0;
  Tokens total = 0;
  std::size_t count = 0;
  double work_total = 0;
  double work_top = 0;
  for (const Tokens l : lengths) {
    if (l > scheme.max_len) {
      alone_top = std::max(alone_top, c0 + scheme.work(l));
      alone += 1;
      continue;
    }
    total += l;
    ++count;
    work_total += scheme.work(l);
    work_top = std::max(work_top, scheme.work(l));
  }
  if (count == 0) return lengths.empty() ? 0 : alone_top * (scheme.scheme.pp - 1 + alone);
  double best = kInf;
  const auto lo = static_cast<std::size_t>(std::max<Tokens>(1, (total + scheme.max_len - 1) / scheme.max_len));
  for (std::size_t v = lo; v <= count; ++v) {
    const double slots = scheme.scheme.pp - 1 + static_cast<double>(v) + alone;
    best = std::min(best, std::max(alone_top, c0 + std::max(work_top, work_total / static_cast<double>(v))) * slots);
  }
  return best;
}

PackingResult pack_heuristic(std::span<const Tokens> lengths, const SchemeInfo& scheme) {
  // LPT for every V of the range, then the local search on the few V whose LPT packing was best: it rarely gains
  // more than a few %, and on hundreds of short sequences it costs far more than LPT. pack_with's steps with the
  // heuristic's solvers, except that the first pass prices each V's LPT packing without building it and builds
  // only the packing kept.
  PackingResult result;
  if (lengths.empty()) return result;
  const double c0 = scheme.overhead();
  SplitAtMaxLen split = split_at_max_len(lengths, scheme);
  // Named references, not a structured binding: the lambdas below capture them (clang refuses bindings there).
  auto& alone = split.alone;
  const auto& rest = split.rest;
  const auto& sub_lengths = split.sub_lengths;
  const auto& sub_costs = split.sub_costs;
  const double alone_top = split.alone_top, work_total = split.work_total, work_top = split.work_top;
  const Tokens total = split.total;
  if (rest.empty()) {
    result.micro_batches = alone;
    result.cost = packing_cost(lengths, alone, scheme);
    return finish_packing(std::move(result), lengths, scheme);
  }
  const std::vector<std::size_t> visiting = lpt_order(sub_lengths, sub_costs);
  const MicroBatchRange range = micro_batch_range(total, rest.size(), scheme);
  const auto slots_of = [&](int v) { return scheme.scheme.pp - 1 + v + static_cast<double>(alone.size()); };
  const auto bound_of = [&](int v) {
    return std::max(alone_top, c0 + std::max(work_top, work_total / v)) * slots_of(v);
  };
  // A packing of these V micro-batches: the over-long sequences alone, then the non-empty ones.
  const auto packing_of = [&](std::vector<std::vector<std::size_t>> part) {
    std::vector<std::vector<std::size_t>> candidate = alone;
    for (auto& mb : part) {
      if (mb.empty()) continue;
      for (auto& i : mb) i = rest[i];
      candidate.push_back(std::move(mb));
    }
    return candidate;
  };

  // First pass: LPT for every V (the bound skips those that cannot beat the best so far).
  std::vector<std::pair<double, int>> lpt;  // (objective, V)
  LptScratch scratch;
  double best_cost = kInf;
  int best_v = 0;
  bool found = false;
  for (int v = range.lo; v <= range.hi || (!found && v <= static_cast<int>(rest.size())); ++v) {
    if (found && bound_of(v) >= best_cost) continue;
    LptFigures figures;
    if (!lpt_figures(sub_lengths, sub_costs, visiting, scheme.max_len, v, c0, scratch, figures)) continue;
    found = true;
    lpt.emplace_back((figures.top + c0) * (scheme.scheme.pp - 1 + v), v);
    // packing_cost of that packing.
    const int count = static_cast<int>(alone.size()) + figures.used;
    const double cost = std::max(alone_top, figures.largest) * (scheme.scheme.pp - 1 + count);
    if (cost < best_cost) {
      best_cost = cost;
      best_v = v;
    }
  }
  if (!found) throw std::logic_error("hydraulis packing: no V admits a packing (one sequence per micro-batch must)");

  // Second pass: the local search on the 3 V whose LPT packing was best, within the range.
  std::stable_sort(lpt.begin(), lpt.end());
  std::vector<std::vector<std::size_t>> best;
  bool polished = false;
  for (int v = range.lo; v <= range.hi; ++v) {
    const auto polish_end = lpt.begin() + static_cast<std::ptrdiff_t>(std::min(lpt.size(), kPolished));
    if (std::find_if(lpt.begin(), polish_end, [&](const auto& e) { return e.second == v; }) == polish_end) continue;
    if (bound_of(v) >= best_cost) continue;
    auto part = partition_lpt(sub_lengths, sub_costs, visiting, scheme.max_len, v);
    if (part.empty()) continue;
    std::vector<std::vector<std::size_t>> candidate = packing_of(std::move(part));
    const double cost = packing_cost(lengths, candidate, scheme);
    if (cost < best_cost) {
      best_cost = cost;
      best = std::move(candidate);
      polished = true;
    }
  }
  if (polished)
    result.micro_batches = std::move(best);
  else if (best_v > 0)
    result.micro_batches = packing_of(partition_lpt(sub_lengths, sub_costs, visiting, scheme.max_len, best_v, 0.0));
  else
    result.micro_batches = alone;
  result.cost = best_cost;
  return finish_packing(std::move(result), lengths, scheme);
}

PackingResult pack_exact(std::span<const Tokens> lengths, const SchemeInfo& scheme, const MilpOptions& options) {
  const PackingResult heuristic = pack_heuristic(lengths, scheme);
  return pack_with(
      lengths, scheme,
      [&](std::span<const Tokens> l, std::span<const double> c, std::span<const std::size_t> order, int v, double below,
          bool& optimal) {
        MilpPartition solved =
            partition_milp(l, c, scheme.max_len, v, below, partition_lpt(l, c, order, scheme.max_len, v), options);
        optimal = solved.optimal;
        return solved.micro_batches;
      },
      lengths.empty() ? nullptr : &heuristic);
}

}  // namespace lcsim::hydraulis
