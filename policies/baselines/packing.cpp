#include "policies/baselines/packing.hpp"

#include <algorithm>

#include "base/errors.hpp"
#include "base/random.hpp"
#include "policies/baselines/deepspeed.hpp"

namespace lcsim::baselines {
namespace {

constexpr std::uint64_t kPackingSalt = 0x5041'434B'494E'47ULL;  // "PACKING": this policy's own random stream

}  // namespace

std::vector<IterationPlan> PackingPolicy::plan(const PlanningContext& context, std::span<const GlobalBatch> batches) {
  const std::string where = options_.file + ": " + options_.path + ".";
  std::vector<Sequence> window;
  for (const auto& batch : batches) window.insert(window.end(), batch.begin(), batch.end());

  Tokens capacity = options_.packing_length.value_or(context.training.context_length);
  if (capacity <= 0)
    for (const auto& s : window) capacity = std::max(capacity, s.tokens);
  for (const auto& s : window) {
    if (s.tokens <= capacity) continue;
    if (options_.packing_length)
      throw InputError(where + "packing_length_tokens: sequence " + std::to_string(s.id) + " has " +
                       std::to_string(s.tokens) + " tokens, more than the packing length " + std::to_string(capacity) +
                       "; packing does not truncate sequences");
    // Packing to the context by default: the data is what is too long for it.
    throw InputError(options_.file + ": dataset: sequence " + std::to_string(s.id) + " has " +
                     std::to_string(s.tokens) + " tokens, more than training.context_length_tokens (" +
                     std::to_string(capacity) + "), which " + options_.path +
                     " packs to and does not truncate; set dataset.truncate_to_context to true to cut such sequences "
                     "to the context as a data loader does, or raise training.context_length_tokens");
  }

  ParallelScheme scheme = layout_scheme(context);
  scheme.cp = options_.sp.value_or(context.layout.cp);
  const int layout_gpus = context.layout.gpus();
  if (layout_gpus % scheme.gpus() != 0)
    throw InputError(where + "sp: " + std::to_string(scheme.cp) + " x tp " + std::to_string(scheme.tp) + " x pp " +
                     std::to_string(scheme.pp) + " does not divide the layout's " + std::to_string(layout_gpus) +
                     " GPUs");
  const int replicas = layout_gpus / scheme.gpus();

  Rng rng = Rng(context.seed).split(kPackingSalt);
  std::vector<Pack> packs = pack_sequences(options_.algorithm, window, capacity, rng, options_.isf);
  if (options_.shuffle_packs) rng.shuffle(packs);

  const std::size_t per_iteration =
      static_cast<std::size_t>(replicas) * static_cast<std::size_t>(options_.packs_per_replica);
  std::vector<IterationPlan> plans;
  for (std::size_t first = 0; first < packs.size(); first += per_iteration) {
    const std::size_t last = std::min(packs.size(), first + per_iteration);
    IterationPlan plan;
    plan.index = static_cast<int>(plans.size());
    plan.label =
        std::string(to_string(options_.algorithm)) + " packs " + std::to_string(first) + "-" + std::to_string(last - 1);
    plan.replicas = make_homogeneous_replicas(scheme, replicas);
    for (std::size_t k = first; k < last; ++k)
      plan.replicas[(k - first) % plan.replicas.size()].micro_batches.push_back(sharded_micro_batch(packs[k], false));
    plans.push_back(std::move(plan));
  }
  return plans;
}

std::unique_ptr<Policy> make_packing_policy(const PolicySpec& spec) {
  auto reader = policy_options(spec);
  PackingOptions options;
  options.file = spec.file;
  options.path = reader.path();
  if (reader.has("algorithm")) {
    const auto name = reader.required<std::string>("algorithm");
    const auto algorithm = packing_algorithm_from_string(name);
    if (!algorithm)
      reader.fail("algorithm", "unknown packing algorithm '" + name + "' (known: " + packing_algorithm_names() + ")");
    options.algorithm = *algorithm;
  }
  if (reader.has("packing_length_tokens"))
    options.packing_length = reader.integer_in("packing_length_tokens", 1, std::int64_t{1} << 40);
  if (reader.has("sp")) options.sp = static_cast<int>(reader.integer_in("sp", 1, 1 << 20));
  if (reader.has("packs_per_replica"))
    options.packs_per_replica = static_cast<int>(reader.integer_in("packs_per_replica", 1, 1 << 20));
  options.shuffle_packs = reader.optional<bool>("shuffle_packs", true);
  options.isf = read_isf_options(reader);
  reader.finish();
  return std::make_unique<PackingPolicy>(std::move(options));
}

}  // namespace lcsim::baselines
