// Ring attention in the builder: a block's ring exchanges, as each CP rank runs them, beside its compute.
#include "program/program_builder.hpp"

namespace lcsim::program::detail {

std::vector<Builder::RingStep> Builder::add_ring(const Replica& rep, int stage, int t, const MicroBatchWork& work,
                                                 const Block& b) {
  std::vector<int> group = group_over_cp(rep, stage, t);
  std::vector<RingStep> steps;
  for (const CpExchange& e : cost_.cp_exchanges(work.dist, work.sharded_per_gpu, rep.scheme, b.span, b.checkpointed()))
    steps.push_back({add_calls(group, e.calls, WorkKind::CpRing), e.beside_s, cost_.exposed_seconds(e, group), e.pass,
                     e.buffer_bytes});
  return steps;
}

const std::vector<Builder::RingStep>& Builder::rank_ring(const std::vector<RingStep>& shared, const Replica& rep,
                                                         const MicroBatchWork& work, int j, const Block& b, int which) {
  if (work.dist_ranks.empty() || shared.empty()) return shared;
  std::vector<RingStep>& ring = rank_ring_;
  ring = shared;
  std::vector<CpExchange> mine =
      cost_.cp_exchanges(work.rank_dist(j), work.sharded_per_gpu, rep.scheme, b.span, b.checkpointed());
  std::erase_if(mine, [&](const CpExchange& e) {
    return which == 1 ? e.pass != CpExchange::Pass::Forward : which == 2 && e.pass == CpExchange::Pass::Forward;
  });
  for (std::size_t e = 0; e < ring.size(); ++e) {
    const double beside = e < mine.size() ? mine[e].beside_s : 0.0;
    ring[e].beside_s = beside;
    ring[e].exposed_s =
        std::max(0.0, program_.collectives[static_cast<std::size_t>(ring[e].collective)].time.seconds() - beside);
  }
  return ring;
}

void Builder::add_block_ring(int gpu, bool overlap, BlockWork local, BlockWork dist, BlockWork all,
                             const std::vector<RingStep>& ring, WorkKind kind, int r, int m, int tp_hidden) {
  double beside = 0;
  for (const RingStep& step : ring) beside += step.beside_s;
  const WorkKind compute_kind = overlap && kind == WorkKind::Compute ? WorkKind::ComputeDist : kind;
  const BlockWork rest = overlap ? dist : all;
  // The GEMMs run in this part (the ring's steps hold attention), so async TP's transfers go beside it.
  push_compute(gpu, compute(compute_kind, rest.seconds - beside, r, m, rest.work), tp_hidden);
  join_leftover_tp(gpu, tp_hidden, r, m);
  double local_left = overlap ? local.seconds : 0.0;
  int local_work = overlap ? local.work : -1;
  for (std::size_t e = 0; e < ring.size(); ++e) {
    const double dealt = e + 1 == ring.size() ? local_left : std::min(local_left, ring[e].exposed_s);
    local_left -= dealt;
    Step step = join(ring[e].collective, WorkKind::CpRing, r, m);
    step.alloc_bytes = step.free_bytes = ring[e].buffer_bytes;  // all-gather CP's gathered K,V, for this step only
    if (ring[e].beside_s + dealt > 0) {  // the step's kind names its compute part, the collective's the transfers
      step.type = Step::Type::ComputeWithCollective;
      step.kind = compute_kind;
      step.seconds = ring[e].beside_s + dealt;
      if (dealt > 0) step.work = std::exchange(local_work, -1);
    }
    push(gpu, step);
  }
}

}  // namespace lcsim::program::detail
