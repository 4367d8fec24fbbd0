#pragma once
// `wlb-llm`: WLB-LLM (Wang et al., OSDI 2025, arXiv 2503.17924) on the scenario's 4D layout (TP x CP x PP x DP).
// Per incoming global batch, Algorithm 1 (packing.hpp) packs N micro-batches of variable length (below
// S_max tokens) balanced on the cost view's W_a + W_l, outlier documents waiting in multi-level queues until N of
// a kind can go together (N = PP x DP, the paper's global batch of PP x DP windows; a scenario whose global batch
// holds more tokens gets the smallest multiple of PP x DP micro-batches below S_max that holds its largest batch);
// then each micro-batch gets the CP split (per document or per sequence) whose busiest CP
// rank the cost view prices lower (Sec. 5.3). Micro-batches are dealt longest-estimate first to the DP replica with
// the least estimated time that holds fewer than ceil(N / DP), and run in that order under plain 1F1B (the paper's
// interleaved 1F1B is not modelled). The plans re-batch (outliers and carry-overs move to later iterations); after
// the last batch, flush iterations train what is still queued or carried. An iteration with nothing to train is
// not emitted. Iteration labels say what was delayed and which splits were chosen.
//
// Options (the paper publishes no threshold or S_max; these defaults are lcsim's):
//   queues          outlier thresholds L_1 < ... < L_n in tokens (documents with d > L_1 wait); default
//                   [context / 4, context / 2]: two queues, the count Table 2 finds enough (1.05), at the quarter and
//                   half window; [] disables outlier delay
//   release         documents a queue releases at once; default N (Sec. 4.2)
//   s_max_tokens    the micro-batch token limit S_max; default the cost view's memory bound (pp micro-batches in
//                   flight on the first stage), at least context + 1 so every document fits Algorithm 1's strict test
//   cp_sharding     "adaptive" (default) | "per_document" | "per_sequence"
//   packing         "variable_length" (default: Algorithm 1 with the queues) | "original" (the dataloader's
//                   in-order packing at the context window, as plain-4d: Fig. 13's CP-only bars)
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "policies/core/policy.hpp"

namespace lcsim::wlbllm {

enum class CpSharding : std::uint8_t { Adaptive, PerDocument, PerSequence };

struct WlbOptions {
  std::optional<std::vector<Tokens>> queues;  ///< unset: [context / 4, context / 2]
  std::optional<int> release;
  std::optional<Tokens> s_max;
  CpSharding cp_sharding = CpSharding::Adaptive;
  bool variable_length = true;
  std::string where;  ///< "file: path.options"
};

class WlbLlmPolicy : public Policy {
 public:
  explicit WlbLlmPolicy(WlbOptions options) : options_(std::move(options)) {}
  std::string kind() const override { return "wlb-llm"; }
  std::vector<IterationPlan> plan(const PlanningContext& context, std::span<const GlobalBatch> batches) override;
  bool keeps_global_batches() const override { return false; }
  std::vector<TuneKnobSpec> tune_knobs(const TuneKnobContext& context) const;

 private:
  WlbOptions options_;
};

std::unique_ptr<Policy> make_wlbllm_policy(const PolicySpec& spec);

}  // namespace lcsim::wlbllm
