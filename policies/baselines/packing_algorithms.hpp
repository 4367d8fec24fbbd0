#pragma once
// Fixed-length packing algorithms (HBP Appendix A, Table 13) as pure functions: sequences in, packs of at most
// `capacity` tokens out, every sequence in exactly one pack. Every sequence must fit (tokens <= capacity): a
// longer one is a PlanningError naming it -- packing never truncates. Randomised ones draw only from `rng`.
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_reader.hpp"
#include "base/random.hpp"
#include "model/workload.hpp"

namespace lcsim::baselines {

using Pack = std::vector<Sequence>;

enum class PackingAlgorithm {
  Isf,     ///< iterative sampling and filtering (OmniBal)
  Ffd,     ///< first fit decreasing
  Ffs,     ///< first fit shuffle
  Bfs,     ///< best fit shuffle
  Random,  ///< random order, next fit
};
std::string_view to_string(PackingAlgorithm algorithm);
std::optional<PackingAlgorithm> packing_algorithm_from_string(std::string_view name);
/// "isf, ffd, ffs, bfs, random", for messages.
std::string packing_algorithm_names();

/// ISF as in OmniBal's reference code (ModelTC/OmniBal, BalancedDataset.iter_random_groups): shuffle and
/// next-fit pack; keep the packs filled to at least `fill_threshold` x capacity; shuffle and re-pack the
/// sequences of the other packs; after `iterations` rounds in all, the last round's packs are kept as they are.
struct IsfOptions {
  int iterations = 10;
  double fill_threshold = 0.99;  ///< OmniBal's example: llm_thresh 4050 of 4096 tokens
};
/// A policy's "isf_iterations" and "isf_fill_threshold" options (every policy that packs with ISF takes them),
/// defaults where absent; InputError naming the key for a value out of range.
IsfOptions read_isf_options(JsonObjectReader& reader);

/// The building blocks, in the given order: next fit (one open pack), first fit (the earliest pack that fits),
/// best fit (the fitting pack with the least free space, ties to the earliest).
std::vector<Pack> next_fit_in_order(std::span<const Sequence> order, Tokens capacity);
std::vector<Pack> first_fit_in_order(std::span<const Sequence> order, Tokens capacity);
std::vector<Pack> best_fit_in_order(std::span<const Sequence> order, Tokens capacity);

std::vector<Pack> pack_random(std::span<const Sequence> sequences, Tokens capacity, Rng& rng);
std::vector<Pack> pack_ffd(std::span<const Sequence> sequences, Tokens capacity);
std::vector<Pack> pack_ffs(std::span<const Sequence> sequences, Tokens capacity, Rng& rng);
std::vector<Pack> pack_bfs(std::span<const Sequence> sequences, Tokens capacity, Rng& rng);
std::vector<Pack> pack_isf(std::span<const Sequence> sequences, Tokens capacity, Rng& rng,
                           const IsfOptions& options = {});
std::vector<Pack> pack_sequences(PackingAlgorithm algorithm, std::span<const Sequence> sequences, Tokens capacity,
                                 Rng& rng, const IsfOptions& isf = {});

Tokens pack_tokens(const Pack& pack);

}  // namespace lcsim::baselines
