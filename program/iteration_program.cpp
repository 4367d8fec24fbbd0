#include "program/iteration_program.hpp"
#include "program/program_builder.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "base/check.hpp"
#include "base/errors.hpp"
#include "model/plan_demand.hpp"

namespace lcsim::program {

const char* to_string(WorkKind kind) {
  switch (kind) {
    case WorkKind::Compute:
      return "compute";
    case WorkKind::ComputeLocal:
      return "compute local";
    case WorkKind::ComputeDist:
      return "compute distributed";
    case WorkKind::Forward:
      return "forward";
    case WorkKind::Backward:
      return "backward";
    case WorkKind::CpAllToAll:
      return "CP all-to-all";
    case WorkKind::TpCollective:
      return "TP all-gather/reduce-scatter";
    case WorkKind::GradReduceScatter:
      return "gradient reduce-scatter";
    case WorkKind::GradAllGather:
      return "parameter all-gather";
    case WorkKind::GradAllReduce:
      return "gradient all-reduce";
    case WorkKind::Optimizer:
      return "optimizer step";
    case WorkKind::Switch:
      return "strategy switch";
    case WorkKind::PpActivation:
      return "pipeline activations";
    case WorkKind::PpGradient:
      return "pipeline gradients";
    case WorkKind::PhaseBarrier:
      return "phase barrier";
    case WorkKind::CpRing:
      return "CP ring";
  }
  return "unknown";
}

const char* to_string(ComputeWork::Pass pass) {
  switch (pass) {
    case ComputeWork::Pass::ForwardBackward:
      return "forward+backward";
    case ComputeWork::Pass::Forward:
      return "forward";
    case ComputeWork::Pass::Backward:
      return "backward";
    case ComputeWork::Pass::Optimizer:
      return "optimizer";
    case ComputeWork::Pass::Switch:
      return "switch";
  }
  return "unknown";
}

bool is_communication(WorkKind kind) {
  switch (kind) {
    case WorkKind::CpAllToAll:
    case WorkKind::TpCollective:
    case WorkKind::GradReduceScatter:
    case WorkKind::GradAllGather:
    case WorkKind::GradAllReduce:
    case WorkKind::PpActivation:
    case WorkKind::PpGradient:
    case WorkKind::PhaseBarrier:
    case WorkKind::CpRing:
      return true;
    default:
      return false;
  }
}

// The builder and its helpers: program_builder.hpp.
using namespace detail;

IterationProgram build_program(const IterationPlan& plan, const CostModel& cost, const ProgramOptions& options,
                               IterationProgram storage) {
  check_replicas(plan, cost);
  IterationProgram program = Builder(plan, cost, options, std::move(storage)).build();
  // Every time the simulator, the estimate and the trace read comes from here: a non-finite one would abort
  // SimGrid or write "dur":inf, so it is a broken invariant (the loaders bound every physical quantity).
  for (const auto& steps : program.gpus)
    for (const Step& step : steps) LCSIM_CHECK(std::isfinite(step.seconds) && step.seconds >= 0, "a step's seconds");
  for (const auto& c : program.collectives)
    LCSIM_CHECK(std::isfinite(c.time.latency_s) && std::isfinite(c.time.transfer_s), "a collective's time");
  for (const auto& t : program.transfers)
    LCSIM_CHECK(std::isfinite(t.time.latency_s) && std::isfinite(t.time.transfer_s), "a transfer's time");
  return program;
}

std::vector<FlowGroup> flow_groups(const IterationPlan& plan, const CostModel& cost) {
  check_replicas(plan, cost);  // the groups do not depend on placements
  const WorkKind cp_kind = shards_tokens(cost.options().cp_attention) ? WorkKind::CpRing : WorkKind::CpAllToAll;
  std::vector<FlowGroup> groups;
  for (const auto& [phase, replicas] : replicas_by_phase(plan)) {
    for (int r : replicas) {
      const Replica& rep = plan.replicas[static_cast<std::size_t>(r)];
      const ParallelScheme& s = rep.scheme;
      for (int stage = 0; stage < s.pp; ++stage) {
        if (s.cp > 1)
          for (int t = 0; t < s.tp; ++t) groups.push_back({group_over_cp(rep, stage, t), cp_kind});
        if (s.tp > 1)
          for (int j = 0; j < s.cp; ++j) groups.push_back({group_over_tp(rep, stage, j), WorkKind::TpCollective});
        if (stage + 1 < s.pp)  // activations up, gradients back down: the same two endpoints
          for (int j = 0; j < s.cp; ++j)
            for (int t = 0; t < s.tp; ++t)
              groups.push_back({{rep.gpu(stage, j, t), rep.gpu(stage + 1, j, t)}, WorkKind::PpActivation});
      }
    }
    for (SliceGroup& group : slice_groups(plan, replicas))
      groups.push_back({std::move(group.gpus), WorkKind::GradAllReduce});
  }
  return groups;
}

}  // namespace lcsim::program
