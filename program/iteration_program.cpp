#include "program/iteration_program.hpp"
#include "program/program_builder.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <unordered_map>
#include <utility>

#include "base/check.hpp"
#include "base/errors.hpp"
#include "base/fnv1a.hpp"
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

/// What two replicas that stand for each other share (replica_stand_ins), hashed: their shapes, and where their
/// GPUs sit relative to the first one and to its domain.
std::uint64_t stand_in_hash(const Replica& r, int domain_size) {
  Fnv1a h;
  const ParallelScheme& s = r.scheme;
  for (const int v : {s.tp, s.pp, s.cp, s.checkpointed_layers, s.virtual_pp, static_cast<int>(s.recompute)}) h.add(v);
  h.add(r.overlap_cp_comm).add(r.gpus.front() % domain_size);
  for (const int g : r.gpus) h.add(g - r.gpus.front());
  for (const MicroBatch& mb : r.micro_batches) {
    h.add(static_cast<std::int64_t>(mb.placements.size())).add(mb.padded).add(static_cast<std::int64_t>(mb.cp_split));
    for (const Placement& p : mb.placements) h.add(p.tokens).add(p.cp_rank);
  }
  return h.digest();
}

/// Whether replica `q` stands for `r` (replica_stand_ins), their hashes being equal.
bool stands_for(const Replica& q, const Replica& r, int domain_size) {
  const int delta = r.gpus.front() - q.gpus.front();
  if (delta <= 0 || delta % domain_size != 0 || !(q.scheme == r.scheme) || q.overlap_cp_comm != r.overlap_cp_comm ||
      q.gpus.size() != r.gpus.size() || q.micro_batches.size() != r.micro_batches.size())
    return false;
  for (std::size_t i = 0; i < q.gpus.size(); ++i)
    if (r.gpus[i] - q.gpus[i] != delta) return false;
  for (std::size_t m = 0; m < q.micro_batches.size(); ++m) {
    const MicroBatch& a = q.micro_batches[m];
    const MicroBatch& b = r.micro_batches[m];
    if (a.padded != b.padded || a.cp_split != b.cp_split || a.placements.size() != b.placements.size()) return false;
    for (std::size_t p = 0; p < a.placements.size(); ++p)
      if (a.placements[p].tokens != b.placements[p].tokens || a.placements[p].cp_rank != b.placements[p].cp_rank)
        return false;
  }
  return true;
}

}  // namespace

std::vector<int> replica_stand_ins(const IterationPlan& plan, int domain_size) {
  std::vector<int> stand_in(plan.replicas.size());
  std::iota(stand_in.begin(), stand_in.end(), 0);
  const bool any_empty =
      std::any_of(plan.replicas.begin(), plan.replicas.end(), [](const Replica& r) { return r.gpus.empty(); });
  if (plan.replicas.size() < 2 || plan.phase_count() != 1 || domain_size < 1 || any_empty) return stand_in;
  // Lowest placed first, so that each kind's stand-in is its lowest replica and leads the lanes it shares.
  std::vector<int> order(stand_in);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return plan.replicas[static_cast<std::size_t>(a)].gpus.front() <
           plan.replicas[static_cast<std::size_t>(b)].gpus.front();
  });
  std::unordered_map<std::uint64_t, std::vector<int>> kinds;  // hash -> the stand-ins with it
  for (const int r : order) {
    const Replica& replica = plan.replicas[static_cast<std::size_t>(r)];
    std::vector<int>& candidates = kinds[stand_in_hash(replica, domain_size)];
    const auto found = std::find_if(candidates.begin(), candidates.end(), [&](int q) {
      return stands_for(plan.replicas[static_cast<std::size_t>(q)], replica, domain_size);
    });
    if (found == candidates.end())
      candidates.push_back(r);
    else
      stand_in[static_cast<std::size_t>(r)] = *found;
  }
  return stand_in;
}

std::vector<int> gpu_lanes(const IterationPlan& plan, int world, std::span<const int> stand_ins) {
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
  if (stand_ins.empty()) return lanes;
  LCSIM_CHECK(stand_ins.size() == plan.replicas.size(), "a stand-in per replica");
  for (std::size_t r = 0; r < plan.replicas.size(); ++r) {
    const auto q = static_cast<std::size_t>(stand_ins[r]);
    if (q == r) continue;
    for (std::size_t i = 0; i < plan.replicas[r].gpus.size(); ++i)
      lanes[static_cast<std::size_t>(plan.replicas[r].gpus[i])] =
          lanes[static_cast<std::size_t>(plan.replicas[q].gpus[i])];
  }
  // Dense again, in order of each lane's first GPU.
  std::vector<int> renumbered(static_cast<std::size_t>(count), -1);
  int next = 0;
  for (int& lane : lanes) {
    int& to = renumbered[static_cast<std::size_t>(lane)];
    if (to < 0) to = next++;
    lane = to;
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
