#include "policies/hbp/hbp_policy.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "policies/baselines/deepspeed.hpp"
#include "base/errors.hpp"
#include "base/random.hpp"
#include "policies/hbp/balance_packing.hpp"

namespace lcsim::hbp {
namespace {

constexpr std::uint64_t kHbpSalt = 0x4842'5020'5041'434BULL;  // "HBP PACK": this policy's own random stream

std::string tokens_text(Tokens tokens) {
  return tokens % kKiloTokens == 0 ? std::to_string(tokens / kKiloTokens) + "K" : std::to_string(tokens);
}

std::string plan_label(const Strategy& group, std::size_t packs, double t_ave, bool curriculum) {
  char average[32];
  std::snprintf(average, sizeof average, "%.1f", t_ave);
  return "hbp L=" + tokens_text(group.length) + " sp=" + std::to_string(group.sp) +
         " gc=" + std::to_string(group.gc_layers) + " packs=" + std::to_string(packs) + " T_ave=" + average +
         (curriculum ? " curriculum" : "");
}

}  // namespace

std::vector<Tokens> default_packing_lengths(Tokens cap) {
  if (cap < 1) throw std::invalid_argument("default_packing_lengths: cap must be >= 1");
  std::vector<Tokens> lengths;
  for (Tokens l = 8 * kKiloTokens; l < cap; l *= 2) lengths.push_back(l);
  lengths.push_back(cap);
  return lengths;
}

std::vector<int> default_sp_degrees(int world) {
  std::vector<int> degrees;
  for (int sp = 1; sp <= world && world % sp == 0; sp *= 2) degrees.push_back(sp);
  return degrees;
}

double average_tokens_per_sample(const IterationPlan& plan) {
  const std::size_t samples = plan.sequence_count();
  return samples == 0 ? 0.0 : static_cast<double>(plan.tokens()) / static_cast<double>(samples);
}

std::vector<Strategy> HbpPolicy::choose_groups(const CostModel& cost, int world, Tokens cap, Tokens longest) const {
  const std::string where = options_.file + ": " + options_.path + ".";
  const int layers = cost.model().layers;
  const AutoSelector selector(cost, world);
  const auto check_sp = [&](int sp, const std::string& key) {
    if (world % sp != 0)
      throw InputError(where + key + ": SP degree " + std::to_string(sp) + " does not divide the " +
                       std::to_string(world) + " GPUs");
  };

  if (!options_.groups.empty()) {
    std::vector<Strategy> groups;
    for (std::size_t i = 0; i < options_.groups.size(); ++i) {
      const GroupSpec& g = options_.groups[i];
      const std::string key = "groups[" + std::to_string(i) + "]";
      check_sp(g.sp, key + ".sp");
      if (g.gc_layers && *g.gc_layers > layers)
        throw InputError(where + key + ".gc_layers: " + std::to_string(*g.gc_layers) + " is more than the model's " +
                         std::to_string(layers) + " layers");
      const int gc = g.gc_layers ? *g.gc_layers : selector.greedy_profile_ckpt(g.length, g.sp).value_or(layers);
      groups.push_back(selector.evaluate(g.length, g.sp, gc));
    }
    if (longest > groups.back().length)
      throw InputError(where + "groups: the window's longest sequence has " + std::to_string(longest) +
                       " tokens, more than the longest group " + std::to_string(groups.back().length) +
                       "; HBP does not truncate sequences");
    return groups;
  }

  const std::vector<int> sp_degrees = options_.sp_degrees.value_or(default_sp_degrees(world));
  for (std::size_t k = 0; k < sp_degrees.size(); ++k) check_sp(sp_degrees[k], "sp_degrees[" + std::to_string(k) + "]");
  const std::vector<Tokens> candidates = options_.packing_lengths.value_or(default_packing_lengths(cap));
  if (longest > candidates.back() && options_.packing_lengths)
    throw InputError(where + "packing_lengths_tokens: the window's longest sequence has " + std::to_string(longest) +
                     " tokens, more than the longest packing length " + std::to_string(candidates.back()) +
                     "; HBP does not truncate sequences");
  // Without packing lengths of its own, HBP packs up to the context: the data is what is too long for it.
  if (longest > candidates.back())
    throw InputError(options_.file + ": dataset: the window's longest sequence has " + std::to_string(longest) +
                     " tokens, more than training.context_length_tokens (" + std::to_string(candidates.back()) +
                     "), and HBP (" + options_.path +
                     ") does not truncate sequences; set dataset.truncate_to_context "
                     "to true to cut them to the context as a data loader does, or raise "
                     "training.context_length_tokens");
  const Selection selection = selector.select(candidates, sp_degrees);
  if (options_.hierarchical) return selection.groups;
  return {selection.longest};
}

std::vector<IterationPlan> HbpPolicy::plan(const PlanningContext& context, std::span<const GlobalBatch> batches) {
  if (context.cost == nullptr) throw std::invalid_argument("HbpPolicy::plan: no cost model");
  std::vector<Sequence> window;
  Tokens window_tokens = 0;
  Tokens longest = 0;
  for (const auto& batch : batches)
    for (const auto& s : batch) {
      window.push_back(s);
      window_tokens += s.tokens;
      longest = std::max(longest, s.tokens);
    }
  if (window.empty()) return {};

  const int world = context.layout.gpus();
  const Tokens cap = context.training.context_length > 0 ? context.training.context_length : longest;
  groups_ = choose_groups(*context.cost, world, cap, longest);
  std::vector<Tokens> lengths;
  for (const auto& g : groups_) lengths.push_back(g.length);

  Rng rng = Rng(context.seed).split(kHbpSalt);
  BalancePackingOptions packing;
  packing.balance_sort = options_.balance;
  packing.isf = options_.isf;
  std::vector<std::vector<Pack>> packed = balance_pack(window, lengths, rng, packing);

  // Batches by global token number: every replica of group i trains k_i packs of up to l_i tokens.
  const auto batch_count = static_cast<Tokens>(batches.size());
  const Tokens budget = options_.tokens_per_batch.value_or(context.training.tokens_per_iteration > 0
                                                               ? context.training.tokens_per_iteration
                                                               : (window_tokens + batch_count - 1) / batch_count);
  std::vector<std::size_t> packs_per_batch;
  for (const auto& g : groups_) {
    const Tokens replicas = world / g.sp;
    const Tokens per_replica = std::max<Tokens>(1, budget / (g.length * replicas));
    packs_per_batch.push_back(static_cast<std::size_t>(per_replica * replicas));
  }
  std::vector<PackBatch> ordered = make_batches(std::move(packed), packs_per_batch, rng);
  const std::size_t curriculum =
      apply_curriculum(ordered, static_cast<std::size_t>(options_.curriculum_iterations), groups_.size() - 1);

  std::vector<IterationPlan> plans;
  plans.reserve(ordered.size());
  for (std::size_t b = 0; b < ordered.size(); ++b) {
    const PackBatch& batch = ordered[b];
    const Strategy& group = groups_[batch.group];
    ParallelScheme scheme;
    scheme.cp = group.sp;
    scheme.recompute = Recompute::None;
    scheme.checkpointed_layers = group.gc_layers;
    const auto replicas = static_cast<std::size_t>(world / group.sp);
    IterationPlan plan;
    plan.index = static_cast<int>(b);
    plan.replicas = make_homogeneous_replicas(scheme, static_cast<int>(replicas));
    for (std::size_t j = 0; j < batch.packs.size(); ++j) {
      const std::size_t round = j / replicas;
      const std::size_t slot = j % replicas;
      const std::size_t r = round % 2 == 0 ? slot : replicas - 1 - slot;
      plan.replicas[r].micro_batches.push_back(baselines::sharded_micro_batch(batch.packs[j], false));
    }
    plan.label = plan_label(group, batch.packs.size(), average_tokens_per_sample(plan), b < curriculum);
    plans.push_back(std::move(plan));
  }
  return plans;
}

}  // namespace lcsim::hbp
