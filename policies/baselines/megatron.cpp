#include "policies/baselines/megatron.hpp"

#include <algorithm>

#include "policies/baselines/deepspeed.hpp"
#include "base/errors.hpp"
#include "base/random.hpp"

namespace lcsim::baselines {
namespace {

constexpr std::uint64_t kStaticPackingSalt = 0x5354'4154'4943'50ULL;  // "STATICP": the packing's random stream

std::string scheme_label(const ParallelScheme& s, int replicas) {
  std::string label = "DP" + std::to_string(replicas);
  if (s.tp > 1) label += "TP" + std::to_string(s.tp);
  if (s.pp > 1) label += "PP" + std::to_string(s.pp);
  if (s.virtual_pp > 1) label += "VPP" + std::to_string(s.virtual_pp);
  if (s.cp > 1) label += "SP" + std::to_string(s.cp);
  return label;
}

}  // namespace

StaticPackingOptions read_static_packing_options(JsonObjectReader& reader, const PolicySpec& spec) {
  StaticPackingOptions o;
  o.where = spec.file + ": " + reader.path();
  if (reader.has("algorithm")) {
    const auto name = reader.required<std::string>("algorithm");
    const auto algorithm = packing_algorithm_from_string(name);
    if (!algorithm)
      reader.fail("algorithm", "unknown packing algorithm '" + name + "' (known: " + packing_algorithm_names() + ")");
    o.algorithm = *algorithm;
  }
  if (reader.has("packing_length_tokens"))
    o.packing_length = reader.integer_in("packing_length_tokens", 1, std::int64_t{1} << 40);
  o.recompute = read_recompute(reader, "recompute");
  return o;
}

std::vector<std::vector<MicroBatch>> pack_and_deal(std::span<const Sequence> batch, Tokens packing_length,
                                                   PackingAlgorithm algorithm, int replicas, std::uint64_t seed,
                                                   const std::string& where) {
  for (const auto& s : batch)
    if (s.tokens > packing_length)
      throw InputError(where + ".packing_length_tokens: sequence " + std::to_string(s.id) + " has " +
                       std::to_string(s.tokens) + " tokens, more than the packing length " +
                       std::to_string(packing_length) + "; packing does not truncate sequences");
  Rng rng(seed);
  const std::vector<Pack> packs = pack_sequences(algorithm, batch, packing_length, rng);
  std::vector<std::vector<MicroBatch>> dealt(static_cast<std::size_t>(replicas));
  for (std::size_t k = 0; k < packs.size(); ++k)
    dealt[k % dealt.size()].push_back(sharded_micro_batch(packs[k], false));
  return dealt;
}

std::vector<IterationPlan> plan_static_packing(const PlanningContext& context, std::span<const GlobalBatch> batches,
                                               const ParallelScheme& scheme, const StaticPackingOptions& options) {
  const int layout_gpus = context.layout.gpus();
  if (scheme.gpus() > layout_gpus || layout_gpus % scheme.gpus() != 0)
    throw InputError(options.where + ": tp " + std::to_string(scheme.tp) + " x pp " + std::to_string(scheme.pp) +
                     " x sp " + std::to_string(scheme.cp) + " does not divide the layout's " +
                     std::to_string(layout_gpus) + " GPUs");
  const int replicas = layout_gpus / scheme.gpus();
  Rng seeds(context.seed ^ kStaticPackingSalt);
  std::vector<IterationPlan> plans;
  for (std::size_t b = 0; b < batches.size(); ++b) {
    Tokens length = options.packing_length.value_or(context.training.context_length);
    if (length <= 0)
      for (const auto& s : batches[b]) length = std::max(length, s.tokens);
    IterationPlan plan;
    plan.index = static_cast<int>(b);
    plan.label = "batch " + std::to_string(b) + ": " + scheme_label(scheme, replicas);
    plan.replicas = make_homogeneous_replicas(scheme, replicas);
    auto dealt = pack_and_deal(batches[b], std::max<Tokens>(length, 1), options.algorithm, replicas, seeds.next(),
                               options.where);
    for (std::size_t r = 0; r < dealt.size(); ++r) plan.replicas[r].micro_batches = std::move(dealt[r]);
    plans.push_back(std::move(plan));
  }
  return plans;
}

std::vector<IterationPlan> MegatronPolicy::plan(const PlanningContext& context, std::span<const GlobalBatch> batches) {
  ParallelScheme scheme;
  scheme.tp = options_.tp.value_or(context.layout.tp);
  scheme.pp = options_.pp.value_or(context.layout.pp);
  scheme.cp = 1;
  scheme.virtual_pp = context.layout.virtual_pp;
  if (scheme.virtual_pp > 1 && (scheme.pp < 2 || context.cost->model().layers % (scheme.pp * scheme.virtual_pp) != 0))
    throw InputError(options_.where + ".pp: " + std::to_string(scheme.pp) + " stages of parallel.virtual_pp " +
                     std::to_string(scheme.virtual_pp) + " model chunks each do not split the " +
                     std::to_string(context.cost->model().layers) + " layers evenly (interleaving needs pp >= 2)");
  scheme.recompute = options_.recompute.value_or(context.training.recompute);
  return plan_static_packing(context, batches, scheme, options_);
}

std::unique_ptr<Policy> make_megatron_policy(const PolicySpec& spec) {
  auto reader = policy_options(spec);
  StaticPackingOptions options = read_static_packing_options(reader, spec);
  if (reader.has("tp")) options.tp = static_cast<int>(reader.integer_in("tp", 1, 1 << 20));
  if (reader.has("pp")) options.pp = static_cast<int>(reader.integer_in("pp", 1, 1 << 20));
  reader.finish();
  return std::make_unique<MegatronPolicy>(std::move(options));
}

}  // namespace lcsim::baselines
