// HBP Sec. 3.1 metrics. Conventions where the paper leaves room:
// - N is the set of GPUs the plan uses (every GPU of every replica, all phases together).
// - T_i sums real tokens (padding is PR's business); a sequence sharded over cp GPUs counts tokens/cp on each,
//   and a GPU of a tp x pp model-parallel group counts 1/(tp pp) of its CP rank's tokens (it does that share of
//   their work), so replicas with different schemes (Hydraulis, HotSPa) compare by work; in a homogeneous
//   layout this scales every T_i alike and no ratio changes. A_i likewise.
// - PR = padding tokens / (real + padding tokens) over all micro-batches of the plan, which is the paper's
//   sum_b (tmax - t_b) / (tmax B) for one padded batch and 0 when nothing is padded.
// - CR counts a sharded sequence as communicating only when its CP group has more than one GPU.
// - max_min_time_ratio = max / min estimated busy time over the plan's GPUs: 1 when all are zero, +infinity
//   when some GPU has none while another is busy.
// - pipeline_gap: a replica's propagation latency is when the last of its GPUs ends its last micro-batch step, so a
//   deep pipeline's bubbles count (busy time leaves them out, which makes its stages look unbalanced when its
//   pipeline is not). A replica without micro-batches has no latency and is left out, as idle GPUs are by DBR.
#include "model/metrics.hpp"

#include <algorithm>
#include <limits>
#include <set>

namespace lcsim {
namespace {

double balance_ratio(const std::vector<double>& values) {
  if (values.empty()) return 0;
  const double top = *std::max_element(values.begin(), values.end());
  if (top <= 0) return 0;
  double gap = 0;
  for (double v : values) gap += top - v;
  return gap / (top * static_cast<double>(values.size()));
}

double pipeline_gap(const IterationPlan& plan, const std::vector<double>& propagation_end) {
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (const auto& replica : plan.replicas) {
    if (replica.micro_batches.empty()) continue;
    double latency = 0;
    for (int g : replica.gpus)
      if (g >= 0 && static_cast<std::size_t>(g) < propagation_end.size())
        latency = std::max(latency, propagation_end[static_cast<std::size_t>(g)]);
    if (latency <= 0) continue;
    lo = std::min(lo, latency);
    hi = std::max(hi, latency);
  }
  return hi > 0 ? (hi - lo) / lo : 0;
}

}  // namespace

BalanceMetrics compute_metrics(const IterationPlan& plan, const IterationEstimate& estimate, int world_size) {
  const auto world = static_cast<std::size_t>(std::max(world_size, 0));
  std::vector<double> tokens(world, 0.0);
  std::vector<double> attention(world, 0.0);
  std::vector<double> comm_tokens(world, 0.0);
  std::set<int> used;
  double padding = 0;
  double padded_slots = 0;

  for (const auto& replica : plan.replicas) {
    const auto& s = replica.scheme;
    if (s.tp < 1 || s.pp < 1 || s.cp < 1 || replica.gpus.size() != static_cast<std::size_t>(s.gpus())) continue;
    for (int g : replica.gpus)
      if (g >= 0 && static_cast<std::size_t>(g) < world) used.insert(g);
    const double cp = s.cp;
    for (const auto& mb : replica.micro_batches) {
      const Tokens longest = mb.longest();
      for (const auto& p : mb.placements) {
        const auto t = static_cast<double>(p.tokens);
        const auto slot = static_cast<double>(mb.padded ? longest : p.tokens);
        padding += slot - t;
        padded_slots += slot;
        // Every GPU of every stage and TP rank that holds this placement.
        const int first_rank = p.sharded() ? 0 : p.cp_rank;
        const int last_rank = p.sharded() ? s.cp - 1 : p.cp_rank;
        if (first_rank < 0 || last_rank >= s.cp) continue;
        const double share = (p.sharded() ? 1.0 / cp : 1.0) / (s.tp * s.pp);
        for (int stage = 0; stage < s.pp; ++stage)
          for (int j = first_rank; j <= last_rank; ++j)
            for (int tp = 0; tp < s.tp; ++tp) {
              const int g = replica.gpu(stage, j, tp);
              if (g < 0 || static_cast<std::size_t>(g) >= world) continue;
              const auto gi = static_cast<std::size_t>(g);
              tokens[gi] += t * share;
              attention[gi] += t * t * share;
              if (p.sharded() && s.cp > 1) comm_tokens[gi] += t * share;
            }
      }
    }
  }

  std::vector<double> t_used, a_used, busy_used;
  double comm_sum = 0, token_sum = 0;
  for (int g : used) {
    const auto gi = static_cast<std::size_t>(g);
    t_used.push_back(tokens[gi]);
    a_used.push_back(attention[gi]);
    comm_sum += comm_tokens[gi];
    token_sum += tokens[gi];
    if (gi < estimate.busy_seconds.size()) busy_used.push_back(estimate.busy_seconds[gi]);
  }

  BalanceMetrics m;
  m.dbr = balance_ratio(t_used);
  m.abr = balance_ratio(a_used);
  if (!a_used.empty()) {
    const double top = *std::max_element(a_used.begin(), a_used.end());
    m.attention_capacity = top * static_cast<double>(a_used.size());
    for (double a : a_used) m.attention_idle += top - a;
  }
  m.abr_work = m.abr;
  m.pr = padded_slots > 0 ? padding / padded_slots : 0;
  m.cr = token_sum > 0 ? comm_sum / token_sum : 0;
  if (!busy_used.empty()) {
    const auto [lo, hi] = std::minmax_element(busy_used.begin(), busy_used.end());
    if (*hi <= 0)
      m.max_min_time_ratio = 1;
    else if (*lo <= 0)
      m.max_min_time_ratio = std::numeric_limits<double>::infinity();
    else
      m.max_min_time_ratio = *hi / *lo;
  }
  m.pipeline_gap = pipeline_gap(plan, estimate.propagation_end_s);
  return m;
}

BalanceMetrics mean_metrics(const std::vector<BalanceMetrics>& per_iteration) {
  BalanceMetrics mean;
  if (per_iteration.empty()) return mean;
  mean.max_min_time_ratio = 0;
  for (const auto& m : per_iteration) {
    mean.dbr += m.dbr;
    mean.pr += m.pr;
    mean.abr += m.abr;
    mean.cr += m.cr;
    mean.max_min_time_ratio += m.max_min_time_ratio;
    mean.pipeline_gap += m.pipeline_gap;
    mean.attention_idle += m.attention_idle;
    mean.attention_capacity += m.attention_capacity;
  }
  mean.abr_work = mean.attention_capacity > 0 ? mean.attention_idle / mean.attention_capacity : 0;
  const auto n = static_cast<double>(per_iteration.size());
  mean.dbr /= n;
  mean.pr /= n;
  mean.abr /= n;
  mean.cr /= n;
  mean.max_min_time_ratio /= n;
  mean.pipeline_gap /= n;
  return mean;
}

}  // namespace lcsim
