#include "policies/core/policy.hpp"

#include "base/errors.hpp"

namespace lcsim {

ParallelScheme layout_scheme(const PlanningContext& context) {
  const auto& l = context.layout;
  if (l.dp < 1 || l.cp < 1 || l.tp < 1 || l.pp < 1)
    throw PlanningError("layout: every degree must be >= 1, got dp " + std::to_string(l.dp) + ", cp " +
                        std::to_string(l.cp) + ", tp " + std::to_string(l.tp) + ", pp " + std::to_string(l.pp));
  ParallelScheme scheme;
  scheme.tp = context.layout.tp;
  scheme.pp = context.layout.pp;
  scheme.cp = context.layout.cp;
  scheme.virtual_pp = context.layout.virtual_pp;
  scheme.recompute = context.training.recompute;
  return scheme;
}

JsonObjectReader policy_options(const PolicySpec& spec) {
  return JsonObjectReader(spec.options, spec.file, spec.path + ".options");
}

std::optional<Recompute> read_recompute(JsonObjectReader& reader, std::string_view key) {
  if (!reader.has(key)) return std::nullopt;
  const auto value = reader.required<std::string>(key);
  for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
    if (value == to_string(r)) return r;
  reader.fail(key, "expected \"none\", \"selective\" or \"full\", got \"" + value + "\"");
}



}  // namespace lcsim

namespace lcsim {

std::vector<nlohmann::json> context_budgets(Tokens context_length) {
  std::vector<nlohmann::json> budgets = {nullptr};
  for (Tokens t : {context_length / 4, context_length / 2, context_length}) budgets.push_back(t);
  return budgets;
}

}  // namespace lcsim
