#include "model/plan.hpp"

#include <algorithm>
#include <set>

#include "base/check.hpp"

namespace lcsim {

std::string_view to_string(CpSplit split) {
  return split == CpSplit::PerSequence ? "per_sequence" : "per_document";
}

std::optional<CpSplit> cp_split_from_string(std::string_view name) {
  if (name == "per_document") return CpSplit::PerDocument;
  if (name == "per_sequence") return CpSplit::PerSequence;
  return std::nullopt;
}

Tokens MicroBatch::tokens() const {
  Tokens total = 0;
  for (const auto& p : placements) total += p.tokens;
  return total;
}

Tokens MicroBatch::longest() const {
  Tokens longest = 0;
  for (const auto& p : placements) longest = std::max(longest, p.tokens);
  return longest;
}

int Replica::gpu(int stage, int cp_rank, int tp_rank) const {
  const std::size_t index = static_cast<std::size_t>((stage * scheme.cp + cp_rank) * scheme.tp + tp_rank);
  LCSIM_CHECK(index < gpus.size(), "(stage, cp rank, tp rank) outside the replica's GPUs");
  return gpus[index];
}

Tokens Replica::tokens() const {
  Tokens total = 0;
  for (const auto& mb : micro_batches) total += mb.tokens();
  return total;
}

Tokens IterationPlan::tokens() const {
  Tokens total = 0;
  for (const auto& r : replicas) total += r.tokens();
  return total;
}

std::size_t IterationPlan::sequence_count() const {
  std::size_t count = 0;
  for (const auto& r : replicas)
    for (const auto& mb : r.micro_batches) count += mb.placements.size();
  return count;
}

int IterationPlan::phase_count() const {
  // Distinct phase values: phases need not be numbered densely, they only order the replicas in time.
  std::set<int> phases;
  for (const auto& r : replicas) phases.insert(r.phase);
  return static_cast<int>(phases.size());
}

std::vector<Replica> make_homogeneous_replicas(const ParallelScheme& scheme, int replicas) {
  std::vector<Replica> result(static_cast<std::size_t>(std::max(replicas, 0)));
  const int width = scheme.gpus();
  for (int r = 0; r < replicas; ++r) {
    auto& replica = result[static_cast<std::size_t>(r)];
    replica.scheme = scheme;
    replica.gpus.reserve(static_cast<std::size_t>(width));
    for (int g = 0; g < width; ++g) replica.gpus.push_back(r * width + g);
  }
  return result;
}

}  // namespace lcsim
