// The builder's phases, work descriptors, collectives and gradient sync.
#include "program/program_builder.hpp"

#include <limits>
#include <utility>

namespace lcsim::program::detail {

IterationProgram Builder::build() {
  bool first = true;
  const std::map<int, std::vector<int>> phases = replicas_by_phase(plan_);
  std::vector<ModelSlice> held(program_.gpus.size());
  for (const auto& [phase, replicas] : phases) {
    // The sync meets the last phase's micro-batches: a site in an earlier phase would hold its GPU before the
    // barrier that GPUs of the last phase wait at.
    if (cost_.options().overlap_gradient_sync) {
      backward_sites_.assign(program_.gpus.size(), SyncSite{});
      forward_sites_.assign(program_.gpus.size(), SyncSite{});
    }
    double switch_s = 0;
    double switch_params = 0;
    // A strategy switch moves parameters only when some GPU is to hold another slice of the model: groups that
    // change their CP degree alone (FlexSP) keep every GPU's parameters and ZeRO shards where they are.
    bool moves = false;
    for (int r : replicas) {
      const Replica& rep = replica(r);
      for (std::size_t i = 0; i < rep.gpus.size(); ++i) {
        const ModelSlice slice = slice_of(rep.scheme, static_cast<int>(i));
        ModelSlice& h = held[static_cast<std::size_t>(rep.gpus[i])];
        moves = moves || h != slice;
        h = slice;
      }
    }
    if (!first) {
      add_phase_barrier();
      for (int r : moves ? replicas : std::vector<int>{}) {
        const double s = cost_.switch_seconds(replica(r).scheme);
        if (s > switch_s) switch_params = cost_.parameters_per_gpu(replica(r).scheme);
        switch_s = std::max(switch_s, s);
      }
    }
    first = false;
    for (int r : replicas) {
      if (folded(r)) continue;  // its GPUs run its stand-in's lanes
      const Replica& rep = replica(r);
      // Stages differ when part of the model is frozen; GPUs are stage-major in the replica (Replica::gpu).
      std::vector<double> static_bytes;
      for (int stage = 0; stage < rep.scheme.pp; ++stage)
        static_bytes.push_back(cost_.static_bytes(rep.scheme, shard_degree(cost_, rep.scheme), stage));
      const std::size_t per_stage = rep.gpus.size() / static_cast<std::size_t>(rep.scheme.pp);
      for (std::size_t i = 0; i < rep.gpus.size(); ++i) {
        const int g = rep.gpus[i];
        if (!leads(g)) continue;  // its lane's first GPU writes them
        Step set{.type = Step::Type::SetStatic, .kind = WorkKind::Compute};
        set.bytes = static_bytes[i / per_stage];
        push(g, set);
        if (switch_s > 0) {
          push(g, compute(WorkKind::Switch, switch_s, r, -1,
                          add_work(parameter_work(ComputeWork::Pass::Switch, switch_params))));
        }
      }
      if (rep.scheme.pp == 1)
        add_flat_replica(r);
      else
        add_pipelined_replica(r);
    }
    // One gradient sync and optimizer step per iteration, after the last phase (earlier phases accumulate).
    if (phase == phases.rbegin()->first) add_gradient_sync(replicas);
  }
  return std::move(program_);
}

int Builder::add_work(ComputeWork work) {
  if (!options_.describe_work) return -1;
  program_.works.push_back(std::move(work));
  return static_cast<int>(program_.works.size()) - 1;
}

int Builder::add_work(ComputeWork::Pass pass, const Shares& shares, const Ids& ids, const ParallelScheme& s,
                      const Block& b, bool head_stage) {
  if (shares.empty() || !options_.describe_work) return -1;
  return add_work(ComputeWork{.pass = pass,
                              .shares = shares,
                              .sequence_ids = ids,
                              .tp = s.tp,
                              .layers = b.layers(),
                              .checkpointed_layers = b.checkpointed(),
                              .recompute = s.recompute,
                              .lm_head = head_stage && b.last});
}

int Builder::add_work(ComputeWork::Pass pass, const Shares& local, const Ids& local_ids, const Shares& dist,
                      const Ids& dist_ids, const ParallelScheme& s, const Block& b, bool head_stage) {
  if (!options_.describe_work) return -1;
  return add_work(pass, concat(local, dist), concat(local_ids, dist_ids), s, b, head_stage);
}

int Builder::add_collective(std::vector<int> gpus, LinkClass link, CollectiveTime time, WorkKind kind,
                            std::vector<CollectiveCall> calls, double flow_scale) {
  program_.collectives.push_back({std::move(gpus), link, time, kind, std::move(calls), flow_scale});
  return static_cast<int>(program_.collectives.size()) - 1;
}

int Builder::add_calls(std::vector<int> gpus, const std::vector<CollectiveCall>& calls, WorkKind kind, bool half) {
  const Topology topology = cost_.cluster().topology();
  const LinkClass link = topology.link_class(gpus);
  const CollectiveTime time = cost_.collective_time(calls, gpus);
  // Only a fabric below the members' links slows their flows' bytes (a spread ring moves each NIC's share).
  double flow_scale = 1.0;
  if (link == LinkClass::InfiniBand && !calls.empty() && topology.kind().uplink_share() < 1.0)
    flow_scale = std::min(1.0, topology.collective_path(calls.front().op, gpus).bandwidth_scale);
  std::vector<CollectiveCall> described;  // the calls are for the live executor only
  if (options_.describe_work) described = half ? halve(calls) : calls;
  return add_collective(std::move(gpus), link, half ? halve(time) : time, kind, std::move(described), flow_scale);
}

Builder::TpCollectives Builder::add_tp_collectives(std::vector<int> gpus, Tokens tokens, int tp, LayerSpan span,
                                                   bool half) {
  const std::vector<CollectiveCall> calls = cost_.tp_comm_calls(tokens, tp, span);
  // Timing the group is a topology walk per block and micro-batch: only async TP needs it twice.
  if (cost_.options().tp_overlap != TpOverlap::Async)
    return {add_calls(std::move(gpus), calls, WorkKind::TpCollective, half), -1};
  const double whole = cost_.collective_time(calls, gpus).seconds();
  const double hidden = cost_.tp_hidden_seconds(tokens, tp, span, whole);
  if (hidden <= 0) return {add_calls(std::move(gpus), calls, WorkKind::TpCollective, half), -1};
  // Both parts move the same kind of bytes; splitting the calls' counts splits latency and transfer alike.
  const double share = hidden / whole;
  TpCollectives out;
  out.exposed = add_calls(gpus, scaled(calls, 1 - share), WorkKind::TpCollective, half);
  out.hidden = add_calls(std::move(gpus), scaled(calls, share), WorkKind::TpCollective, half);
  return out;
}

void Builder::push_compute(int gpu, Step step, int& tp_hidden) {
  if (tp_hidden >= 0 && step.type == Step::Type::Compute && step.seconds > 0) {
    step.type = Step::Type::ComputeWithCollective;
    step.index = std::exchange(tp_hidden, -1);
  }
  push(gpu, step);
}

void Builder::join_leftover_tp(int gpu, int tp_hidden, int r, int m) {
  if (tp_hidden >= 0) push(gpu, join(tp_hidden, WorkKind::TpCollective, r, m));
}

void Builder::add_phase_barrier() {
  std::vector<int> all(program_.gpus.size());
  for (std::size_t g = 0; g < all.size(); ++g) all[g] = static_cast<int>(g);
  const int c = add_collective(std::move(all), LinkClass::InfiniBand, {}, WorkKind::PhaseBarrier, {});
  for (std::size_t g = 0; g < program_.gpus.size(); ++g)
    push(static_cast<int>(g), join(c, WorkKind::PhaseBarrier, -1, -1));
}

void Builder::add_block_compute(int gpu, bool overlap, BlockWork local, BlockWork dist, BlockWork all,
                                int cp_collective, int layers, WorkKind kind, int r, int m, int tp_hidden) {
  if (overlap) {
    if (cp_collective >= 0) {
      Step s = join(cp_collective, WorkKind::CpAllToAll, r, m);
      if (local.seconds > 0) {  // the step's kind names its compute part; the collective's names the communication
        s.type = Step::Type::ComputeWithCollective;
        s.kind = kind == WorkKind::Compute ? WorkKind::ComputeLocal : kind;
        s.seconds = local.seconds;
        s.lead_s = local.seconds / layers;
        s.work = local.work;
      }
      push(gpu, s);
    } else if (local.seconds > 0) {
      push_compute(gpu,
                   compute(kind == WorkKind::Compute ? WorkKind::ComputeLocal : kind, local.seconds, r, m, local.work),
                   tp_hidden);
    }
    if (dist.seconds > 0)
      push_compute(gpu,
                   compute(kind == WorkKind::Compute ? WorkKind::ComputeDist : kind, dist.seconds, r, m, dist.work),
                   tp_hidden);
  } else {
    if (all.seconds > 0) push_compute(gpu, compute(kind, all.seconds, r, m, all.work), tp_hidden);
    if (cp_collective >= 0) push(gpu, join(cp_collective, WorkKind::CpAllToAll, r, m));
  }
  join_leftover_tp(gpu, tp_hidden, r, m);
}

void Builder::mark_in_flight(int gpu, std::size_t first, double bytes) {
  if (!leads(gpu) || step_count(gpu) == first) return;
  step_at(gpu, first).alloc_bytes += bytes;
  step_at(gpu, step_count(gpu) - 1).free_bytes += bytes;
}

void Builder::note_sync_sites(int gpu, std::size_t first, double backward_share) {
  if (!cost_.options().overlap_gradient_sync || !leads(gpu)) return;
  std::size_t longest = step_count(gpu);
  for (std::size_t i = first; i < step_count(gpu); ++i) {
    const Step& step = step_at(gpu, i);
    const bool propagation = step.kind == WorkKind::Compute || step.kind == WorkKind::ComputeLocal ||
                             step.kind == WorkKind::ComputeDist || step.kind == WorkKind::Forward ||
                             step.kind == WorkKind::Backward;
    if (step.type == Step::Type::Compute && propagation && step.seconds > 0 &&
        (longest == step_count(gpu) || step.seconds > step_at(gpu, longest).seconds))
      longest = i;
  }
  if (longest == step_count(gpu)) return;  // nothing but steps that already carry a collective
  const double seconds = step_at(gpu, longest).seconds;
  const auto g = static_cast<std::size_t>(gpu);
  if (backward_share > 0) backward_sites_[g] = {longest, seconds * backward_share, true};
  if (backward_share < 1 && !forward_sites_[g].set) forward_sites_[g] = {longest, seconds * (1 - backward_share), true};
}

std::array<double, 2> Builder::hide_gradient_sync(const SliceGroup& group, const std::vector<CollectiveCall>& calls) {
  std::array<double, 2> exposed{1, 1};
  if (!cost_.options().overlap_gradient_sync || calls.empty()) return exposed;
  // Every member needs a site; a step carries one collective, so the two parts go together where the members'
  // sites are one step (a single micro-batch) and apart where no member's are.
  double backward = std::numeric_limits<double>::infinity(), forward = backward;
  bool one_step = true, apart = true;
  for (int g : group.gpus) {
    if (!leads(g)) continue;
    const SyncSite& b = backward_sites_[static_cast<std::size_t>(g)];
    const SyncSite& f = forward_sites_[static_cast<std::size_t>(g)];
    if (!b.set || !f.set) return exposed;
    backward = std::min(backward, b.beside_s);
    forward = std::min(forward, f.beside_s);
    (b.step == f.step ? apart : one_step) = false;
  }
  const int layers = stage_span(cost_.model(), replica(group.replica).scheme.pp, group.stage).count;
  // The reduce (first call) beside the backward; the parameters' all-gather (ZeRO 1-3) beside the forward, unless
  // the members' sites are mixed.
  const bool gather = calls.size() > 1 && (one_step || apart);
  std::vector<CollectiveCall> hidden;
  for (std::size_t i = 0; i < (gather ? 2u : 1u); ++i) {
    const double whole = cost_.collective_time(std::span(&calls[i], 1), group.gpus).seconds();
    const double part = CostModel::gradient_sync_hidden_seconds(whole, layers, i == 0 ? backward : forward);
    if (!(whole > 0) || part <= 0) continue;
    exposed[i] = 1 - part / whole;
    hidden.push_back(calls[i]);
    hidden.back().count *= part / whole;
  }
  if (hidden.empty()) return exposed;
  const auto attach = [&](const std::vector<CollectiveCall>& parts, WorkKind kind, const std::vector<SyncSite>& sites) {
    const int c = add_calls(group.gpus, parts, kind);
    for (int g : group.gpus) {
      if (!leads(g)) continue;
      Step& step = step_at(g, sites[static_cast<std::size_t>(g)].step);
      step.type = Step::Type::ComputeWithCollective;
      step.index = c;
      step.lead_s = step.seconds;  // the compute never waits for the other members: the buckets follow it
    }
  };
  const WorkKind reduce =
      calls[0].op == CollectiveOp::AllReduce ? WorkKind::GradAllReduce : WorkKind::GradReduceScatter;
  const bool reduce_hidden = exposed[0] < 1, gather_hidden = exposed[1] < 1;
  // One collective beside each site, or one for both where the sites are one step (or only one part hides).
  if (reduce_hidden && gather_hidden && !one_step) {
    attach({hidden[0]}, reduce, backward_sites_);
    attach({hidden[1]}, WorkKind::GradAllGather, forward_sites_);
  } else {
    attach(hidden, reduce_hidden ? reduce : WorkKind::GradAllGather, reduce_hidden ? backward_sites_ : forward_sites_);
  }
  return exposed;
}

void Builder::add_gradient_sync(const std::vector<int>& replicas) {
  for (const SliceGroup& group : slice_groups(plan_, replicas)) {
    const ParallelScheme& scheme = replica(group.replica).scheme;
    const int shards = shard_degree(cost_, scheme);
    const double optimizer_s = cost_.optimizer_seconds(scheme, shards, group.stage);
    // As optimizer_seconds: ZeRO 1-3 update the GPU's shard, ZeRO-0 every parameter it holds.
    const double updated =
        cost_.trained_parameters_per_gpu(scheme, group.stage) / (cost_.options().zero_stage >= 1 ? shards : 1);
    std::vector<std::pair<int, WorkKind>> syncs;
    const std::vector<CollectiveCall> calls = cost_.gradient_sync_calls(scheme, shards, group.stage);
    const std::array<double, 2> exposed = hide_gradient_sync(group, calls);
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const CollectiveCall& call = calls[i];
      const WorkKind kind = call.op == CollectiveOp::ReduceScatter ? WorkKind::GradReduceScatter
                            : call.op == CollectiveOp::AllGather   ? WorkKind::GradAllGather
                                                                   : WorkKind::GradAllReduce;
      syncs.emplace_back(add_calls(group.gpus, scaled({call}, exposed[std::min<std::size_t>(i, 1)]), kind), kind);
    }
    for (int g : group.gpus) {
      if (!leads(g)) continue;
      // Reduce-scatter, optimizer step on the shard, all-gather; an all-reduce comes before the step.
      for (const auto& [c, kind] : syncs)
        if (kind != WorkKind::GradAllGather) push(g, join(c, kind, -1, -1));
      if (optimizer_s > 0)
        push(g, compute(WorkKind::Optimizer, optimizer_s, -1, -1,
                        add_work(parameter_work(ComputeWork::Pass::Optimizer, updated))));
      for (const auto& [c, kind] : syncs)
        if (kind == WorkKind::GradAllGather) push(g, join(c, kind, -1, -1));
    }
  }
}

}  // namespace lcsim::program::detail
