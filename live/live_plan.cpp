#include "live/live_plan.hpp"

#include <algorithm>
#include <utility>

#include "base/errors.hpp"
#include "studies/evaluation.hpp"
#include "studies/model_scaling.hpp"

namespace lcsim {

LivePlans plan_live(const LiveOptions& options) {
  LoadedScenario loaded = load_and_prepare(options.scenario, options.iterations);
  if (options.layers) scale_model_layers(loaded, *options.layers);
  return plan_live(std::move(loaded), options.policies);
}

LivePlans plan_live(LoadedScenario loaded, const std::vector<std::string>& policies) {
  LivePlans live;
  live.loaded = std::move(loaded);
  const CostModel& cost = *live.loaded.cost;
  // The layer proxy runs a sharded sequence's attention the Ulysses way (all tokens, the rank's heads); a ring's
  // blockwise steps or all-gather CP's gathered K,V would be measured as something they are not.
  if (cost.options().cp_attention != CpAttention::Ulysses)
    throw InputError(live.loaded.scenario.file +
                     ": parallel.cp_attention: live runs Ulysses context parallelism "
                     "only; \"" +
                     std::string(to_string(cost.options().cp_attention)) + "\" is not executed live");
  // The layer proxy trains every weight: it has no LoRA adapters, always computes weight gradients and never runs a
  // layer under no_grad (LoRA, partial freezing).
  if (cost.options().finetuning.method != FinetuningMethod::Full)
    throw InputError(live.loaded.scenario.file + ": training.finetuning.method: live runs full fine-tuning only; \"" +
                     std::string(to_string(cost.options().finetuning.method)) +
                     "\" is simulated (lcsim plan, simulate) but not executed live");
  for (const PolicySpec* spec : select_policies(live.loaded.scenario, policies)) {
    PolicyPlans planned = plan_policy(live.loaded, *spec);
    LivePolicyPlans p;
    p.label = spec->label;
    p.kind = planned.kind;
    p.planning_ms = planned.planning_ms;
    p.plans = std::move(planned.plans);
    for (const IterationPlan& plan : p.plans) {
      p.programs.push_back(program::build_program(plan, cost, program::ProgramOptions{}));
      p.model_replay.push_back(program::replay_program(p.programs.back(), 0, false));
    }
    live.policies.push_back(std::move(p));
  }
  return live;
}

std::vector<double> static_bytes_per_gpu(const program::IterationProgram& program) {
  std::vector<double> bytes(program.gpus.size(), 0.0);
  for (std::size_t g = 0; g < program.gpus.size(); ++g)
    for (const program::Step& step : program.gpus[g])
      if (step.type == program::Step::Type::SetStatic) bytes[g] = std::max(bytes[g], step.bytes);
  return bytes;
}

void check_parallel_plans(const LivePlans& live) {
  for (const LivePolicyPlans& policy : live.policies)
    for (std::size_t i = 0; i < policy.plans.size(); ++i) {
      const std::string where = "live --mode parallel: " + policy.label + " iteration " + std::to_string(i);
      const IterationPlan& plan = policy.plans[i];
      if (plan.phase_count() > 1)
        throw InputError(where +
                         " switches strategies between phases, which parallel mode does not run; use "
                         "--mode rank-serial");
      for (const Replica& replica : plan.replicas)
        if (replica.scheme.pp > 1)
          throw InputError(where +
                           " has a pipeline (pp > 1), which parallel mode does not run; use --mode "
                           "rank-serial");
    }
}

}  // namespace lcsim
