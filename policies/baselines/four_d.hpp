#pragma once
// WLB-LLM's baselines (Wang et al., OSDI 2025, Sec. 7; docs/policies.md "WLB-LLM"): 4D training (TP x CP x PP x DP,
// the scenario's layout) on fixed-length packed sequences, one packed sequence per micro-batch, its documents sharded
// over the CP group. Both keep the global batches. A document longer than the context window is an InputError
// (packing never truncates; set dataset.truncate_to_context).
//
// `plain-4d` (Plain-4D): the dataloader's packing as is: documents in data order, next fit into sequences of at most
//   context_length tokens (a document never split across two sequences: lcsim plans whole sequences), CP sharding
//   per sequence (MicroBatch::cp_split, Llama-3's head-tail chunks of the whole pack). No options.
// `fixed-4d` (Fixed-4D): Sec. 3.2's fixed-length packing (balance the sum of squared document lengths over
//   micro-batches of at most context_length tokens) solved greedily inside one global batch. The paper does not give
//   its greedy; lcsim's: max(PP x DP, ceil(batch tokens / context)) micro-batches, documents by d^2 descending (ties:
//   data order) each to the micro-batch with the least sum of d^2 that still has room (ties: lowest index), a new
//   micro-batch when none has room. Option `cp_split`: "per_sequence" (default) | "per_document": the paper runs
//   both fixed strategies and reports the faster, so a scenario lists both under two labels.
// Under Ulysses CP (heads sharded, not tokens) both emit per-document splits: a split would change nothing.
// Micro-batches are dealt to the DP replicas round-robin in packing order (fixed-4d: heaviest sum of d^2 first) and
// run under plain 1F1B: WLB-LLM's interleaved 1F1B is not modelled.
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "policies/core/policy.hpp"

namespace lcsim::baselines {

/// Plain-4D's packing: `documents` in order, next fit into packs of at most `length` tokens.
std::vector<std::vector<Sequence>> pack_in_order(std::span<const Sequence> documents, Tokens length);
/// Fixed-4D's greedy (file comment) with at least `min_packs` packs of at most `length` tokens.
std::vector<std::vector<Sequence>> pack_fixed_length_greedy(std::span<const Sequence> documents, Tokens length,
                                                            int min_packs);

class FourDPolicy : public Policy {
 public:
  enum class Packing : std::uint8_t { InOrder, FixedGreedy };
  FourDPolicy(std::string kind, Packing packing, CpSplit split, std::string where)
      : kind_(std::move(kind)), packing_(packing), split_(split), where_(std::move(where)) {}
  std::string kind() const override { return kind_; }
  std::vector<IterationPlan> plan(const PlanningContext& context, std::span<const GlobalBatch> batches) override;

 private:
  std::string kind_;
  Packing packing_;
  CpSplit split_;
  std::string where_;  ///< "file: path.options", for messages
};

std::unique_ptr<Policy> make_plain_4d_policy(const PolicySpec& spec);
std::unique_ptr<Policy> make_fixed_4d_policy(const PolicySpec& spec);

}  // namespace lcsim::baselines
