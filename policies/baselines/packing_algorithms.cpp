#include "policies/baselines/packing_algorithms.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <utility>

#include "base/errors.hpp"

namespace lcsim::baselines {
namespace {

void check_fits(std::span<const Sequence> sequences, Tokens capacity) {
  if (capacity <= 0) throw PlanningError("packing: capacity must be positive, got " + std::to_string(capacity));
  for (const auto& s : sequences) {
    if (s.tokens > capacity)
      throw PlanningError("packing: sequence " + std::to_string(s.id) + " has " + std::to_string(s.tokens) +
                          " tokens, more than the packing length " + std::to_string(capacity));
  }
}

std::vector<Sequence> shuffled(std::span<const Sequence> sequences, Rng& rng) {
  std::vector<Sequence> order(sequences.begin(), sequences.end());
  rng.shuffle(order);
  return order;
}

// Random next fit and ISF shuffle and cut flat arrays of items and build the packs once at the end: a shuffle
// permutes any element type with the same draws, and next fit's packs are runs of consecutive items, so this
// gives the packs per-pack vectors gave without their allocations. Items are 8 bytes (32-bit id and tokens)
// when every sequence fits, which halves the shuffles' memory traffic (1M samples: malloc/free and 16-byte
// random swaps took most of the time).
struct NarrowItem {
  std::uint32_t id;
  std::uint32_t tokens;
};

Tokens item_tokens(const Sequence& s) {
  return s.tokens;
}
Tokens item_tokens(const NarrowItem& item) {
  return static_cast<Tokens>(item.tokens);
}
Sequence to_sequence(const Sequence& s) {
  return s;
}
Sequence to_sequence(const NarrowItem& item) {
  return {static_cast<std::int64_t>(item.id), static_cast<Tokens>(item.tokens)};
}

/// Rng::shuffle's permutation (the same draws, the same swaps in the same order) with each swap's random target
/// drawn kAhead swaps early and prefetched: over a million items the swaps wait on cache misses otherwise.
template <class T>
void shuffle_prefetched(std::vector<T>& items, Rng& rng) {
  constexpr std::size_t kAhead = 64;
  const std::size_t n = items.size();
  if (n < 2) return;
  const std::size_t swaps = n - 1;  // swap k exchanges items[n-1-k] with items[below(n-k)]
  std::size_t target[kAhead];
  std::size_t drawn = 0;
  const auto draw = [&] {
    const auto j = static_cast<std::size_t>(rng.below(n - drawn));
    __builtin_prefetch(&items[j], 1);
    target[drawn % kAhead] = j;
    ++drawn;
  };
  while (drawn < std::min(kAhead, swaps)) draw();
  for (std::size_t k = 0; k < swaps; ++k) {
    const std::size_t j = target[k % kAhead];
    if (drawn < swaps) draw();  // fills the slot just read
    std::swap(items[n - 1 - k], items[j]);
  }
}

/// Packs as runs of one flat item array: pack k is items[ends[k-1], ends[k]).
template <class Item>
struct FlatPacks {
  std::vector<Item> items;
  std::vector<std::size_t> ends;

  void add(std::span<const Item> run) {
    items.insert(items.end(), run.begin(), run.end());
    ends.push_back(items.size());
  }

  std::vector<Pack> build() const {
    std::vector<Pack> packs(ends.size());
    std::size_t first = 0;
    for (std::size_t k = 0; k < ends.size(); ++k) {
      packs[k].reserve(ends[k] - first);
      for (std::size_t i = first; i < ends[k]; ++i) packs[k].push_back(to_sequence(items[i]));
      first = ends[k];
    }
    return packs;
  }
};

/// Next fit over `order`, calling on_pack(run, tokens) for every pack, cut exactly as next_fit_impl cuts.
template <class Item, class OnPack>
void next_fit_runs(std::span<const Item> order, Tokens capacity, OnPack&& on_pack) {
  std::size_t first = 0;
  Tokens held = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const Tokens t = item_tokens(order[i]);
    if (i > first && held + t > capacity) {
      on_pack(order.subspan(first, i - first), held);
      first = i;
      held = 0;
    }
    held += t;
  }
  if (first < order.size()) on_pack(order.subspan(first), held);
}

/// ISF (see IsfOptions) on items in input order; iterations == 1 is random next fit.
template <class Item>
std::vector<Pack> isf_flat(std::vector<Item> order, Tokens capacity, Rng& rng, int iterations, double keep_at) {
  shuffle_prefetched(order, rng);
  FlatPacks<Item> kept;
  kept.items.reserve(order.size());
  std::vector<Item> pending;
  pending.reserve(order.size());
  for (int round = 1; round < iterations && !order.empty(); ++round) {
    next_fit_runs<Item>(order, capacity, [&](std::span<const Item> run, Tokens held) {
      if (static_cast<double>(held) >= keep_at)
        kept.add(run);
      else
        pending.insert(pending.end(), run.begin(), run.end());
    });
    order.swap(pending);
    pending.clear();
    shuffle_prefetched(order, rng);
  }
  next_fit_runs<Item>(order, capacity, [&](std::span<const Item> run, Tokens) { kept.add(run); });
  return kept.build();
}

/// isf_flat on NarrowItems when every id and token count fits in 32 bits (always, in practice), else on copies.
std::vector<Pack> isf_packs(std::span<const Sequence> sequences, Tokens capacity, Rng& rng, int iterations,
                            double keep_at) {
  constexpr auto kMax = static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max());
  const auto fits = [&](const Sequence& s) { return s.id >= 0 && s.id <= kMax && s.tokens >= 0 && s.tokens <= kMax; };
  if (!std::all_of(sequences.begin(), sequences.end(), fits))
    return isf_flat(std::vector<Sequence>(sequences.begin(), sequences.end()), capacity, rng, iterations, keep_at);
  std::vector<NarrowItem> items(sequences.size());
  for (std::size_t i = 0; i < sequences.size(); ++i)
    items[i] = {static_cast<std::uint32_t>(sequences[i].id), static_cast<std::uint32_t>(sequences[i].tokens)};
  return isf_flat(std::move(items), capacity, rng, iterations, keep_at);
}

std::vector<Pack> next_fit_impl(std::span<const Sequence> order, Tokens capacity) {
  std::vector<Pack> packs;
  Tokens held = 0;
  for (const auto& s : order) {
    if (packs.empty() || held + s.tokens > capacity) {
      packs.emplace_back();
      held = 0;
    }
    packs.back().push_back(s);
    held += s.tokens;
  }
  return packs;
}

/// First fit in O(n log n): a max segment tree over the free space of n pack slots finds the leftmost slot that
/// fits. Slots open left to right, so the leftmost fitting slot is an open pack or the next fresh one.
std::vector<Pack> first_fit_impl(std::span<const Sequence> order, Tokens capacity) {
  const std::size_t n = order.size();
  std::size_t leaves = 1;
  while (leaves < std::max<std::size_t>(n, 1)) leaves *= 2;
  std::vector<Tokens> tree(2 * leaves, capacity);
  std::vector<Pack> packs;
  for (const auto& s : order) {
    std::size_t node = 1;
    while (node < leaves) node = tree[2 * node] >= s.tokens ? 2 * node : 2 * node + 1;
    const std::size_t slot = node - leaves;
    if (slot >= packs.size()) packs.resize(slot + 1);
    packs[slot].push_back(s);
    tree[node] -= s.tokens;
    for (node /= 2; node >= 1; node /= 2) tree[node] = std::max(tree[2 * node], tree[2 * node + 1]);
  }
  return packs;
}

/// Best fit: the open pack with the least free space that still fits (ties: the earliest pack), else a new one.
std::vector<Pack> best_fit_impl(std::span<const Sequence> order, Tokens capacity) {
  std::vector<Pack> packs;
  std::set<std::pair<Tokens, std::size_t>> free_space;  // (free tokens, pack index)
  for (const auto& s : order) {
    auto it = free_space.lower_bound({s.tokens, 0});
    std::size_t index = packs.size();
    Tokens free = capacity;
    if (it != free_space.end()) {
      index = it->second;
      free = it->first;
      free_space.erase(it);
    } else {
      packs.emplace_back();
    }
    packs[index].push_back(s);
    free_space.emplace(free - s.tokens, index);
  }
  return packs;
}

}  // namespace

std::vector<Pack> next_fit_in_order(std::span<const Sequence> order, Tokens capacity) {
  check_fits(order, capacity);
  return next_fit_impl(order, capacity);
}

std::vector<Pack> first_fit_in_order(std::span<const Sequence> order, Tokens capacity) {
  check_fits(order, capacity);
  return first_fit_impl(order, capacity);
}

std::vector<Pack> best_fit_in_order(std::span<const Sequence> order, Tokens capacity) {
  check_fits(order, capacity);
  return best_fit_impl(order, capacity);
}

std::string_view to_string(PackingAlgorithm algorithm) {
  switch (algorithm) {
    case PackingAlgorithm::Isf:
      return "isf";
    case PackingAlgorithm::Ffd:
      return "ffd";
    case PackingAlgorithm::Ffs:
      return "ffs";
    case PackingAlgorithm::Bfs:
      return "bfs";
    case PackingAlgorithm::Random:
      return "random";
  }
  return "?";
}

std::optional<PackingAlgorithm> packing_algorithm_from_string(std::string_view name) {
  for (auto a : {PackingAlgorithm::Isf, PackingAlgorithm::Ffd, PackingAlgorithm::Ffs, PackingAlgorithm::Bfs,
                 PackingAlgorithm::Random})
    if (to_string(a) == name) return a;
  return std::nullopt;
}

std::string packing_algorithm_names() {
  return "isf, ffd, ffs, bfs, random";
}

IsfOptions read_isf_options(JsonObjectReader& reader) {
  IsfOptions isf;
  if (reader.has("isf_iterations")) isf.iterations = static_cast<int>(reader.integer_in("isf_iterations", 1, 1 << 20));
  if (reader.has("isf_fill_threshold")) {
    isf.fill_threshold = reader.required<double>("isf_fill_threshold");
    if (!(isf.fill_threshold > 0 && isf.fill_threshold <= 1)) reader.fail("isf_fill_threshold", "must be in (0, 1]");
  }
  return isf;
}

Tokens pack_tokens(const Pack& pack) {
  Tokens total = 0;
  for (const auto& s : pack) total += s.tokens;
  return total;
}

std::vector<Pack> pack_random(std::span<const Sequence> sequences, Tokens capacity, Rng& rng) {
  check_fits(sequences, capacity);
  return isf_packs(sequences, capacity, rng, 1, 0);
}

std::vector<Pack> pack_ffd(std::span<const Sequence> sequences, Tokens capacity) {
  check_fits(sequences, capacity);
  std::vector<Sequence> order(sequences.begin(), sequences.end());
  std::stable_sort(order.begin(), order.end(),
                   [](const Sequence& a, const Sequence& b) { return a.tokens > b.tokens; });
  return first_fit_impl(order, capacity);
}

std::vector<Pack> pack_ffs(std::span<const Sequence> sequences, Tokens capacity, Rng& rng) {
  check_fits(sequences, capacity);
  return first_fit_impl(shuffled(sequences, rng), capacity);
}

std::vector<Pack> pack_bfs(std::span<const Sequence> sequences, Tokens capacity, Rng& rng) {
  check_fits(sequences, capacity);
  return best_fit_impl(shuffled(sequences, rng), capacity);
}

std::vector<Pack> pack_isf(std::span<const Sequence> sequences, Tokens capacity, Rng& rng, const IsfOptions& options) {
  check_fits(sequences, capacity);
  if (options.iterations < 1)
    throw PlanningError("packing: ISF iterations must be >= 1, got " + std::to_string(options.iterations));
  return isf_packs(sequences, capacity, rng, options.iterations,
                   options.fill_threshold * static_cast<double>(capacity));
}

std::vector<Pack> pack_sequences(PackingAlgorithm algorithm, std::span<const Sequence> sequences, Tokens capacity,
                                 Rng& rng, const IsfOptions& isf) {
  switch (algorithm) {
    case PackingAlgorithm::Isf:
      return pack_isf(sequences, capacity, rng, isf);
    case PackingAlgorithm::Ffd:
      return pack_ffd(sequences, capacity);
    case PackingAlgorithm::Ffs:
      return pack_ffs(sequences, capacity, rng);
    case PackingAlgorithm::Bfs:
      return pack_bfs(sequences, capacity, rng);
    case PackingAlgorithm::Random:
      return pack_random(sequences, capacity, rng);
  }
  throw PlanningError("packing: unknown algorithm");
}

}  // namespace lcsim::baselines
