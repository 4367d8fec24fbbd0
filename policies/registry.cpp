// The policy registry: adding a built-in policy is one line in kPolicies; out-of-tree policies register_policy().
#include <algorithm>
#include <stdexcept>
#include <utility>

#include "base/errors.hpp"
#include "policies/baselines/deepspeed.hpp"
#include "policies/baselines/four_d.hpp"
#include "policies/baselines/hotspa.hpp"
#include "policies/baselines/megatron.hpp"
#include "policies/baselines/packing.hpp"
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

struct PolicyEntry {
  std::string_view kind;
  std::unique_ptr<Policy> (*make)(const PolicySpec& spec);
};

// clang-format off
constexpr PolicyEntry kPolicies[] = {
    {"deepspeed", baselines::make_deepspeed_policy},
    {"sorted", baselines::make_sorted_policy},
    {"packing", baselines::make_packing_policy},
    {"hbp", hbp::make_hbp_policy},
    {"skrull", skrull::make_skrull},
    {"skrull-dacp", skrull::make_skrull_dacp},
    {"rr", skrull::make_round_robin},
    {"hydraulis", hydraulis::make_hydraulis_policy},
    {"megatron", baselines::make_megatron_policy},
    {"deepspeed-ulysses", baselines::make_ulysses_policy},
    {"hotspa", baselines::make_hotspa_policy},
    {"flexsp", flexsp::make_flexsp_policy},
    {"flexsp-batchada", flexsp::make_flexsp_batchada_policy},
    {"wlb-llm", wlbllm::make_wlbllm_policy},
    {"plain-4d", baselines::make_plain_4d_policy},
    {"fixed-4d", baselines::make_fixed_4d_policy},
};
// clang-format on

/// Kinds added by register_policy, in registration order.
std::vector<std::pair<std::string, PolicyFactory>>& registered() {
  static std::vector<std::pair<std::string, PolicyFactory>> policies;
  return policies;
}

}  // namespace

std::vector<std::string> policy_kinds() {
  std::vector<std::string> kinds;
  for (const auto& entry : kPolicies) kinds.emplace_back(entry.kind);
  for (const auto& [kind, factory] : registered()) kinds.push_back(kind);
  return kinds;
}

void register_policy(const std::string& kind, PolicyFactory factory) {
  if (kind.empty()) throw std::invalid_argument("register_policy: empty policy kind");
  if (!factory) throw std::invalid_argument("register_policy: no factory for policy kind '" + kind + "'");
  const auto kinds = policy_kinds();
  if (std::find(kinds.begin(), kinds.end(), kind) != kinds.end())
    throw std::invalid_argument("register_policy: policy kind '" + kind + "' is already taken");
  registered().emplace_back(kind, std::move(factory));
}

std::unique_ptr<Policy> make_policy(const PolicySpec& spec) {
  for (const auto& entry : kPolicies)
    if (entry.kind == spec.kind) return entry.make(spec);
  for (const auto& [kind, factory] : registered())
    if (kind == spec.kind) return factory(spec);
  std::string known;
  for (const auto& kind : policy_kinds()) known += (known.empty() ? "" : ", ") + kind;
  throw InputError(spec.file + ": " + spec.path + ".kind: unknown policy kind '" + spec.kind + "' (known: " + known +
                   ")");
}

}  // namespace lcsim
