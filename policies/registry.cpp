// The policy registry: adding a built-in policy is one line in built_in(); out-of-tree policies register_policy().
// Each kind carries its descriptor (policies/core/policy.hpp), read off the policy class's members.
#include <algorithm>
#include <stdexcept>
#include <utility>

#include "base/check.hpp"
#include "base/errors.hpp"
#include "policies/baselines/deepspeed.hpp"
#include "policies/baselines/four_d.hpp"
#include "policies/baselines/hotspa.hpp"
#include "policies/baselines/megatron.hpp"
#include "policies/baselines/packing.hpp"
#include "policies/baselines/padded.hpp"
#include "policies/baselines/sorted.hpp"
#include "policies/baselines/ulysses.hpp"
#include "policies/core/policy.hpp"
#include "policies/flexsp/flexsp_policy.hpp"
#include "policies/hbp/hbp_policy.hpp"
#include "policies/hydraulis/hydraulis_policy.hpp"
#include "policies/skrull/skrull_policy.hpp"
#include "policies/wlbllm/wlbllm_policy.hpp"

namespace lcsim {
namespace {

/// A policy's descriptor read off its class: a member layout_refusal(layout), plans_from_dataset(),
/// needs_own_process() or tune_knobs(context) of P answers for a policy built from the entry (building one only
/// reads its options), and P::kPlansUnderLayout, when P has it, says whether it plans under the scenario's layout.
template <class P>
PolicyDescriptor described(std::unique_ptr<Policy> (*make)(const PolicySpec& spec)) {
  PolicyDescriptor d;
  d.make = make;
  const auto built = [make](const PolicySpec& spec) {
    std::unique_ptr<Policy> policy = make(spec);
    LCSIM_CHECK(dynamic_cast<P*>(policy.get()) != nullptr,
                "policy kind '" + spec.kind + "' is not the registered class");
    return std::unique_ptr<P>(static_cast<P*>(policy.release()));
  };
  if constexpr (requires { P::kPlansUnderLayout; }) d.plans_under_layout = P::kPlansUnderLayout;
  if constexpr (requires(const P& p, const ParallelLayout& layout) { p.layout_refusal(layout); })
    d.layout_refusal = [built](const PolicySpec& spec, const ParallelLayout& layout) {
      return built(spec)->layout_refusal(layout);
    };
  if constexpr (requires(const P& p) { p.plans_from_dataset(); })
    d.plans_from_dataset = [built](const PolicySpec& spec) { return built(spec)->plans_from_dataset(); };
  if constexpr (requires(const P& p) { p.needs_own_process(); })
    d.needs_own_process = [built](const PolicySpec& spec) { return built(spec)->needs_own_process(); };
  if constexpr (requires(const P& p, const TuneKnobContext& context) { p.tune_knobs(context); })
    d.tune_knobs = [built](const PolicySpec& spec, const TuneKnobContext& context) {
      return built(spec)->tune_knobs(context);
    };
  return d;
}

/// The built-in kinds, in the order `lcsim list policies` shows them.
const std::vector<std::pair<std::string, PolicyDescriptor>>& built_in() {
  // clang-format off
  static const std::vector<std::pair<std::string, PolicyDescriptor>> policies{
      {"deepspeed", described<baselines::DeepSpeedPolicy>(baselines::make_deepspeed_policy)},
      {"sorted", described<baselines::SortedPolicy>(baselines::make_sorted_policy)},
      {"packing", described<baselines::PackingPolicy>(baselines::make_packing_policy)},
      {"padded", described<baselines::PaddedPolicy>(baselines::make_padded_policy)},
      {"hbp", described<hbp::HbpPolicy>(hbp::make_hbp_policy)},
      {"skrull", described<skrull::SkrullPolicy>(skrull::make_skrull)},
      {"skrull-dacp", described<skrull::SkrullPolicy>(skrull::make_skrull_dacp)},
      {"rr", described<skrull::SkrullPolicy>(skrull::make_round_robin)},
      {"hydraulis", described<hydraulis::HydraulisPolicy>(hydraulis::make_hydraulis_policy)},
      {"megatron", described<baselines::MegatronPolicy>(baselines::make_megatron_policy)},
      {"deepspeed-ulysses", described<baselines::UlyssesPolicy>(baselines::make_ulysses_policy)},
      {"hotspa", described<baselines::HotSpaPolicy>(baselines::make_hotspa_policy)},
      {"flexsp", described<flexsp::FlexSpPolicy>(flexsp::make_flexsp_policy)},
      {"flexsp-batchada", described<flexsp::FlexSpPolicy>(flexsp::make_flexsp_batchada_policy)},
      {"wlb-llm", described<wlbllm::WlbLlmPolicy>(wlbllm::make_wlbllm_policy)},
      {"plain-4d", described<baselines::FourDPolicy>(baselines::make_plain_4d_policy)},
      {"fixed-4d", described<baselines::FourDPolicy>(baselines::make_fixed_4d_policy)},
  };
  // clang-format on
  return policies;
}

/// Kinds added by register_policy, in registration order.
std::vector<std::pair<std::string, PolicyDescriptor>>& registered() {
  static std::vector<std::pair<std::string, PolicyDescriptor>> policies;
  return policies;
}

}  // namespace

std::vector<std::string> policy_kinds() {
  std::vector<std::string> kinds;
  for (const auto& [kind, descriptor] : built_in()) kinds.push_back(kind);
  for (const auto& [kind, descriptor] : registered()) kinds.push_back(kind);
  return kinds;
}

void register_policy(const std::string& kind, PolicyDescriptor descriptor) {
  if (kind.empty()) throw std::invalid_argument("register_policy: empty policy kind");
  if (!descriptor.make) throw std::invalid_argument("register_policy: no factory for policy kind '" + kind + "'");
  const auto kinds = policy_kinds();
  if (std::find(kinds.begin(), kinds.end(), kind) != kinds.end())
    throw std::invalid_argument("register_policy: policy kind '" + kind + "' is already taken");
  registered().emplace_back(kind, std::move(descriptor));
}

void register_policy(const std::string& kind, PolicyFactory factory) {
  PolicyDescriptor descriptor;
  descriptor.make = std::move(factory);
  register_policy(kind, std::move(descriptor));
}

const PolicyDescriptor& policy_descriptor(const PolicySpec& spec) {
  for (const auto& [kind, descriptor] : built_in())
    if (kind == spec.kind) return descriptor;
  for (const auto& [kind, descriptor] : registered())
    if (kind == spec.kind) return descriptor;
  std::string known;
  for (const auto& kind : policy_kinds()) known += (known.empty() ? "" : ", ") + kind;
  throw InputError(spec.file + ": " + spec.path + ".kind: unknown policy kind '" + spec.kind + "' (known: " + known +
                   ")");
}

std::unique_ptr<Policy> make_policy(const PolicySpec& spec) {
  return policy_descriptor(spec).make(spec);
}

std::string layout_refusal(const PolicySpec& spec, const ParallelLayout& layout) {
  const PolicyDescriptor& d = policy_descriptor(spec);
  return d.layout_refusal ? d.layout_refusal(spec, layout) : std::string();
}

bool plans_from_dataset(const PolicySpec& spec) {
  const PolicyDescriptor& d = policy_descriptor(spec);
  return d.plans_from_dataset && d.plans_from_dataset(spec);
}

bool needs_own_process(const PolicySpec& spec) {
  const PolicyDescriptor& d = policy_descriptor(spec);
  return d.needs_own_process && d.needs_own_process(spec);
}

std::vector<TuneKnobSpec> tune_knobs(const PolicySpec& spec, const TuneKnobContext& context) {
  const PolicyDescriptor& d = policy_descriptor(spec);
  return d.tune_knobs ? d.tune_knobs(spec, context) : std::vector<TuneKnobSpec>{};
}

}  // namespace lcsim
