#pragma once
// Hydraulis's static baselines (Sec. 8, Table 3): one homogeneous strategy for the whole run, every global batch
// packed into packs of at most the packing length (fixed-length packing: first fit decreasing by default, as
// Hydraulis App. A.2 packs), the packs dealt evenly to the DP replicas (pack k to replica k % dp, in packing
// order), each pack one micro-batch with every placement cp_rank kSharded (the whole pack through the pipeline
// when cp = 1, sharded over the SP group when cp > 1); replicas run their packs in order under 1F1B. The plans
// keep the global batches. A sequence longer than the packing length is an InputError (packing never truncates).
//
// `megatron`: static <TP, PP> (Megatron-LM), cp = 1, dp = layout GPUs / (tp pp). Contiguous GPU blocks: TP must
//   divide the GPUs per node (the validator rejects a TP group across nodes; Table 3's TP16 rows cannot be
//   expressed, use TP8 PP2). Options:
//     tp, pp                 default the scenario layout's
//     algorithm              "ffd" (default), "isf", "ffs", "bfs", "random" (packing_algorithms.hpp)
//     packing_length_tokens  default training.context_length (else the batch's longest sequence)
//     recompute              "none" | "selective" | "full"; default training.recompute
//   (deepspeed-ulysses, in ulysses.hpp, shares this machinery with a Ulysses SP scheme.)
#include <memory>
#include <optional>
#include <string>

#include "policies/baselines/packing_algorithms.hpp"
#include "base/json_reader.hpp"
#include "policies/core/policy.hpp"

namespace lcsim::baselines {

struct StaticPackingOptions {
  std::optional<int> tp, pp, cp;  ///< unset: the layout's (megatron ignores the layout's cp: cp = 1)
  PackingAlgorithm algorithm = PackingAlgorithm::Ffd;
  std::optional<Tokens> packing_length;
  std::optional<Recompute> recompute;
  std::string where;  ///< "file: path.options", for messages
};

/// Reads algorithm, packing_length_tokens and recompute (the caller reads the scheme keys and calls finish()).
StaticPackingOptions read_static_packing_options(JsonObjectReader& reader, const PolicySpec& spec);

/// Plans every batch on `replicas` copies of `scheme` with fixed-length packing (see the file comment).
std::vector<IterationPlan> plan_static_packing(const PlanningContext& context, std::span<const GlobalBatch> batches,
                                               const ParallelScheme& scheme, const StaticPackingOptions& options);

/// Packs one batch's sequences (the packing length resolved as documented) and deals them to `replicas`.
std::vector<std::vector<MicroBatch>> pack_and_deal(std::span<const Sequence> batch, Tokens packing_length,
                                                   PackingAlgorithm algorithm, int replicas, std::uint64_t seed,
                                                   const std::string& where);

class MegatronPolicy : public Policy {
 public:
  explicit MegatronPolicy(StaticPackingOptions options) : options_(std::move(options)) {}
  std::string kind() const override { return "megatron"; }
  std::vector<IterationPlan> plan(const PlanningContext& context, std::span<const GlobalBatch> batches) override;

 private:
  StaticPackingOptions options_;
};

std::unique_ptr<Policy> make_megatron_policy(const PolicySpec& spec);

}  // namespace lcsim::baselines
