// The builder's replicas without a pipeline: each micro-batch's blocks, forward and backward together.
#include "program/program_builder.hpp"

namespace lcsim::program::detail {

void Builder::add_flat_replica(int r) {
  const Replica& rep = replica(r);
  const ParallelScheme& s = rep.scheme;
  FlatLayers f;
  f.layers = stage_span(cost_.model(), 1, 0);
  f.blocks = make_blocks(cost_, s, f.layers, options_.layers_per_block);
  f.bytes_per_token = cost_.activation_bytes_per_token(s, f.layers, true);
  f.mix = cost_.layer_mix(s, f.layers);
  for (std::size_t mi = 0; mi < rep.micro_batches.size(); ++mi) {
    add_flat_micro_batch(r, f, mi);
    if (options_.after_flat_micro_batch) options_.after_flat_micro_batch(program_, rep.gpus);
  }
}

void Builder::add_flat_micro_batch(int r, const FlatLayers& f, std::size_t mi) {
  const Replica& rep = replica(r);
  const ParallelScheme& s = rep.scheme;
  MicroBatchWork& work = scratch_.work;
  check_placements(plan_, static_cast<std::size_t>(r), rep.micro_batches[mi]);
  split_work(rep, rep.micro_batches[mi], work);
  split_ids(rep, rep.micro_batches[mi], options_.describe_work, scratch_.ids);
  const bool sharded = s.cp > 1 && work.sharded_tokens > 0;
  const double sharded_bytes = sharded ? cost_.sharded_attention_bytes(work.dist, s, f.layers) : 0;
  add_flat_cp_collectives(rep, f.blocks, sharded);
  scratch_.costs.assign(cost_, work, s, f.mix, rep.overlap_cp_comm, true);
  for (int j = 0; j < s.cp; ++j) add_flat_cp_rank(r, f, static_cast<int>(mi), j, sharded_bytes);
}

void Builder::add_flat_cp_collectives(const Replica& rep, const std::vector<Block>& blocks, bool sharded) {
  const ParallelScheme& s = rep.scheme;
  auto& cp_index = scratch_.cp_index;
  auto& ring = scratch_.ring;
  resize_grid(cp_index, blocks.size(), static_cast<std::size_t>(s.tp), -1);
  ring.resize(blocks.size());
  for (auto& per_tp : ring) {
    per_tp.resize(static_cast<std::size_t>(s.tp));
    for (auto& steps : per_tp) steps.clear();
  }
  if (!sharded) return;
  const MicroBatchWork& work = scratch_.work;
  for (std::size_t b = 0; b < blocks.size(); ++b)
    for (int t = 0; t < s.tp; ++t) {
      const auto tt = static_cast<std::size_t>(t);
      if (ring_attention_)
        ring[b][tt] = add_ring(rep, 0, t, work, blocks[b]);
      else
        cp_index[b][tt] =
            add_calls(group_over_cp(rep, 0, t), cost_.ulysses_calls(work.sharded_per_gpu, s.cp, blocks[b].span),
                      WorkKind::CpAllToAll);
    }
}

void Builder::add_flat_cp_rank(int r, const FlatLayers& f, int m, int j, double sharded_bytes) {
  const Replica& rep = replica(r);
  const ParallelScheme& s = rep.scheme;
  const MicroBatchWork& work = scratch_.work;
  const auto jj = static_cast<std::size_t>(j);
  if (work.local[jj].empty() && work.dist.empty()) return;
  const Tokens tokens = work.gpu_tokens(j);
  auto& tp_index = scratch_.tp_index;
  tp_index.assign(f.blocks.size(), TpCollectives{});
  if (s.tp > 1 && tokens > 0)
    for (std::size_t b = 0; b < f.blocks.size(); ++b)
      tp_index[b] = add_tp_collectives(group_over_tp(rep, 0, j), tokens, s.tp, f.blocks[b].span);
  for (int t = 0; t < s.tp; ++t) {
    const int g = rep.gpu(0, j, t);
    if (!leads(g)) continue;  // the CP ranks of a lane run its first GPU's steps
    const std::size_t first = step_count(g);
    for (std::size_t b = 0; b < f.blocks.size(); ++b) add_flat_block(r, m, j, t, g, f.blocks[b], b);
    mark_in_flight(g, first, f.bytes_per_token * static_cast<double>(tokens) + sharded_bytes);
    if (cost_.options().overlap_gradient_sync) note_sync_sites(g, first, backward_share(rep, f, j));
  }
}

double Builder::backward_share(const Replica& rep, const FlatLayers& f, int j) const {
  const auto jj = static_cast<std::size_t>(j);
  const MicroBatchCosts& costs = scratch_.costs;
  double total = 0, backward = 0;
  const auto add = [&](const ShareCost& cost) {
    for (const Block& block : f.blocks) {
      total += cost.block(block);
      backward += cost.block_backward(block);
    }
  };
  if (rep.overlap_cp_comm) {
    add(costs.local[jj]);
    add(costs.rank_dist(jj));
  } else {
    add(costs.all[jj]);
  }
  return total > 0 ? backward / total : 0.0;
}

void Builder::add_flat_block(int r, int m, int j, int t, int g, const Block& block, std::size_t b) {
  const Replica& rep = replica(r);
  const ParallelScheme& s = rep.scheme;
  const MicroBatchWork& work = scratch_.work;
  const ShareIds& ids = scratch_.ids;
  const auto jj = static_cast<std::size_t>(j);
  const TpCollectives& tp = scratch_.tp_index[b];
  if (tp.exposed >= 0) push(g, join(tp.exposed, WorkKind::TpCollective, r, m));
  constexpr auto kPass = ComputeWork::Pass::ForwardBackward;
  const Shares& local_shares = work.local[jj];
  const Ids& local_ids = ids.local[jj];
  const BlockWork local_work{scratch_.costs.local[jj].block(block),
                             rep.overlap_cp_comm ? add_work(kPass, local_shares, local_ids, s, block, true) : -1};
  const Shares& dist_shares = work.rank_dist(j);
  const Ids& dist_ids = ids.rank_dist(j);
  const BlockWork dist_work{scratch_.costs.rank_dist(jj).block(block),
                            rep.overlap_cp_comm ? add_work(kPass, dist_shares, dist_ids, s, block, true) : -1};
  const BlockWork all_work{
      scratch_.costs.all[jj].block(block),
      rep.overlap_cp_comm ? -1 : add_work(kPass, local_shares, local_ids, dist_shares, dist_ids, s, block, true)};
  const auto tt = static_cast<std::size_t>(t);
  const auto& ring_steps = rank_ring(scratch_.ring[b][tt], rep, work, j, block, 0);
  if (!ring_steps.empty())
    add_block_ring(g, rep.overlap_cp_comm, local_work, dist_work, all_work, ring_steps, WorkKind::Compute, r, m,
                   tp.hidden);
  else
    add_block_compute(g, rep.overlap_cp_comm, local_work, dist_work, all_work, scratch_.cp_index[b][tt], block.layers(),
                      WorkKind::Compute, r, m, tp.hidden);
}

}  // namespace lcsim::program::detail
