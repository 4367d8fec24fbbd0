// The builder's pipelined replicas: 1F1B order, stage-to-stage transfers and each pass's collectives.
#include "program/program_builder.hpp"

namespace lcsim::program::detail {
namespace {

/// The 1F1B order of a stage: min(pp - 1 - stage, M) warm-up forwards, then one forward and one backward
/// alternately, then the remaining backwards; (micro-batch, forward?) pairs.
std::vector<std::pair<std::size_t, bool>> one_f_one_b(int pp, int stage, std::size_t micro_batches) {
  const std::size_t warmup = std::min(static_cast<std::size_t>(pp - 1 - stage), micro_batches);
  std::vector<std::pair<std::size_t, bool>> order;
  for (std::size_t m = 0; m < warmup; ++m) order.emplace_back(m, true);
  for (std::size_t k = 0; k + warmup < micro_batches; ++k) {
    order.emplace_back(warmup + k, true);
    order.emplace_back(k, false);
  }
  for (std::size_t m = micro_batches - warmup; m < micro_batches; ++m) order.emplace_back(m, false);
  return order;
}

}  // namespace

void Builder::add_pipelined_replica(int r) {
  const Replica& rep = replica(r);
  const ParallelScheme& s = rep.scheme;
  std::vector<MicroBatchWork> works;
  std::vector<ShareIds> ids;
  for (const auto& mb : rep.micro_batches) {
    check_placements(plan_, static_cast<std::size_t>(r), mb);
    works.push_back(split_work(rep, mb));
    ids.push_back(share_ids(rep, mb));
  }
  const PipelineTransfers transfers = add_pipeline_transfers(rep, works);
  for (int stage = 0; stage < s.pp; ++stage) {
    const bool head = stage == s.pp - 1;
    const LayerSpan layers = stage_span(cost_.model(), s.pp, stage);
    const std::vector<Block> blocks = make_blocks(cost_, s, layers, options_.layers_per_block);
    const LayerMix mix = cost_.layer_mix(s, layers);
    std::vector<PassCollectives> passes;
    std::vector<MicroBatchCosts> costs;
    std::vector<double> sharded_bytes;
    for (const MicroBatchWork& work : works) {
      sharded_bytes.push_back(cost_.sharded_attention_bytes(work.dist, s, layers));
      passes.push_back(add_pass_collectives(rep, stage, work, blocks));
      costs.emplace_back(cost_, work, s, mix, rep.overlap_cp_comm, head);
    }
    const StageContext context{
        r,     stage,  head,     cost_.activation_bytes_per_token(s, layers, head), sharded_bytes, blocks, works, ids,
        costs, passes, transfers};
    const auto order = one_f_one_b(s.pp, stage, works.size());
    for (int j = 0; j < s.cp; ++j)
      for (int t = 0; t < s.tp; ++t) {
        std::vector<std::size_t> first_step(works.size(), 0);
        for (const auto& [m, forward] : order) add_pipeline_pass(context, j, t, m, forward, first_step[m]);
      }
  }
}

Builder::PipelineTransfers Builder::add_pipeline_transfers(const Replica& rep,
                                                           const std::vector<MicroBatchWork>& works) {
  const ParallelScheme& s = rep.scheme;
  const auto ranks = static_cast<std::size_t>(s.cp * s.tp);
  PipelineTransfers out;
  out.act.assign(works.size(),
                 std::vector<std::vector<int>>(static_cast<std::size_t>(s.pp - 1), std::vector<int>(ranks, -1)));
  out.grad = out.act;
  for (std::size_t m = 0; m < works.size(); ++m)
    for (int b = 0; b + 1 < s.pp; ++b)
      for (int j = 0; j < s.cp; ++j) {
        const Tokens tokens = works[m].gpu_tokens(j);
        if (tokens == 0) continue;
        const std::vector<CollectiveCall> calls = cost_.pp_transfer_calls(tokens, s.tp);
        double bytes = 0;
        for (const CollectiveCall& call : calls) bytes += call.bytes * call.count;
        for (int t = 0; t < s.tp; ++t) {
          const int lower = rep.gpu(b, j, t);
          const int upper = rep.gpu(b + 1, j, t);
          const int pair[] = {lower, upper};
          const LinkClass link = cost_.cluster().topology().link_class(pair);
          const CollectiveTime time = cost_.collective_time(calls, link);
          const auto k = static_cast<std::size_t>(j * s.tp + t);
          program_.transfers.push_back({lower, upper, link, time, WorkKind::PpActivation, bytes});
          out.act[m][static_cast<std::size_t>(b)][k] = static_cast<int>(program_.transfers.size()) - 1;
          if (!gradient_crosses(s, b)) continue;
          program_.transfers.push_back({upper, lower, link, time, WorkKind::PpGradient, bytes});
          out.grad[m][static_cast<std::size_t>(b)][k] = static_cast<int>(program_.transfers.size()) - 1;
        }
      }
  return out;
}

Builder::PassCollectives Builder::add_pass_collectives(const Replica& rep, int stage, const MicroBatchWork& work,
                                                       const std::vector<Block>& blocks) {
  const ParallelScheme& s = rep.scheme;
  const auto tp = static_cast<std::size_t>(s.tp);
  PassCollectives pc;
  pc.cp_fwd.assign(blocks.size(), std::vector<int>(tp, -1));
  pc.cp_bwd = pc.cp_fwd;
  pc.ring_fwd.assign(blocks.size(), std::vector<std::vector<RingStep>>(tp));
  pc.ring_bwd = pc.ring_fwd;
  if (s.cp > 1 && work.sharded_tokens > 0)
    for (std::size_t b = 0; b < blocks.size(); ++b)
      for (int t = 0; t < s.tp; ++t) {
        const auto tt = static_cast<std::size_t>(t);
        if (ring_attention_) {
          for (const RingStep& step : add_ring(rep, stage, t, work, blocks[b]))
            (step.pass == CpExchange::Pass::Forward ? pc.ring_fwd : pc.ring_bwd)[b][tt].push_back(step);
          continue;
        }
        // Half the calls run in each pass; a block without backward runs them all in its forward.
        const auto calls = cost_.ulysses_calls(work.sharded_per_gpu, s.cp, blocks[b].span);
        const bool backward = blocks[b].backward();
        pc.cp_fwd[b][tt] = add_calls(group_over_cp(rep, stage, t), calls, WorkKind::CpAllToAll, backward);
        if (backward) pc.cp_bwd[b][tt] = add_calls(group_over_cp(rep, stage, t), calls, WorkKind::CpAllToAll, true);
      }
  pc.tp_fwd.assign(static_cast<std::size_t>(s.cp), std::vector<TpCollectives>(blocks.size()));
  pc.tp_bwd = pc.tp_fwd;
  for (int j = 0; j < s.cp; ++j) {
    const Tokens tokens = work.gpu_tokens(j);
    if (s.tp == 1 || tokens == 0) continue;
    const auto jj = static_cast<std::size_t>(j);
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      const bool backward = blocks[b].backward();
      pc.tp_fwd[jj][b] = add_tp_collectives(group_over_tp(rep, stage, j), tokens, s.tp, blocks[b].span, backward);
      if (backward)
        pc.tp_bwd[jj][b] = add_tp_collectives(group_over_tp(rep, stage, j), tokens, s.tp, blocks[b].span, true);
    }
  }
  return pc;
}

void Builder::add_pipeline_pass(const StageContext& c, int j, int t, std::size_t m, bool forward,
                                std::size_t& first_step) {
  const Replica& rep = replica(c.r);
  const ParallelScheme& s = rep.scheme;
  const auto jj = static_cast<std::size_t>(j);
  const auto tt = static_cast<std::size_t>(t);
  const MicroBatchWork& work = c.works[m];
  const Shares& local_shares = work.local[jj];
  if (local_shares.empty() && work.dist.empty()) return;
  const int g = rep.gpu(c.stage, j, t);
  const int mi = static_cast<int>(m);
  const auto k = static_cast<std::size_t>(j * s.tp + t);
  const auto transfer = [&](Step::Type type, bool activations, int boundary) {
    const auto& table = activations ? c.transfers.act : c.transfers.grad;
    push(g, Step{.type = type,
                 .kind = activations ? WorkKind::PpActivation : WorkKind::PpGradient,
                 .index = table[m][static_cast<std::size_t>(boundary)][k],
                 .replica = c.r,
                 .micro_batch = mi});
  };
  // The works of one block and pass: local, distributed, or (without overlap) both together.
  const ShareCost& local = c.costs[m].local[jj];
  const ShareCost& dist = c.costs[m].rank_dist(jj);
  const ShareCost& all = c.costs[m].all[jj];
  const Ids& local_ids = c.ids[m].local[jj];
  const Shares& dist_shares = work.rank_dist(j);
  const Ids& dist_ids = c.ids[m].rank_dist(j);
  const bool overlap = rep.overlap_cp_comm;
  const auto pass = forward ? ComputeWork::Pass::Forward : ComputeWork::Pass::Backward;
  const auto add_block = [&](std::size_t b) {
    const Block& block = c.blocks[b];
    const PassCollectives& pc = c.passes[m];
    const TpCollectives& tp = (forward ? pc.tp_fwd : pc.tp_bwd)[jj][b];
    if (tp.exposed >= 0) push(g, join(tp.exposed, WorkKind::TpCollective, c.r, mi));
    const BlockWork local_work{forward ? local.block_forward(block) : local.block_backward(block),
                               overlap ? add_work(pass, local_shares, local_ids, s, block, c.head) : -1};
    const BlockWork dist_work{forward ? dist.block_forward(block) : dist.block_backward(block),
                              overlap ? add_work(pass, dist_shares, dist_ids, s, block, c.head) : -1};
    const BlockWork all_work{
        forward ? all.block_forward(block) : all.block_backward(block),
        overlap ? -1 : add_work(pass, local_shares, local_ids, dist_shares, dist_ids, s, block, c.head)};
    const WorkKind kind = forward ? WorkKind::Forward : WorkKind::Backward;
    const auto& ring = rank_ring((forward ? pc.ring_fwd : pc.ring_bwd)[b][tt], rep, work, j, block, forward ? 1 : 2);
    if (!ring.empty())
      add_block_ring(g, overlap, local_work, dist_work, all_work, ring, kind, c.r, mi, tp.hidden);
    else
      add_block_compute(g, overlap, local_work, dist_work, all_work, (forward ? pc.cp_fwd : pc.cp_bwd)[b][tt],
                        block.layers(), kind, c.r, mi, tp.hidden);
  };
  const int pp = s.pp;
  if (forward) {
    if (c.stage > 0) transfer(Step::Type::Recv, true, c.stage - 1);
    first_step = step_count(g);
    for (std::size_t b = 0; b < c.blocks.size(); ++b) add_block(b);
    if (c.stage + 1 < pp) transfer(Step::Type::Send, true, c.stage);
    return;
  }
  if (c.stage + 1 < pp && gradient_crosses(s, c.stage)) transfer(Step::Type::Recv, false, c.stage);
  for (std::size_t b = c.blocks.size(); b-- > 0;) add_block(b);
  // The micro-batch's activations live from its forward's first step to its backward's last.
  const double bytes = c.bytes_per_token * static_cast<double>(work.gpu_tokens(j)) + c.sharded_bytes[m];
  step_at(g, first_step).alloc_bytes += bytes;
  step_at(g, step_count(g) - 1).free_bytes += bytes;
  if (c.stage > 0 && gradient_crosses(s, c.stage - 1)) transfer(Step::Type::Send, false, c.stage - 1);
}

}  // namespace lcsim::program::detail
