#pragma once
// Fixed-length packing (HBP's naive packing baseline, ISF by default): the whole window packed into packs of at
// most the packing length, the packs dealt to the replicas of SP degree `sp`; each pack is one micro-batch
// sharded over the replica's SP (CP) group; an iteration takes `packs_per_replica` packs per replica, in order.
//
// Options:
//   algorithm              "isf" (default), "ffd", "ffs", "bfs", "random" (see packing_algorithms.hpp)
//   packing_length_tokens  pack capacity; default training.context_length, or the window's longest sequence when
//                          the scenario sets no context length. A longer sequence is an error (no truncation).
//   sp                     SP degree of every replica; default layout.cp. Replicas = layout GPUs / (sp tp pp).
//   packs_per_replica      micro-batches per replica per iteration; default 1
//   shuffle_packs          deal the packs in a seeded random order (a data loader's sampler); default true
//   isf_iterations         ISF rounds; default 10 (OmniBal's default iter_time)
//   isf_fill_threshold     ISF keeps packs filled to at least this share of the packing length; default 0.99
#include <memory>
#include <optional>

#include "policies/baselines/packing_algorithms.hpp"
#include "policies/core/policy.hpp"

namespace lcsim::baselines {

struct PackingOptions {
  PackingAlgorithm algorithm = PackingAlgorithm::Isf;
  std::optional<Tokens> packing_length;
  std::optional<int> sp;
  int packs_per_replica = 1;
  bool shuffle_packs = true;
  IsfOptions isf;
  std::string file;  ///< where the options came from, for messages
  std::string path;  ///< JSON path of the options object
};

class PackingPolicy : public Policy {
 public:
  explicit PackingPolicy(PackingOptions options) : options_(std::move(options)) {}
  std::string kind() const override { return "packing"; }
  std::vector<IterationPlan> plan(const PlanningContext& context, std::span<const GlobalBatch> batches) override;
  bool keeps_global_batches() const override { return false; }
  std::vector<TuneKnobSpec> tune_knobs(const TuneKnobContext& context) const {
    return {{"options.packing_length_tokens", context_budgets(context.context_length)}};
  }

 private:
  PackingOptions options_;
};

std::unique_ptr<Policy> make_packing_policy(const PolicySpec& spec);

}  // namespace lcsim::baselines
