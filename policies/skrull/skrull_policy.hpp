#pragma once
// The Skrull family as policies: `skrull` (DACP + GDS), `skrull-dacp` (DACP on the baseline's micro-batches) and
// `rr` (GDS micro-batching with round-robin CP placement, Appendix B.2). Options: {"rollback": true|false};
// skrull-dacp also {"micro_batch_sequences": N} (default: consecutive micro-batches filled up to C N tokens).
#include <memory>

#include "policies/core/policy.hpp"
#include "policies/skrull/gds.hpp"

namespace lcsim::skrull {

enum class Variant { Skrull, DacpOnly, RoundRobin };

class SkrullPolicy : public Policy {
 public:
  SkrullPolicy(Variant variant, bool rollback, int micro_batch_sequences);
  std::string kind() const override;
  std::vector<IterationPlan> plan(const PlanningContext& context, std::span<const GlobalBatch> batches) override;
  // The kind's descriptor reads these (policies/registry.cpp), as plan() does the refusal.
  std::string layout_refusal(const ParallelLayout& layout) const;
  /// BucketSize (training.bucket_size_tokens) for Skrull and RR, up to the context.
  std::vector<TuneKnobSpec> tune_knobs(const TuneKnobContext& context) const;

  Variant variant() const { return variant_; }
  bool rollback() const { return rollback_; }

 private:
  Variant variant_;
  bool rollback_;
  int micro_batch_sequences_;
};

std::unique_ptr<Policy> make_skrull_policy(const PolicySpec& spec, Variant variant);
inline std::unique_ptr<Policy> make_skrull(const PolicySpec& spec) {
  return make_skrull_policy(spec, Variant::Skrull);
}
inline std::unique_ptr<Policy> make_skrull_dacp(const PolicySpec& spec) {
  return make_skrull_policy(spec, Variant::DacpOnly);
}
inline std::unique_ptr<Policy> make_round_robin(const PolicySpec& spec) {
  return make_skrull_policy(spec, Variant::RoundRobin);
}

}  // namespace lcsim::skrull
