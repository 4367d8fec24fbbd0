#pragma once
// HBP balance packing (Sec. 4.2, Algorithm 2; Appendix J: GroupData, GreedyFill, Attention Balance Sort) as pure
// functions: sequences and hierarchical packing lengths in, packs per group and shuffled batches out. Every
// sequence ends in exactly one pack; no pack of group i holds more than l_i tokens. Random choices (ISF, the
// unsorted order, the shuffle across groups) draw only from the given Rng.
#include <cstddef>
#include <span>
#include <vector>

#include "policies/baselines/packing_algorithms.hpp"

namespace lcsim::hbp {

/// HBP packs its groups with the baselines' packing algorithms (ISF).
using Pack = baselines::Pack;

/// Algorithm 5: D_i holds the sequences with l_{i-1} < tokens <= l_i (l_0 = 0), in input order. `lengths` must be
/// strictly ascending; a sequence longer than the last length is a PlanningError naming it.
std::vector<std::vector<Sequence>> group_data(std::span<const Sequence> data, std::span<const Tokens> lengths);

/// Algorithm 6: for every pack in order, for every source in order (HBP: D_{i-1}, ..., D_1), for every sequence of
/// the source in order, add it when it still fits in `capacity`; taken sequences leave their source. Runs in
/// O((packs x sources + taken) log n) with a min-tree per source instead of the paper's scans.
void greedy_fill(std::vector<Pack>& packs, Tokens capacity, std::span<std::vector<Sequence>* const> sources);

/// Attention complexity of a pack (Sec. 3.1, Algorithm 7): the sum of its squared sequence lengths.
double attention_cost(const Pack& pack);
/// Algorithm 7: packs in ascending attention cost (stable: equal costs keep their order).
void attention_balance_sort(std::vector<Pack>& packs);

struct BalancePackingOptions {
  bool balance_sort = true;  ///< false: each group's packs in a seeded random order instead (HBP without "Balance")
  baselines::IsfOptions isf;
};

/// Algorithm 2, lines 10-15 before batching: for i = n down to 1, G_i = ISF packing of D_i at l_i, GreedyFill from
/// D_{i-1}..D_1, then sorted by attention cost (or shuffled). Returns G_1..G_n (possibly empty groups).
std::vector<std::vector<Pack>> balance_pack(std::span<const Sequence> data, std::span<const Tokens> lengths, Rng& rng,
                                            const BalancePackingOptions& options = {});

/// One global batch of packs, all from one group.
struct PackBatch {
  std::size_t group = 0;
  std::vector<Pack> packs;
};

/// Balance batching and Shuffle(B): each group's packs, in their order, cut into runs of packs_per_batch[i] (the
/// group's last batch may be shorter), then every batch of every group in one seeded random order.
std::vector<PackBatch> make_batches(std::vector<std::vector<Pack>> groups, std::span<const std::size_t> packs_per_batch,
                                    Rng& rng);

/// Curriculum learning (Sec. 4.3): the first `iterations` batches are the earliest batches of groups below
/// `short_groups` (group index < short_groups) in the current order; every other batch follows in its current
/// order. When the short groups hold fewer batches, all of them come first. Returns how many batches it put first.
std::size_t apply_curriculum(std::vector<PackBatch>& batches, std::size_t iterations, std::size_t short_groups);

}  // namespace lcsim::hbp
