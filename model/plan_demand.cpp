#include "model/plan_demand.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>

#include "base/errors.hpp"

namespace lcsim {
namespace {

Tokens ceil_div(Tokens a, int b) {
  return (a + b - 1) / b;
}

}  // namespace

MicroBatchWork split_work(const Replica& replica, const MicroBatch& micro_batch) {
  MicroBatchWork work;
  split_work(replica, micro_batch, work);
  return work;
}

void split_work(const Replica& replica, const MicroBatch& micro_batch, MicroBatchWork& work) {
  const int cp = replica.scheme.cp;
  work.local.resize(static_cast<std::size_t>(cp));
  for (auto& shares : work.local) shares.clear();
  work.local_tokens.assign(static_cast<std::size_t>(cp), 0);
  work.dist.clear();
  work.sharded_tokens = 0;
  const Tokens longest = micro_batch.longest();
  for (const auto& p : micro_batch.placements) {
    const Tokens tokens = micro_batch.padded ? longest : p.tokens;
    if (p.sharded()) {
      work.dist.push_back(SequenceShare{tokens, cp});
      work.sharded_tokens += tokens;
    } else if (p.cp_rank >= 0 && p.cp_rank < cp) {
      const auto j = static_cast<std::size_t>(p.cp_rank);
      work.local[j].push_back(SequenceShare{tokens, 1});
      work.local_tokens[j] += tokens;
    }
  }
  work.sharded_per_gpu = ceil_div(work.sharded_tokens, cp);
  work.dist_ranks.clear();
  if (micro_batch.cp_split == CpSplit::PerSequence && cp > 1 && !work.dist.empty()) {
    std::vector<Tokens> lengths;
    for (const auto& share : work.dist) lengths.push_back(share.sequence_tokens);
    work.dist_ranks = head_tail_chunks(lengths, cp);
  }
}

std::vector<std::vector<SequenceShare>> head_tail_chunks(std::span<const Tokens> sequences, int cp,
                                                         std::vector<std::vector<std::size_t>>* owners) {
  if (cp < 1) throw std::invalid_argument("head_tail_chunks: cp must be >= 1");
  Tokens total = 0;
  for (Tokens s : sequences) total += s;
  const Tokens chunks = 2 * static_cast<Tokens>(cp);
  std::vector<std::vector<SequenceShare>> ranks(static_cast<std::size_t>(cp));
  if (owners) owners->assign(static_cast<std::size_t>(cp), {});
  // Chunk k covers [k T / 2cp, (k + 1) T / 2cp) of the pack; walk the sequences it overlaps.
  const auto add_chunk = [&](std::size_t r, Tokens k) {
    const Tokens begin = k * total / chunks, end = (k + 1) * total / chunks;
    Tokens start = 0;  // of the current sequence in the pack
    for (std::size_t i = 0; i < sequences.size() && start < end; ++i) {
      const Tokens s = sequences[i];
      const Tokens lo = std::max(begin, start), hi = std::min(end, start + s);
      if (lo < hi) {
        ranks[r].push_back(SequenceShare{s, cp, hi - lo, lo - start});
        if (owners) (*owners)[r].push_back(i);
      }
      start += s;
    }
  };
  for (int r = 0; r < cp; ++r) {
    add_chunk(static_cast<std::size_t>(r), r);
    add_chunk(static_cast<std::size_t>(r), chunks - 1 - r);
  }
  return ranks;
}

namespace {

bool replica_shape_ok(const Replica& replica, const CostModel& cost) {
  const auto& s = replica.scheme;
  return s.tp >= 1 && s.pp >= 1 && s.cp >= 1 && s.checkpointed_layers >= 0 && s.virtual_pp >= 1 &&
         cost.model().layers % s.virtual_stages() == 0 && replica.gpus.size() == static_cast<std::size_t>(s.gpus());
}

}  // namespace

int shard_degree(const CostModel& cost, const ParallelScheme& scheme) {
  return std::max(1, cost.cluster().world_size() / std::max(1, scheme.tp * scheme.pp));
}

std::size_t pipeline_warmup(const ParallelScheme& scheme, int stage, std::size_t micro_batches) {
  const auto later = static_cast<std::size_t>(scheme.pp - 1 - stage);
  if (scheme.virtual_pp <= 1) return std::min(later, micro_batches);
  // Megatron-LM's interleaved schedule (Narayanan et al. 2021): every stage first runs the other chunks of one
  // group of pp micro-batches, then twice its distance from the last stage, which the chunks' round trips need.
  // The count rounded up to a multiple of pp, as program/ orders the passes (program_builder_pipeline.cpp).
  const auto group = static_cast<std::size_t>(scheme.pp);
  const std::size_t total = (micro_batches + group - 1) / group * group * static_cast<std::size_t>(scheme.virtual_pp);
  const std::size_t warmup = 2 * later + static_cast<std::size_t>((scheme.virtual_pp - 1) * scheme.pp);
  return std::min(warmup, total);
}

std::vector<double> estimate_peak_bytes(const IterationPlan& plan, const CostModel& cost) {
  const int world = cost.cluster().world_size();
  std::vector<double> peaks(static_cast<std::size_t>(std::max(world, 0)), 0.0);
  for (const auto& replica : plan.replicas) {
    if (!replica_shape_ok(replica, cost)) continue;  // the validator reports it
    const auto& s = replica.scheme;
    std::vector<MicroBatchWork> works;
    for (const auto& mb : replica.micro_batches) works.push_back(split_work(replica, mb));
    for (int stage = 0; stage < s.pp; ++stage) {
      // Stages differ when part of the model is frozen.
      const double static_bytes = cost.static_bytes(s, shard_degree(cost, s), stage);
      // Per model chunk of the stage (one with plain 1F1B): what a token keeps, the shards' copies of each
      // micro-batch (the same on every CP rank).
      std::vector<double> per_token;
      std::vector<std::vector<double>> sharded;
      double buffers = 0;  // all-gather CP's gathered K,V: one layer of one micro-batch at a time
      for (int chunk = 0; chunk < s.virtual_pp; ++chunk) {
        const LayerSpan layers = chunk_span(cost.model(), s, stage, chunk);
        const bool head = stage == s.pp - 1 && chunk == s.virtual_pp - 1;
        per_token.push_back(cost.activation_bytes_per_token(s, layers, head));
        auto& copies = sharded.emplace_back();
        for (const MicroBatchWork& work : works) {
          copies.push_back(cost.sharded_attention_bytes(work.dist, s, layers));
          buffers = std::max(buffers, cost.cp_buffer_bytes(work.sharded_per_gpu, s, layers));
        }
      }
      for (int j = 0; j < s.cp; ++j) {
        // What CP rank j keeps for each micro-batch and chunk; at most pipeline_warmup + 1 are in flight at once.
        std::vector<double> per_rank;
        for (std::size_t c = 0; c < per_token.size(); ++c)
          for (std::size_t m = 0; m < works.size(); ++m)
            per_rank.push_back(per_token[c] * static_cast<double>(works[m].gpu_tokens(j)) + sharded[c][m]);
        std::sort(per_rank.begin(), per_rank.end(), std::greater<>());
        const std::size_t in_flight = std::min(pipeline_warmup(s, stage, works.size()) + 1, per_rank.size());
        double held = 0;
        for (std::size_t m = 0; m < in_flight; ++m) held += per_rank[m];
        const double bytes = static_bytes + held + buffers;
        for (int t = 0; t < s.tp; ++t) {
          const int g = replica.gpu(stage, j, t);
          if (g >= 0 && g < world)
            peaks[static_cast<std::size_t>(g)] = std::max(peaks[static_cast<std::size_t>(g)], bytes);
        }
      }
    }
  }
  return peaks;
}

double plan_static_bytes(const IterationPlan& plan, const CostModel& cost) {
  double most = 0;
  for (const auto& replica : plan.replicas) {
    if (!replica_shape_ok(replica, cost)) continue;
    for (int stage = 0; stage < replica.scheme.pp; ++stage)
      most = std::max(most, cost.static_bytes(replica.scheme, shard_degree(cost, replica.scheme), stage));
  }
  return most;
}

}  // namespace lcsim
