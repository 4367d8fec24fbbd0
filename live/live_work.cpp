#include "live/live_work.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "base/errors.hpp"

namespace lcsim {
namespace {

using program::ComputeWork;
using program::Step;

int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}

/// A key equal exactly when two jobs run the same thing (whether they are timed aside), for the table's index.
std::string job_key(const DeviceJob& job) {
  char numbers[64];
  std::snprintf(numbers, sizeof numbers, "%a|%a", job.parameters, job.static_bytes);  // exact
  std::string key = std::to_string(static_cast<int>(job.kind)) + "|" + numbers;
  const ProxyShape& s = job.shape;
  for (int v : {s.shard.hidden, s.shard.heads, s.shard.kv_heads, s.shard.head_dim, s.shard.ffn, s.cp, s.sharded_heads,
                s.sharded_kv_heads, s.layers, s.checkpointed_layers, static_cast<int>(s.recompute),
                static_cast<int>(s.lm_head)})
    key += "|" + std::to_string(v);
  key += "|" + std::to_string(s.shard.vocab) + "|" + s.shard.name + "|L";
  for (int t : s.local) key += "," + std::to_string(t);
  key += "|S";
  for (int t : s.sharded) key += "," + std::to_string(t);
  return key;
}

/// The shares of several works on one GPU held at once (a micro-batch's local and distributed compute), each
/// sequence once; layers and recomputation as the widest of them.
ComputeWork held_together(const std::vector<const ComputeWork*>& works) {
  ComputeWork all = *works.front();
  all.pass = ComputeWork::Pass::ForwardBackward;
  all.shares.clear();
  all.sequence_ids.clear();
  std::set<std::int64_t> seen;
  for (const ComputeWork* w : works) {
    for (std::size_t i = 0; i < w->shares.size(); ++i)
      if (seen.insert(w->sequence_ids.at(i)).second) {
        all.shares.push_back(w->shares[i]);
        all.sequence_ids.push_back(w->sequence_ids[i]);
      }
    all.layers = std::max(all.layers, w->layers);
    all.checkpointed_layers = std::max(all.checkpointed_layers, w->checkpointed_layers);
    all.lm_head = all.lm_head || w->lm_head;
  }
  return all;
}

}  // namespace

std::int64_t ProxyShape::rows() const {
  std::int64_t rows = 0;
  for (int t : local) rows += t;
  for (int t : sharded) rows += ceil_div(t, cp);
  return rows;
}

ProxyShape proxy_shape(const ComputeWork& work, const ModelConfig& model) {
  const int tp = work.tp;
  if (tp < 1 || model.heads % tp != 0 || model.ffn % tp != 0)
    throw PlanningError("live: TP degree " + std::to_string(tp) + " does not divide " + model.name + "'s " +
                        std::to_string(model.heads) + " heads and " + std::to_string(model.ffn) + " ffn");
  ProxyShape s;
  s.shard = model;
  s.shard.heads = model.heads / tp;
  s.shard.kv_heads = ceil_div(model.kv_heads, tp);  // fewer KV heads than TP ranks: each rank keeps one (Megatron)
  s.shard.ffn = model.ffn / tp;
  s.shard.vocab = (model.vocab + tp - 1) / tp;
  s.layers = work.layers;
  s.checkpointed_layers = work.checkpointed_layers;
  s.recompute = work.recompute;
  s.lm_head = work.lm_head;
  for (const SequenceShare& share : work.shares) {
    if (share.sequence_tokens < 1 || share.sequence_tokens > INT_MAX || share.cp < 1)
      throw PlanningError("live: a share of " + std::to_string(share.sequence_tokens) + " tokens over cp " +
                          std::to_string(share.cp) + " cannot run on the layer proxy");
    const int tokens = static_cast<int>(share.sequence_tokens);
    if (share.cp == 1) {
      s.local.push_back(tokens);
      continue;
    }
    if (!s.sharded.empty() && share.cp != s.cp)
      throw PlanningError("live: one compute step holds shards of CP degrees " + std::to_string(s.cp) + " and " +
                          std::to_string(share.cp));
    s.cp = share.cp;
    s.sharded.push_back(tokens);
  }
  if (!s.sharded.empty()) {
    const UlyssesHeads rank = ulysses_rank_heads(s.shard.heads, s.shard.kv_heads, s.cp);
    s.sharded_kv_heads = rank.kv_heads;
    s.sharded_heads = rank.heads;
  }
  return s;
}

int JobTable::intern(DeviceJob job) {
  const auto [it, added] = index_.emplace(job_key(job), static_cast<int>(jobs_.size()));
  if (!added) {
    DeviceJob& known = jobs_[static_cast<std::size_t>(it->second)];
    known.timed = known.timed || job.timed;
    return it->second;
  }
  jobs_.push_back(std::move(job));
  uses_.emplace_back();
  return it->second;
}

void JobTable::note_use(const StepJob& mapped, double seconds, int tag) {
  if (mapped.job < 0) return;
  JobUse& use = uses_[static_cast<std::size_t>(mapped.job)];
  double* part = mapped.part == StepJob::Part::Forward    ? &use.predicted_forward_s
                 : mapped.part == StepJob::Part::Backward ? &use.predicted_backward_s
                                                          : &use.predicted_whole_s;
  if (std::isnan(*part)) {
    *part = seconds;
  } else if (*part != seconds) {
    const double scale = std::max(std::abs(*part), std::abs(seconds));
    use.predicted_spread = std::max(use.predicted_spread, std::abs(*part - seconds) / scale);
  }
  ++use.steps;
  if (!std::binary_search(use.tags.begin(), use.tags.end(), tag))
    use.tags.insert(std::upper_bound(use.tags.begin(), use.tags.end(), tag), tag);
}

ProgramJobs JobTable::add(const program::IterationProgram& program, const ModelConfig& model, int tag) {
  ProgramJobs out;
  const std::size_t world = program.gpus.size();
  out.steps.resize(world);
  out.memory.resize(world);
  out.static_bytes.assign(world, 0.0);
  for (std::size_t g = 0; g < world; ++g) {
    double static_now = 0;
    // (replica, micro-batch) -> the works the GPU holds at once, and the static bytes then.
    std::map<std::pair<int, int>, std::pair<std::vector<const ComputeWork*>, double>> held;
    for (const Step& step : program.gpus[g]) {
      StepJob mapped;
      if (step.type == Step::Type::SetStatic) {
        static_now = step.bytes;
        out.static_bytes[g] = std::max(out.static_bytes[g], step.bytes);
      } else if (step.type == Step::Type::Compute || step.type == Step::Type::ComputeWithCollective) {
        if (step.work < 0 || static_cast<std::size_t>(step.work) >= program.works.size())
          throw std::logic_error("live: compute step without its work on GPU " + std::to_string(g));
        const ComputeWork& work = program.works[static_cast<std::size_t>(step.work)];
        DeviceJob job;
        job.static_bytes = static_now;
        job.timed = true;
        switch (work.pass) {
          case ComputeWork::Pass::Optimizer:
            job.kind = DeviceJob::Kind::Optimizer;
            job.parameters = work.parameters;
            mapped = {intern(std::move(job)), StepJob::Part::Whole};
            break;
          case ComputeWork::Pass::Switch:
            mapped = {-1, StepJob::Part::Model};
            break;
          case ComputeWork::Pass::ForwardBackward:
          case ComputeWork::Pass::Forward:
          case ComputeWork::Pass::Backward: {
            job.shape = proxy_shape(work, model);
            const auto part = work.pass == ComputeWork::Pass::ForwardBackward ? StepJob::Part::Whole
                              : work.pass == ComputeWork::Pass::Forward       ? StepJob::Part::Forward
                                                                              : StepJob::Part::Backward;
            mapped = {intern(std::move(job)), part};
            if (work.pass != ComputeWork::Pass::Backward) {
              auto& entry = held[{step.replica, step.micro_batch}];
              entry.first.push_back(&work);
              entry.second = static_now;
            }
            break;
          }
        }
      }
      if (mapped.part != StepJob::Part::Model) note_use(mapped, step.seconds, tag);
      out.steps[g].push_back(mapped);
    }
    for (const auto& [key, entry] : held) {
      DeviceJob job;
      job.shape = proxy_shape(entry.first.size() == 1 ? *entry.first.front() : held_together(entry.first), model);
      job.static_bytes = entry.second;
      job.timed = false;
      out.memory[g].push_back(intern(std::move(job)));
    }
  }
  return out;
}

NcclArgs nccl_args(CollectiveOp op, double bytes, int ranks) {
  if (ranks < 1) throw std::invalid_argument("nccl_args: ranks must be >= 1");
  constexpr std::size_t kElement = 2;  // BF16
  const auto elements = static_cast<std::size_t>(std::max(0.0, bytes) / kElement);
  const auto n = static_cast<std::size_t>(ranks);
  switch (op) {
    case CollectiveOp::AllReduce:
    case CollectiveOp::SendRecv:
      return {elements, elements * kElement, elements * kElement};
    case CollectiveOp::AllGather:  // count: per-rank input; size: the gathered output
      return {elements / n, elements / n * kElement, elements / n * n * kElement};
    case CollectiveOp::ReduceScatter:  // count: per-rank output; size: the input
      return {elements / n, elements / n * n * kElement, elements / n * kElement};
    case CollectiveOp::AllToAll:  // count: per peer; size: one rank's buffer
      return {elements / n, elements / n * n * kElement, elements / n * n * kElement};
  }
  throw std::invalid_argument("nccl_args: unknown collective");
}

}  // namespace lcsim
