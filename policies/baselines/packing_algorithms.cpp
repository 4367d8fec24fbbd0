#include "policies/baselines/packing_algorithms.hpp"

#include <algorithm>
#include <set>
#include <utility>

#include "policies/core/errors.hpp"

namespace lcsim {
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

Tokens pack_tokens(const Pack& pack) {
  Tokens total = 0;
  for (const auto& s : pack) total += s.tokens;
  return total;
}

std::vector<Pack> pack_random(std::span<const Sequence> sequences, Tokens capacity, Rng& rng) {
  check_fits(sequences, capacity);
  return next_fit_impl(shuffled(sequences, rng), capacity);
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
  const double keep_at = options.fill_threshold * static_cast<double>(capacity);
  std::vector<Pack> kept;
  std::vector<Pack> round = next_fit_impl(shuffled(sequences, rng), capacity);
  for (int i = 1; i < options.iterations; ++i) {
    std::vector<Sequence> pending;
    for (auto& pack : round) {
      if (static_cast<double>(pack_tokens(pack)) >= keep_at)
        kept.push_back(std::move(pack));
      else
        pending.insert(pending.end(), pack.begin(), pack.end());
    }
    round = next_fit_impl(shuffled(pending, rng), capacity);
    if (pending.empty()) break;
  }
  kept.insert(kept.end(), std::make_move_iterator(round.begin()), std::make_move_iterator(round.end()));
  return kept;
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

}  // namespace lcsim
