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

void GpuSteps::assign(std::vector<int> lane_of) {
  lane_of_ = std::move(lane_of);
  int lanes = 0;
  for (int lane : lane_of_) lanes = std::max(lanes, lane + 1);
  lanes_.resize(static_cast<std::size_t>(lanes));
  for (auto& steps : lanes_) steps.clear();  // keeps their capacity
  // The lanes' GPUs, lane after lane (a counting sort: each lane's GPUs stay increasing).
  first_.assign(lanes_.size() + 1, 0);
  for (int lane : lane_of_) ++first_[static_cast<std::size_t>(lane) + 1];
  for (std::size_t l = 0; l < lanes_.size(); ++l) first_[l + 1] += first_[l];
  members_.resize(lane_of_.size());
  std::vector<std::size_t> next(first_.begin(), first_.end() - 1);
  for (std::size_t g = 0; g < lane_of_.size(); ++g) members_[next[lane(g)]++] = static_cast<int>(g);
}

GpuSteps::GpuSteps(std::vector<std::vector<Step>> per_gpu) {
  std::vector<int> identity(per_gpu.size());
  for (std::size_t g = 0; g < identity.size(); ++g) identity[g] = static_cast<int>(g);
  assign(std::move(identity));
  lanes_ = std::move(per_gpu);
}

void GpuSteps::unshare() {
  if (lanes_.size() == lane_of_.size()) return;  // a lane per GPU already
  std::vector<std::vector<Step>> own(lane_of_.size());
  for (std::size_t g = 0; g < own.size(); ++g) own[g] = lanes_[lane(g)];
  *this = GpuSteps(std::move(own));
}

namespace {

/// Whether every GPU of a replica runs the same steps (gpu_lanes).
bool runs_alike(const Replica& replica) {
  const ParallelScheme& s = replica.scheme;
  if (s.pp != 1 || s.tp != 1) return false;
  for (const MicroBatch& mb : replica.micro_batches) {
    if (mb.cp_split == CpSplit::PerSequence && s.cp > 1 && !mb.placements.empty()) return false;
    for (const Placement& p : mb.placements)
      if (!p.sharded() && s.cp > 1) return false;
  }
  return true;
}

}  // namespace

std::vector<int> gpu_lanes(const IterationPlan& plan, int world) {
  std::map<int, std::size_t> phases;  // phase -> its position
  for (const Replica& r : plan.replicas) phases.emplace(r.phase, 0);
  std::size_t position = 0;
  for (auto& [phase, at] : phases) at = position++;
  // A GPU's key: its replica in each phase (-1: none); `alone`: in a replica whose GPUs differ (or in two of one
  // phase, which the validator refuses), so in a lane of its own.
  const auto n = static_cast<std::size_t>(world);
  std::vector<int> keys(n * phases.size(), -1);
  std::vector<char> alone(n, 0);
  for (std::size_t r = 0; r < plan.replicas.size(); ++r) {
    const Replica& rep = plan.replicas[r];
    const bool alike = runs_alike(rep);
    const std::size_t at = phases.at(rep.phase);
    for (int g : rep.gpus) {
      if (g < 0 || g >= world) continue;
      int& key = keys[static_cast<std::size_t>(g) * phases.size() + at];
      if (key != -1 || !alike) alone[static_cast<std::size_t>(g)] = 1;
      key = static_cast<int>(r);
    }
  }
  std::vector<int> lanes(n);
  std::map<std::vector<int>, int> by_key;
  int count = 0;
  for (std::size_t g = 0; g < n; ++g) {
    if (alone[g]) {
      lanes[g] = count++;
      continue;
    }
    const auto first = keys.begin() + static_cast<std::ptrdiff_t>(g * phases.size());
    const auto [it, added] =
        by_key.try_emplace(std::vector<int>(first, first + static_cast<std::ptrdiff_t>(phases.size())), count);
    if (added) ++count;
    lanes[g] = it->second;
  }
  return lanes;
}

// The builder and its helpers: program_builder.hpp.
using namespace detail;

IterationProgram build_program(const IterationPlan& plan, const CostModel& cost, const ProgramOptions& options,
                               IterationProgram storage) {
  check_replicas(plan, cost);
  IterationProgram program = Builder(plan, cost, options, std::move(storage)).build();
  // Every time the simulator, the estimate and the trace read comes from here: a non-finite one would abort
  // SimGrid or write "dur":inf, so it is a broken invariant (the loaders bound every physical quantity).
  for (std::size_t lane = 0; lane < program.gpus.lane_count(); ++lane)
    for (const Step& step : program.gpus.lane_steps(lane))
      LCSIM_CHECK(std::isfinite(step.seconds) && step.seconds >= 0, "a step's seconds");
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
        if (stage + 1 == s.pp && s.virtual_pp > 1)  // interleaved: the last stage's chunk feeds the first's next
          for (int j = 0; j < s.cp; ++j)
            for (int t = 0; t < s.tp; ++t)
              groups.push_back({{rep.gpu(stage, j, t), rep.gpu(0, j, t)}, WorkKind::PpActivation});
      }
    }
    for (SliceGroup& group : slice_groups(plan, replicas))
      groups.push_back({std::move(group.gpus), WorkKind::GradAllReduce});
  }
  return groups;
}

}  // namespace lcsim::program
