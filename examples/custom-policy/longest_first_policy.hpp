#pragma once
// An example of a user's own scheduler, built outside lcsim's tree: longest-first balancing across data-parallel
// ranks. Each global batch's sequences, longest first, go to the DP rank with the least work so far (LPT); a rank
// runs one sequence per micro-batch, sharded over its CP group, as the DeepSpeed baseline does. The work of a
// sequence is its compute time under the scenario's cost model ("balance_by": "time", the default) or its tokens
// ("balance_by": "tokens").
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "policies/core/policy.hpp"

namespace example {

class LongestFirstPolicy : public lcsim::Policy {
 public:
  explicit LongestFirstPolicy(bool by_time) : by_time_(by_time) {}
  std::string kind() const override { return "longest-first"; }
  std::vector<lcsim::IterationPlan> plan(const lcsim::PlanningContext& context,
                                         std::span<const lcsim::GlobalBatch> batches) override;

 private:
  bool by_time_;
};

/// Reads the options ("balance_by"); unknown options are errors naming the scenario file and key.
std::unique_ptr<lcsim::Policy> make_longest_first(const lcsim::PolicySpec& spec);

}  // namespace example
