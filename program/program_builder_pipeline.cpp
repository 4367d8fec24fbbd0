// The builder's pipelined replicas: 1F1B order (plain or interleaved), stage-to-stage transfers and each pass's
// collectives.
#include "program/program_builder.hpp"

namespace lcsim::program::detail {
namespace {

/// One pass of a stage's order: which micro-batch, which of the stage's model chunks, forward or backward.
struct PassStep {
  std::size_t micro_batch = 0;
  int chunk = 0;
  bool forward = true;
};

/// The 1F1B order of a stage: pipeline_warmup forwards, then one forward and one backward alternately, then the
/// remaining backwards. Plain 1F1B runs micro-batches in order; the interleaved schedule (Megatron-LM,
/// Narayanan et al. 2021) runs groups of pp micro-batches through chunk 0, then chunk 1, ..., and the backwards
/// through the chunks in reverse. Megatron-LM refuses a micro-batch count that is not a multiple of pp; a policy
/// chooses its count plan by plan, so lcsim runs the count rounded up to one and skips the passes of the
/// micro-batches that do not exist (dropping a micro-batch's passes from a schedule that never waits forever
/// leaves one that never does; a smaller last group under the same warm-up can, e.g. pp 4, vpp 3, 5 micro-batches).
std::vector<PassStep> one_f_one_b(const ParallelScheme& s, int stage, std::size_t micro_batches) {
  const auto v = static_cast<std::size_t>(s.virtual_pp);
  const auto group = static_cast<std::size_t>(s.pp);
  const std::size_t rounded = v == 1 ? micro_batches : (micro_batches + group - 1) / group * group;
  std::vector<std::pair<std::size_t, int>> table;  // the k-th forward's (micro-batch, chunk)
  for (std::size_t first = 0; first < rounded; first += group)
    for (std::size_t c = 0; c < v; ++c)
      for (std::size_t m = first; m < std::min(first + group, rounded); ++m) table.emplace_back(m, static_cast<int>(c));
  const std::size_t total = table.size();
  const std::size_t warmup = pipeline_warmup(s, stage, micro_batches);
  std::vector<PassStep> order;
  // The k-th backward runs the k-th forward's micro-batch through the chunk mirrored.
  const auto add = [&](std::size_t k, bool forward) {
    const auto [m, c] = table[k];
    if (m < micro_batches) order.push_back({m, forward ? c : static_cast<int>(v) - 1 - c, forward});
  };
  for (std::size_t k = 0; k < warmup; ++k) add(k, true);
  for (std::size_t k = 0; k + warmup < total; ++k) {
    add(warmup + k, true);
    add(k, false);
  }
  for (std::size_t k = total - warmup; k < total; ++k) add(k, false);
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
    // Per model chunk of the stage (one with plain 1F1B): its blocks, collectives and costs.
    std::vector<std::vector<Block>> blocks(static_cast<std::size_t>(s.virtual_pp));
    std::vector<std::vector<PassCollectives>> passes(blocks.size());
    std::vector<std::vector<MicroBatchCosts>> costs(blocks.size());
    std::vector<std::vector<double>> sharded_bytes(blocks.size());
    std::vector<StageContext> contexts;
    for (int chunk = 0; chunk < s.virtual_pp; ++chunk) {
      const auto c = static_cast<std::size_t>(chunk);
      const int vstage = chunk * s.pp + stage;
      const bool head = vstage == s.virtual_stages() - 1;
      const LayerSpan layers = chunk_span(cost_.model(), s, stage, chunk);
      blocks[c] = make_blocks(cost_, s, layers, options_.layers_per_block);
      const LayerMix mix = cost_.layer_mix(s, layers);
      for (const MicroBatchWork& work : works) {
        sharded_bytes[c].push_back(cost_.sharded_attention_bytes(work.dist, s, layers));
        passes[c].push_back(add_pass_collectives(rep, stage, work, blocks[c]));
        costs[c].emplace_back(cost_, work, s, mix, rep.overlap_cp_comm, head);
      }
      contexts.push_back(StageContext{r, stage, vstage, head, cost_.activation_bytes_per_token(s, layers, head),
                                      sharded_bytes[c], blocks[c], works, ids, costs[c], passes[c], transfers});
    }
    const auto order = one_f_one_b(s, stage, works.size());
    for (int j = 0; j < s.cp; ++j)
      for (int t = 0; t < s.tp; ++t) {
        // Per micro-batch and chunk: where its forward began.
        std::vector<std::size_t> first_step(works.size() * contexts.size(), 0);
        for (const PassStep& p : order)
          add_pipeline_pass(contexts[static_cast<std::size_t>(p.chunk)], j, t, p.micro_batch, p.forward,
                            first_step[p.micro_batch * contexts.size() + static_cast<std::size_t>(p.chunk)]);
      }
  }
}

Builder::PipelineTransfers Builder::add_pipeline_transfers(const Replica& rep,
                                                           const std::vector<MicroBatchWork>& works) {
  const ParallelScheme& s = rep.scheme;
  const auto ranks = static_cast<std::size_t>(s.cp * s.tp);
  PipelineTransfers out;
  // One boundary between consecutive virtual stages: v times as many as a plain pipeline's, the last stage's
  // chunk sending to the first stage's next chunk.
  const int boundaries = s.virtual_stages() - 1;
  out.act.assign(works.size(),
                 std::vector<std::vector<int>>(static_cast<std::size_t>(boundaries), std::vector<int>(ranks, -1)));
  out.grad = out.act;
  for (std::size_t m = 0; m < works.size(); ++m)
    for (int b = 0; b < boundaries; ++b)
      for (int j = 0; j < s.cp; ++j) {
        const Tokens tokens = works[m].gpu_tokens(j);
        if (tokens == 0) continue;
        const std::vector<CollectiveCall> calls = cost_.pp_transfer_calls(tokens, s.tp);
        double bytes = 0;
        for (const CollectiveCall& call : calls) bytes += call.bytes * call.count;
        for (int t = 0; t < s.tp; ++t) {
          const int lower = rep.gpu(b % s.pp, j, t);
          const int upper = rep.gpu((b + 1) % s.pp, j, t);
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
  // Transfers cross the boundaries of the virtual stage (the stage itself without interleaving).
  const int last = s.virtual_stages() - 1;
  const int v = c.vstage;
  if (forward) {
    if (v > 0) transfer(Step::Type::Recv, true, v - 1);
    first_step = step_count(g);
    for (std::size_t b = 0; b < c.blocks.size(); ++b) add_block(b);
    note_sync_sites(g, first_step, 0);
    if (v < last) transfer(Step::Type::Send, true, v);
    return;
  }
  if (v < last && gradient_crosses(s, v)) transfer(Step::Type::Recv, false, v);
  const std::size_t backward_first = step_count(g);
  for (std::size_t b = c.blocks.size(); b-- > 0;) add_block(b);
  note_sync_sites(g, backward_first, 1);
  // The micro-batch's activations live from its forward's first step to its backward's last.
  const double bytes = c.bytes_per_token * static_cast<double>(work.gpu_tokens(j)) + c.sharded_bytes[m];
  step_at(g, first_step).alloc_bytes += bytes;
  step_at(g, step_count(g) - 1).free_bytes += bytes;
  if (v > 0 && gradient_crosses(s, v - 1)) transfer(Step::Type::Send, false, v - 1);
}

}  // namespace lcsim::program::detail
