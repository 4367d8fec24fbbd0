// Closed-form estimate of an IterationPlan. The model, in full (the simulator's no-contention case must agree):
//
// Work of a micro-batch on CP rank j (every GPU of the rank's TP group does the same): the local shares are the
// placements with cp_rank == j, each SequenceShare{tokens, 1}; the distributed shares are the sharded
// placements, each SequenceShare{tokens, cp}; the GPU holds local tokens + ceil(sharded tokens / cp) tokens.
// A padded micro-batch costs (and holds) every sequence at the micro-batch's longest length.
//
// Time of CP rank j on pipeline stage s (layers / pp layers, the LM head on the last stage):
//   comm = cp_comm_seconds(dist, ceil(sharded tokens / cp), scheme, layers, link of the CP group)  (0 without
//          sharding): Ulysses, the all-to-alls; ring attention, what the ring transfers do not hide behind the
//          attention blocks (cost_model.hpp)
//   tp   = tp_comm_seconds(tokens on the GPU, tp, layers, link of the TP group)           (0 when tp == 1)
//   overlap (Skrull Eq. 2): Time_j = max(comm, compute(local_j)) + compute(dist) + tp
//   otherwise:              Time_j = compute(local_j ++ dist) + comm + tp
// compute() of no shares is 0 (a rank with nothing to do pays no per-layer overhead).
//
// Non-pipelined replica: micro-batch time = max_j Time_j (the ranks meet in every all-to-all); replica time =
// sum over its micro-batches.
// Pipelined replica (1F1B): with S_m = the slowest stage (and rank) of micro-batch m and X_m = the slowest
// stage-boundary transfer of its activations (pp_transfer_seconds of a rank's tokens), each micro-batch
// occupies the bottleneck stage for slot_m = S_m + 2 X_m (activations forward, gradients backward), and filling
// plus draining the pipeline adds pp - 1 slots of the largest size:
//   replica time = sum_m slot_m + (pp - 1) max_m slot_m.
// Every replica of the last phase then adds gradient_sync_seconds(scheme, shard_degree, link) +
// optimizer_seconds(scheme, shard_degree), shard_degree = world / (tp pp) (ZeRO shards across every GPU holding
// the same model slice); the link is that of the GPUs at (stage 0, tp rank 0) of the phase's replicas. Earlier
// phases (HotSPa's strategies within one iteration) accumulate gradients, which the strategy switch re-shards
// with the parameters: one gradient sync and one optimizer step per iteration, as in HotSPa.
// Phase time = slowest replica of the phase; iteration = sum of phase times (in increasing phase order) plus,
// before every phase after the first, a strategy switch (HotSPa) of hot_switch_us_per_mparam times the largest
// parameters_per_gpu of the new phase's schemes.
//
// Busy time of a GPU = its own Time_j contributions over the micro-batches (pipeline transfers and waits are
// idle) + gradient sync + optimizer step (last phase) + any strategy switch into its phase.
//
// Peak bytes of a GPU = static_bytes(scheme, shard_degree) + activation_bytes_per_token(scheme, layers / pp,
// head on the last stage) x its tokens in flight: on a non-pipelined replica the largest micro-batch share; on
// stage s of a pipeline the min(pp - s, V) largest micro-batch shares of its V micro-batches (1F1B keeps pp - s
// forward passes alive on stage s). Over phases, the largest peak. GPUs no plan replica uses: 0.
#include "policies/core/estimate.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <string>

#include "policies/core/errors.hpp"

namespace lcsim {
namespace {

Tokens ceil_div(Tokens a, int b) {
  return (a + b - 1) / b;
}

}  // namespace

MicroBatchWork split_work(const Replica& replica, const MicroBatch& micro_batch) {
  const int cp = replica.scheme.cp;
  MicroBatchWork work;
  work.local.resize(static_cast<std::size_t>(cp));
  work.local_tokens.assign(static_cast<std::size_t>(cp), 0);
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
  return work;
}

namespace {

bool replica_shape_ok(const Replica& replica, const CostModel& cost) {
  const auto& s = replica.scheme;
  return s.tp >= 1 && s.pp >= 1 && s.cp >= 1 && s.checkpointed_layers >= 0 && cost.model().layers % s.pp == 0 &&
         replica.gpus.size() == static_cast<std::size_t>(s.gpus());
}

/// Link classes of a replica's groups, computed once per replica.
struct ReplicaLinks {
  std::vector<LinkClass> cp;                  ///< per stage
  std::vector<std::vector<LinkClass>> tp;     ///< per stage, per CP rank
  std::vector<std::vector<LinkClass>> stage;  ///< per boundary s -> s+1, per CP rank
};

ReplicaLinks replica_links(const CostModel& cost, const Replica& replica) {
  const auto& s = replica.scheme;
  const auto& cluster = cost.cluster();
  ReplicaLinks links;
  for (int stage = 0; stage < s.pp; ++stage) {
    std::vector<int> group;
    for (int j = 0; j < s.cp; ++j) group.push_back(replica.gpu(stage, j, 0));
    links.cp.push_back(cluster.link_class(group));
    links.tp.emplace_back();
    for (int j = 0; j < s.cp; ++j) {
      group.clear();
      for (int t = 0; t < s.tp; ++t) group.push_back(replica.gpu(stage, j, t));
      links.tp.back().push_back(cluster.link_class(group));
    }
    if (stage + 1 < s.pp) {
      links.stage.emplace_back();
      for (int j = 0; j < s.cp; ++j) {
        const int pair[] = {replica.gpu(stage, j, 0), replica.gpu(stage + 1, j, 0)};
        links.stage.back().push_back(cluster.link_class(pair));
      }
    }
  }
  return links;
}

double compute_or_zero(const CostModel& cost, std::span<const SequenceShare> work, const ParallelScheme& scheme,
                       int layers, bool with_head) {
  return work.empty() ? 0.0 : cost.compute_seconds(work, scheme, layers, with_head);
}

/// The time of each CP rank of one micro-batch on one stage. What the ranks share -- the CP all-to-all and the
/// sharded sequences' compute -- is asked of the cost model once, not once per rank; a rank holding no sequence of
/// its own computes exactly the sharded ones (with Ulysses, every rank of a baseline).
class StageCosts {
 public:
  StageCosts(const CostModel& cost, const Replica& replica, const ReplicaLinks& links, const MicroBatchWork& work,
             int stage)
      : cost_(cost),
        replica_(replica),
        links_(links),
        work_(work),
        stage_(stage),
        layers_(cost.model().layers / replica.scheme.pp),
        head_(stage == replica.scheme.pp - 1) {
    const auto& s = replica.scheme;
    if (s.cp > 1 && work.sharded_tokens > 0)
      comm_ =
          cost.cp_comm_seconds(work.dist, work.sharded_per_gpu, s, layers_, links.cp[static_cast<std::size_t>(stage)]);
    dist_ = compute_or_zero(cost, work.dist, s, layers_, head_);
  }

  double rank_seconds(int cp_rank) const {
    const auto& s = replica_.scheme;
    const auto& local = work_.local[static_cast<std::size_t>(cp_rank)];
    if (local.empty() && work_.dist.empty()) return 0.0;
    double tp_comm = 0;
    const Tokens gpu_tokens = work_.gpu_tokens(cp_rank);
    if (s.tp > 1 && gpu_tokens > 0)
      tp_comm = cost_.tp_comm_seconds(gpu_tokens, s.tp, layers_,
                                      links_.tp[static_cast<std::size_t>(stage_)][static_cast<std::size_t>(cp_rank)]);
    if (replica_.overlap_cp_comm)
      return std::max(comm_, compute_or_zero(cost_, local, s, layers_, head_)) + dist_ + tp_comm;
    if (local.empty()) return dist_ + comm_ + tp_comm;
    std::vector<SequenceShare> all(local);
    all.insert(all.end(), work_.dist.begin(), work_.dist.end());
    return compute_or_zero(cost_, all, s, layers_, head_) + comm_ + tp_comm;
  }

 private:
  const CostModel& cost_;
  const Replica& replica_;
  const ReplicaLinks& links_;
  const MicroBatchWork& work_;
  int stage_;
  int layers_;
  bool head_;
  double comm_ = 0;
  double dist_ = 0;
};

/// Slowest activation transfer across the stage boundaries of one micro-batch.
double transfer_seconds(const CostModel& cost, const Replica& replica, const ReplicaLinks& links,
                        const MicroBatchWork& work) {
  double slowest = 0;
  for (std::size_t b = 0; b < links.stage.size(); ++b) {
    for (int j = 0; j < replica.scheme.cp; ++j) {
      const Tokens tokens = work.gpu_tokens(j);
      if (tokens == 0) continue;
      slowest = std::max(
          slowest, cost.pp_transfer_seconds(tokens, replica.scheme.tp, links.stage[b][static_cast<std::size_t>(j)]));
    }
  }
  return slowest;
}

double max_rank_stage_seconds(const CostModel& cost, const Replica& replica, const ReplicaLinks& links,
                              const MicroBatchWork& work) {
  double slowest = 0;
  for (int stage = 0; stage < replica.scheme.pp; ++stage) {
    const StageCosts costs(cost, replica, links, work, stage);
    for (int j = 0; j < replica.scheme.cp; ++j) slowest = std::max(slowest, costs.rank_seconds(j));
  }
  return slowest;
}

[[noreturn]] void malformed(const IterationPlan& plan, std::size_t replica, const std::string& what) {
  throw PlanningError("iteration plan " + std::to_string(plan.index) + ", replica " + std::to_string(replica) + ": " +
                      what + " (run validate_plan for the full report)");
}

void check_estimable(const IterationPlan& plan, const CostModel& cost) {
  const int world = cost.cluster().world_size();
  for (std::size_t r = 0; r < plan.replicas.size(); ++r) {
    const auto& replica = plan.replicas[r];
    if (!replica_shape_ok(replica, cost)) malformed(plan, r, "malformed parallel scheme or GPU list");
    for (int g : replica.gpus)
      if (g < 0 || g >= world) malformed(plan, r, "GPU index " + std::to_string(g) + " outside the cluster");
    for (const auto& mb : replica.micro_batches)
      for (const auto& p : mb.placements)
        if (p.cp_rank < Placement::kSharded || p.cp_rank >= replica.scheme.cp)
          malformed(plan, r, "cp_rank " + std::to_string(p.cp_rank) + " outside the CP group");
  }
}

}  // namespace

int shard_degree(const CostModel& cost, const ParallelScheme& scheme) {
  return std::max(1, cost.cluster().world_size() / std::max(1, scheme.tp * scheme.pp));
}

double micro_batch_rank_seconds(const CostModel& cost, const Replica& replica, const MicroBatch& micro_batch,
                                int cp_rank) {
  const ReplicaLinks links = replica_links(cost, replica);
  const MicroBatchWork work = split_work(replica, micro_batch);
  double slowest = 0;  // over stages: the rank's slowest stage when pipelined
  for (int stage = 0; stage < replica.scheme.pp; ++stage)
    slowest = std::max(slowest, StageCosts(cost, replica, links, work, stage).rank_seconds(cp_rank));
  return slowest;
}

double micro_batch_seconds(const CostModel& cost, const Replica& replica, const MicroBatch& micro_batch) {
  return max_rank_stage_seconds(cost, replica, replica_links(cost, replica), split_work(replica, micro_batch));
}

std::vector<double> estimate_peak_bytes(const IterationPlan& plan, const CostModel& cost) {
  const int world = cost.cluster().world_size();
  std::vector<double> peaks(static_cast<std::size_t>(std::max(world, 0)), 0.0);
  for (const auto& replica : plan.replicas) {
    if (!replica_shape_ok(replica, cost)) continue;  // the validator reports it
    const auto& s = replica.scheme;
    const double static_bytes = cost.static_bytes(s, shard_degree(cost, s));
    const int layers = cost.model().layers / s.pp;
    // tokens[j][m]: tokens CP rank j holds for micro-batch m.
    std::vector<std::vector<Tokens>> tokens(static_cast<std::size_t>(s.cp));
    for (const auto& mb : replica.micro_batches) {
      const MicroBatchWork work = split_work(replica, mb);
      for (int j = 0; j < s.cp; ++j) tokens[static_cast<std::size_t>(j)].push_back(work.gpu_tokens(j));
    }
    for (auto& per_rank : tokens) std::sort(per_rank.begin(), per_rank.end(), std::greater<>());
    for (int stage = 0; stage < s.pp; ++stage) {
      const double per_token = cost.activation_bytes_per_token(s, layers, stage == s.pp - 1);
      for (int j = 0; j < s.cp; ++j) {
        const auto& per_rank = tokens[static_cast<std::size_t>(j)];
        const std::size_t in_flight = std::min(static_cast<std::size_t>(s.pp - stage), per_rank.size());
        Tokens held = 0;
        for (std::size_t m = 0; m < in_flight; ++m) held += per_rank[m];
        const double bytes = static_bytes + per_token * static_cast<double>(held);
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

IterationEstimate estimate_iteration(const IterationPlan& plan, const CostModel& cost) {
  check_estimable(plan, cost);
  const int world = cost.cluster().world_size();
  IterationEstimate estimate;
  estimate.busy_seconds.assign(static_cast<std::size_t>(world), 0.0);

  std::map<int, std::vector<const Replica*>> phases;
  for (const auto& replica : plan.replicas) phases[replica.phase].push_back(&replica);

  bool first_phase = true;
  const int last_phase = phases.empty() ? 0 : phases.rbegin()->first;
  for (const auto& [phase, replicas] : phases) {
    double switch_seconds = 0;
    if (!first_phase)
      for (const Replica* r : replicas) switch_seconds = std::max(switch_seconds, cost.switch_seconds(r->scheme));
    first_phase = false;

    std::vector<int> slice_group;  // GPUs holding the first model slice: the ZeRO sharding group's link
    for (const Replica* r : replicas)
      for (int j = 0; j < r->scheme.cp; ++j) slice_group.push_back(r->gpu(0, j, 0));
    const LinkClass sync_link = cost.cluster().link_class(slice_group);

    double phase_seconds = 0;
    for (const Replica* r : replicas) {
      const auto& s = r->scheme;
      const ReplicaLinks links = replica_links(cost, *r);
      const int shards = shard_degree(cost, s);
      const double tail = phase == last_phase
                              ? cost.gradient_sync_seconds(s, shards, sync_link) + cost.optimizer_seconds(s, shards)
                              : 0.0;

      // busy[stage][rank]
      std::vector<std::vector<double>> busy(static_cast<std::size_t>(s.pp),
                                            std::vector<double>(static_cast<std::size_t>(s.cp), 0.0));
      double sum_slots = 0;
      double max_slot = 0;
      for (const auto& mb : r->micro_batches) {
        const MicroBatchWork work = split_work(*r, mb);
        double slowest = 0;
        for (int stage = 0; stage < s.pp; ++stage) {
          const StageCosts costs(cost, *r, links, work, stage);
          for (int j = 0; j < s.cp; ++j) {
            const double t = costs.rank_seconds(j);
            busy[static_cast<std::size_t>(stage)][static_cast<std::size_t>(j)] += t;
            slowest = std::max(slowest, t);
          }
        }
        const double slot = s.pp > 1 ? slowest + 2 * transfer_seconds(cost, *r, links, work) : slowest;
        sum_slots += slot;
        max_slot = std::max(max_slot, slot);
      }
      const double replica_seconds = sum_slots + (s.pp - 1) * max_slot + tail;
      phase_seconds = std::max(phase_seconds, replica_seconds);

      for (int stage = 0; stage < s.pp; ++stage)
        for (int j = 0; j < s.cp; ++j)
          for (int t = 0; t < s.tp; ++t)
            estimate.busy_seconds[static_cast<std::size_t>(r->gpu(stage, j, t))] +=
                busy[static_cast<std::size_t>(stage)][static_cast<std::size_t>(j)] + tail + switch_seconds;
    }
    estimate.seconds += switch_seconds + phase_seconds;
  }

  estimate.peak_bytes = estimate_peak_bytes(plan, cost);
  const double capacity = cost.capacity_bytes();
  estimate.oom_gpus = static_cast<int>(
      std::count_if(estimate.peak_bytes.begin(), estimate.peak_bytes.end(), [&](double b) { return b > capacity; }));
  return estimate;
}

}  // namespace lcsim
