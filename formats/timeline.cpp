#include "formats/timeline.hpp"

#include <algorithm>

namespace lcsim {
namespace {

constexpr int kComputeTrack = 0;
constexpr int kCommunicationTrack = 1;
constexpr std::size_t kIdsInName = 3;
constexpr std::size_t kIdsInArgs = 64;

int gpu_pid(int gpu) {
  return gpu + 1;  // pid 0 is the iterations group
}

/// The CP rank `gpu` has in `replica`, or -1 when it is not one of its GPUs.
int cp_rank_of(const Replica& replica, int gpu) {
  const auto it = std::find(replica.gpus.begin(), replica.gpus.end(), gpu);
  if (it == replica.gpus.end()) return -1;
  const int position = static_cast<int>(it - replica.gpus.begin());
  return (position / replica.scheme.tp) % replica.scheme.cp;
}

TraceSpan describe(const program::GpuSpan& span, const IterationPlan& plan, std::size_t iteration) {
  TraceSpan out;
  out.pid = gpu_pid(span.gpu);
  out.tid = is_communication(span.kind) ? kCommunicationTrack : kComputeTrack;
  out.start_s = span.start_s;
  out.end_s = span.end_s;
  out.category = is_communication(span.kind) ? "communication" : "compute";
  out.name = to_string(span.kind);
  out.args.emplace_back("iteration", iteration);
  const bool in_micro_batch =
      span.replica >= 0 && span.micro_batch >= 0 && static_cast<std::size_t>(span.replica) < plan.replicas.size();
  if (!in_micro_batch) return out;
  const Replica& replica = plan.replicas[static_cast<std::size_t>(span.replica)];
  if (static_cast<std::size_t>(span.micro_batch) >= replica.micro_batches.size()) return out;
  const MicroBatch& mb = replica.micro_batches[static_cast<std::size_t>(span.micro_batch)];
  const int rank = cp_rank_of(replica, span.gpu);
  // The sequences this GPU works on: its CP rank's own and every sharded one.
  nlohmann::json ids = nlohmann::json::array();
  std::string shown;
  std::size_t count = 0;
  Tokens tokens = 0;
  for (const auto& p : mb.placements) {
    if (!p.sharded() && p.cp_rank != rank) continue;
    if (count < kIdsInName) shown += (count ? ", " : "") + std::to_string(p.sequence_id);
    if (count < kIdsInArgs) ids.push_back(p.sequence_id);
    ++count;
    tokens += p.tokens;
  }
  out.name += " mb " + std::to_string(span.micro_batch);
  if (count > 0)
    out.name += " [seq " + shown + (count > kIdsInName ? " +" + std::to_string(count - kIdsInName) : "") + "]";
  out.args.emplace_back("replica", span.replica);
  out.args.emplace_back("micro_batch", span.micro_batch);
  out.args.emplace_back("sequence_count", count);
  out.args.emplace_back("sequence_tokens", tokens);
  out.args.emplace_back("sequences", std::move(ids));
  return out;
}

}  // namespace

TimelineWriter::TimelineWriter(const std::string& file, const ClusterSpec& cluster,
                               const nlohmann::ordered_json& metadata)
    : writer_(file, metadata) {
  writer_.name_process(0, "iterations", 0);
  writer_.name_thread(0, 0, "iterations", 0);
  for (int g = 0; g < cluster.world_size(); ++g) {
    writer_.name_process(gpu_pid(g),
                         "GPU " + std::to_string(g) + " (node " + std::to_string(cluster.topology().node_of(g)) + ")",
                         gpu_pid(g));
    writer_.name_thread(gpu_pid(g), kComputeTrack, "compute", 0);
    writer_.name_thread(gpu_pid(g), kCommunicationTrack, "communication", 1);
  }
}

void TimelineWriter::add_iteration(const std::string& policy, std::size_t iteration, const IterationPlan& plan,
                                   const program::IterationOutcome& outcome) {
  const double begin = outcome.start_s;
  const double end = outcome.start_s + outcome.seconds;
  TraceSpan marker{0, 0, begin, end, policy + " iteration " + std::to_string(iteration), "iteration", {}};
  marker.args.emplace_back("policy", policy);
  marker.args.emplace_back("label", plan.label);
  marker.args.emplace_back("seconds", outcome.seconds);
  writer_.add(marker);

  // Spans arrive grouped by GPU; intervals[g] collects them to find the idle gaps.
  std::vector<std::vector<std::pair<double, double>>> intervals(outcome.busy_seconds.size());
  for (const program::GpuSpan& span : outcome.spans) {
    writer_.add(describe(span, plan, iteration));
    intervals[static_cast<std::size_t>(span.gpu)].emplace_back(span.start_s, span.end_s);
  }
  for (std::size_t g = 0; g < intervals.size(); ++g) {
    auto& list = intervals[g];
    std::sort(list.begin(), list.end());
    double cursor = begin;
    const auto idle = [&](double from, double to) {
      if (to - from <= 0) return;
      TraceSpan gap{gpu_pid(static_cast<int>(g)), kComputeTrack, from, to, "idle", "idle", {}};
      gap.args.emplace_back("iteration", iteration);
      writer_.add(gap);
    };
    for (const auto& [from, to] : list) {
      idle(cursor, from);
      cursor = std::max(cursor, to);
    }
    idle(cursor, end);
  }
}

}  // namespace lcsim
