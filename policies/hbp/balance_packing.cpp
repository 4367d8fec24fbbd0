#include "policies/hbp/balance_packing.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "base/errors.hpp"

namespace lcsim::hbp {
namespace {

/// Min segment tree over a source's sequence lengths; a taken sequence counts as infinitely long.
class MinTree {
 public:
  static constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

  explicit MinTree(const std::vector<Sequence>& items) {
    while (leaves_ < items.size()) leaves_ *= 2;
    tree_.assign(2 * leaves_, kTaken);
    for (std::size_t i = 0; i < items.size(); ++i) tree_[leaves_ + i] = items[i].tokens;
    for (std::size_t node = leaves_ - 1; node >= 1; --node)
      tree_[node] = std::min(tree_[2 * node], tree_[2 * node + 1]);
  }

  /// The leftmost remaining sequence of at most `limit` tokens, or kNone.
  std::size_t leftmost_at_most(Tokens limit) const {
    if (tree_[1] > limit) return kNone;
    std::size_t node = 1;
    while (node < leaves_) node = tree_[2 * node] <= limit ? 2 * node : 2 * node + 1;
    return node - leaves_;
  }

  void take(std::size_t index) {
    std::size_t node = leaves_ + index;
    tree_[node] = kTaken;
    for (node /= 2; node >= 1; node /= 2) tree_[node] = std::min(tree_[2 * node], tree_[2 * node + 1]);
  }

 private:
  static constexpr Tokens kTaken = std::numeric_limits<Tokens>::max();
  std::size_t leaves_ = 1;
  std::vector<Tokens> tree_;
};

}  // namespace

std::vector<std::vector<Sequence>> group_data(std::span<const Sequence> data, std::span<const Tokens> lengths) {
  if (lengths.empty()) throw std::invalid_argument("group_data: no packing lengths");
  for (std::size_t i = 0; i < lengths.size(); ++i)
    if (lengths[i] < 1 || (i > 0 && lengths[i] <= lengths[i - 1]))
      throw std::invalid_argument("group_data: packing lengths must be positive and strictly ascending");
  std::vector<std::vector<Sequence>> groups(lengths.size());
  for (const auto& s : data) {
    const auto it = std::lower_bound(lengths.begin(), lengths.end(), s.tokens);  // first l_i >= tokens
    if (it == lengths.end())
      throw PlanningError("HBP: sequence " + std::to_string(s.id) + " has " + std::to_string(s.tokens) +
                          " tokens, more than the longest packing group " + std::to_string(lengths.back()));
    groups[static_cast<std::size_t>(it - lengths.begin())].push_back(s);
  }
  return groups;
}

void greedy_fill(std::vector<Pack>& packs, Tokens capacity, std::span<std::vector<Sequence>* const> sources) {
  if (packs.empty()) return;
  std::vector<MinTree> trees;
  std::vector<std::vector<char>> taken;
  for (const auto* source : sources) {
    trees.emplace_back(*source);
    taken.emplace_back(source->size(), 0);
  }
  for (auto& pack : packs) {
    Tokens free = capacity - baselines::pack_tokens(pack);
    for (std::size_t j = 0; j < sources.size(); ++j) {
      // The paper scans D_j in order and adds what fits; as the free space only shrinks, every sequence the scan
      // passed over is still too long, so the next one it adds is the leftmost remaining one that fits.
      for (std::size_t k = trees[j].leftmost_at_most(free); k != MinTree::kNone; k = trees[j].leftmost_at_most(free)) {
        const Sequence& s = (*sources[j])[k];
        pack.push_back(s);
        free -= s.tokens;
        trees[j].take(k);
        taken[j][k] = 1;
      }
    }
  }
  for (std::size_t j = 0; j < sources.size(); ++j) {
    auto& source = *sources[j];
    std::size_t kept = 0;
    for (std::size_t k = 0; k < source.size(); ++k)
      if (!taken[j][k]) source[kept++] = source[k];
    source.resize(kept);
  }
}

double attention_cost(const Pack& pack) {
  double cost = 0;
  for (const auto& s : pack) cost += static_cast<double>(s.tokens) * static_cast<double>(s.tokens);
  return cost;
}

void attention_balance_sort(std::vector<Pack>& packs) {
  std::vector<std::pair<double, std::size_t>> order;
  order.reserve(packs.size());
  for (std::size_t i = 0; i < packs.size(); ++i) order.emplace_back(attention_cost(packs[i]), i);
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Pack> sorted;
  sorted.reserve(packs.size());
  for (const auto& [cost, index] : order) sorted.push_back(std::move(packs[index]));
  packs = std::move(sorted);
}

std::vector<std::vector<Pack>> balance_pack(std::span<const Sequence> data, std::span<const Tokens> lengths, Rng& rng,
                                            const BalancePackingOptions& options) {
  std::vector<std::vector<Sequence>> d = group_data(data, lengths);
  std::vector<std::vector<Pack>> g(d.size());
  for (std::size_t i = d.size(); i-- > 0;) {
    // Each group draws from its own stream, so one group's packing does not shift another's.
    Rng group_rng = rng.split(i);
    if (d[i].empty()) continue;
    g[i] = baselines::pack_isf(d[i], lengths[i], group_rng, options.isf);
    std::vector<std::vector<Sequence>*> sources;
    for (std::size_t j = i; j-- > 0;) sources.push_back(&d[j]);
    greedy_fill(g[i], lengths[i], sources);
    if (options.balance_sort)
      attention_balance_sort(g[i]);
    else
      group_rng.shuffle(g[i]);
  }
  return g;
}

std::vector<PackBatch> make_batches(std::vector<std::vector<Pack>> groups, std::span<const std::size_t> packs_per_batch,
                                    Rng& rng) {
  if (packs_per_batch.size() != groups.size())
    throw std::invalid_argument("make_batches: one batch size per group is needed");
  std::vector<PackBatch> batches;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    if (packs_per_batch[i] < 1) throw std::invalid_argument("make_batches: batch sizes must be >= 1");
    auto& packs = groups[i];
    for (std::size_t first = 0; first < packs.size(); first += packs_per_batch[i]) {
      const std::size_t last = std::min(packs.size(), first + packs_per_batch[i]);
      PackBatch batch;
      batch.group = i;
      batch.packs.assign(std::make_move_iterator(packs.begin() + static_cast<std::ptrdiff_t>(first)),
                         std::make_move_iterator(packs.begin() + static_cast<std::ptrdiff_t>(last)));
      batches.push_back(std::move(batch));
    }
  }
  rng.shuffle(batches);
  return batches;
}

std::size_t apply_curriculum(std::vector<PackBatch>& batches, std::size_t iterations, std::size_t short_groups) {
  std::vector<PackBatch> ordered;
  std::vector<PackBatch> rest;
  ordered.reserve(batches.size());
  for (auto& batch : batches) {
    if (ordered.size() < iterations && batch.group < short_groups)
      ordered.push_back(std::move(batch));
    else
      rest.push_back(std::move(batch));
  }
  const std::size_t first = ordered.size();
  ordered.insert(ordered.end(), std::make_move_iterator(rest.begin()), std::make_move_iterator(rest.end()));
  batches = std::move(ordered);
  return first;
}

}  // namespace lcsim::hbp
