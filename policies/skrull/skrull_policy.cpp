#include "policies/skrull/skrull_policy.hpp"

#include <set>

#include "base/json_reader.hpp"
#include "model/plan_demand.hpp"
#include "policies/skrull/skrull_view.hpp"

namespace lcsim::skrull {
namespace {

MicroBatch to_micro_batch(const GlobalBatch& batch, const ScheduledMicroBatch& scheduled) {
  MicroBatch micro_batch;
  micro_batch.placements.reserve(scheduled.sequences.size());
  for (std::size_t i = 0; i < scheduled.sequences.size(); ++i) {
    const Sequence& seq = batch[scheduled.sequences[i]];
    const int rank = scheduled.ranks[i] == CpAssignment::kSharded ? Placement::kSharded : scheduled.ranks[i];
    micro_batch.placements.push_back({seq.id, seq.tokens, rank});
  }
  return micro_batch;
}

// skrull-dacp's micro-batching: a DP rank's sequences in batch order (as the deepspeed baseline deals them), cut
// into consecutive micro-batches -- of `micro_batch_sequences` when set, else filled while they stay within C N
// tokens (Eq. 10). No FLOPs balancing, sorting or long/short interleaving: that is what GDS adds.
std::vector<std::vector<std::size_t>> baseline_micro_batches(const std::vector<std::size_t>& rank_sequences,
                                                             std::span<const Tokens> lengths, int micro_batch_sequences,
                                                             double group_capacity) {
  std::vector<std::vector<std::size_t>> out;
  double filled = 0;
  for (const std::size_t seq : rank_sequences) {
    const auto tokens = static_cast<double>(lengths[seq]);
    const bool full = micro_batch_sequences > 0
                          ? !out.empty() && out.back().size() == static_cast<std::size_t>(micro_batch_sequences)
                          : !out.empty() && filled + tokens > group_capacity;
    if (out.empty() || full) {
      out.emplace_back();
      filled = 0;
    }
    out.back().push_back(seq);
    filled += tokens;
  }
  return out;
}

}  // namespace

SkrullPolicy::SkrullPolicy(Variant variant, bool rollback, int micro_batch_sequences)
    : variant_(variant), rollback_(rollback), micro_batch_sequences_(micro_batch_sequences) {}

std::string SkrullPolicy::kind() const {
  switch (variant_) {
    case Variant::Skrull:
      return "skrull";
    case Variant::DacpOnly:
      return "skrull-dacp";
    case Variant::RoundRobin:
      return "rr";
  }
  return "skrull";
}

std::string SkrullPolicy::layout_refusal(const ParallelLayout& layout) const {
  if (layout.tp != 1 || layout.pp != 1)
    return kind() + ": Skrull schedules DP x CP layouts; parallel.tp and parallel.pp must be 1";
  return {};
}

std::vector<IterationPlan> SkrullPolicy::plan(const PlanningContext& context, std::span<const GlobalBatch> batches) {
  const CostModel& cost = *context.cost;
  const ParallelLayout& layout = context.layout;
  if (const std::string refusal = layout_refusal(layout); !refusal.empty()) throw PlanningError(refusal);
  ParallelScheme scheme;
  scheme.cp = layout.cp;
  scheme.recompute = context.training.recompute;
  const SkrullView view(cost, scheme, shard_degree(cost, scheme), context.training.bucket_size_tokens);

  GdsOptions options;
  options.bucket_tokens = static_cast<double>(view.bucket_size());
  options.cp = layout.cp;
  options.rollback = rollback_;
  options.placer = variant_ == Variant::RoundRobin ? CpPlacer::RoundRobin : CpPlacer::Dacp;
  if (options.bucket_tokens <= 0)
    throw PlanningError(kind() + ": BucketSize is not positive: the model's static memory leaves no room for " +
                        "activations on " + cost.cluster().gpu.name);

  std::vector<IterationPlan> plans;
  plans.reserve(batches.size());
  std::vector<Tokens> lengths;
  std::vector<double> flops;
  for (std::size_t b = 0; b < batches.size(); ++b) {
    const GlobalBatch& batch = batches[b];
    lengths.resize(batch.size());
    flops.resize(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      lengths[i] = batch[i].tokens;
      flops[i] = view.flops(batch[i].tokens);
    }
    IterationPlan plan;
    plan.index = static_cast<int>(b);
    plan.replicas = make_homogeneous_replicas(scheme, layout.dp);

    if (variant_ == Variant::DacpOnly) {
      // Same dealing as the deepspeed baseline: sequence i to DP rank i % dp.
      std::vector<std::vector<std::size_t>> per_rank(static_cast<std::size_t>(layout.dp));
      for (std::size_t i = 0; i < batch.size(); ++i) per_rank[i % per_rank.size()].push_back(i);
      for (std::size_t r = 0; r < per_rank.size(); ++r) {
        Replica& replica = plan.replicas[r];
        replica.overlap_cp_comm = true;
        for (const auto& members :
             baseline_micro_batches(per_rank[r], lengths, micro_batch_sequences_, options.bucket_tokens * options.cp)) {
          CpAssignment placed = place_micro_batch(lengths, flops, members, options);
          // A micro-batch DACP cannot place falls back to the baseline's behaviour: shard everything.
          if (!placed.scheduled) placed.ranks.assign(members.size(), CpAssignment::kSharded);
          replica.micro_batches.push_back(to_micro_batch(batch, {members, placed.ranks}));
        }
      }
    } else {
      const auto bins = binpack_by_flops(flops, layout.dp);
      for (std::size_t r = 0; r < bins.size(); ++r) {
        Replica& replica = plan.replicas[r];
        replica.overlap_cp_comm = true;
        const RankSchedule schedule = gds_schedule_rank(lengths, flops, bins[r], options);
        for (const auto& scheduled : schedule.micro_batches)
          replica.micro_batches.push_back(to_micro_batch(batch, scheduled));
      }
    }
    plans.push_back(std::move(plan));
  }
  return plans;
}

std::unique_ptr<Policy> make_skrull_policy(const PolicySpec& spec, Variant variant) {
  JsonObjectReader options = policy_options(spec);
  const bool rollback = options.optional<bool>("rollback", true);
  int micro_batch_sequences = 0;  // 0: fill micro-batches up to C N tokens
  if (variant == Variant::DacpOnly && options.has("micro_batch_sequences"))
    micro_batch_sequences = static_cast<int>(options.integer_in("micro_batch_sequences", 1, 1 << 20));
  options.finish();
  return std::make_unique<SkrullPolicy>(variant, rollback, micro_batch_sequences);
}

std::vector<TuneKnobSpec> SkrullPolicy::tune_knobs(const TuneKnobContext& context) const {
  if (variant_ == Variant::DacpOnly) return {};
  // Up to where memory allows; values past it plan with OOM iterations, which tune never accepts.
  std::set<Tokens> sizes = {4096, 8192, 16384, 24576, 32768, 49152, 65536};
  if (context.bucket_size_tokens) sizes.insert(*context.bucket_size_tokens);
  std::vector<nlohmann::json> values;
  for (Tokens size : sizes)
    if (size <= context.context_length) values.push_back(size);
  return {{"training.bucket_size_tokens", values}};
}

}  // namespace lcsim::skrull
