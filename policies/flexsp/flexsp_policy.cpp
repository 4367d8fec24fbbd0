#include "policies/flexsp/flexsp_policy.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "base/errors.hpp"

namespace lcsim::flexsp {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

/// One micro-batch count's schedule and its total time by the view.
struct Candidate {
  std::vector<MicroBatchGroups> micro_batches;
  double seconds = kInfinity;
};

std::string describe(const GroupPlan& plan) {
  std::vector<int> degrees;
  for (const auto& g : plan.groups) degrees.push_back(g.degree);
  std::sort(degrees.rbegin(), degrees.rend());
  std::string out = "<";
  for (std::size_t i = 0; i < degrees.size();) {
    std::size_t j = i;
    while (j < degrees.size() && degrees[j] == degrees[i]) ++j;
    out += (i ? "," : "") + std::to_string(degrees[i]) + (j - i > 1 ? "x" + std::to_string(j - i) : "");
    i = j;
  }
  return out + ">";
}

/// The plan's replicas for one micro-batch: its groups and, on GPUs no group takes, empty replicas (they only
/// join the gradient sync), all laid out largest first.
void add_phase(IterationPlan& plan, const GlobalBatch& batch, const MicroBatchGroups& mb, int phase, int gpus,
               Recompute recompute) {
  std::vector<Group> groups = mb.groups.groups;
  const std::size_t used = groups.size();
  for (int spare = gpus - mb.groups.gpus_used(), block = 1 << 30; spare > 0; block /= 2)
    if (block <= spare) {
      groups.push_back(Group{block, {}, 0, 0});
      spare -= block;
    }
  const std::vector<int> offsets = group_offsets(groups);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    Replica r;
    r.scheme = group_scheme(groups[g].degree, recompute);
    r.phase = phase;
    for (int i = 0; i < groups[g].degree; ++i) r.gpus.push_back(offsets[g] + i);
    if (g < used) {
      MicroBatch micro_batch;
      for (std::size_t k : groups[g].members) {
        const Sequence& s = batch[mb.sequences[k]];
        micro_batch.placements.push_back(Placement{s.id, s.tokens, Placement::kSharded});
      }
      r.micro_batches.push_back(std::move(micro_batch));
    }
    plan.replicas.push_back(std::move(r));
  }
}

}  // namespace

std::vector<std::size_t> blast(std::span<const Tokens> sorted, int m) {
  const std::size_t n = sorted.size();
  if (m < 1 || static_cast<std::size_t>(m) > n) throw std::invalid_argument("flexsp::blast: m must be in [1, size]");
  const auto runs = static_cast<std::size_t>(m);
  // The least largest run is the least T for which runs of at most T tokens, each as long as it can be while
  // leaving one length for every run after it, cover the lengths: bisection on T over integers (the DP of App. A
  // in O(n log(sum)) rather than O(n^2 m): its optimum, with the earlier runs the longer ones on ties).
  auto cut = [&](Tokens limit, std::vector<std::size_t>* bounds) {
    std::size_t next = 0;
    for (std::size_t r = 0; r < runs; ++r) {
      if (bounds) (*bounds)[r] = next;
      Tokens run = 0;
      const std::size_t last = n - (runs - 1 - r);  // leave a length for each later run
      while (next < last && (run == 0 || run + sorted[next] <= limit)) run += sorted[next++];
      if (run > limit) return false;
    }
    if (bounds) (*bounds)[runs] = n;
    return next == n;
  };
  Tokens lo = 0, hi = 0;
  for (Tokens s : sorted) lo = std::max(lo, s), hi += s;
  while (lo < hi) {
    const Tokens mid = lo + (hi - lo) / 2;
    if (cut(mid, nullptr)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  std::vector<std::size_t> bounds(runs + 1, n);
  cut(hi, &bounds);
  return bounds;
}

std::vector<MicroBatchGroups> FlexSpPolicy::schedule(std::span<const Tokens> lengths, const FlexSpView& view) const {
  std::vector<std::size_t> order(lengths.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return lengths[x] > lengths[y]; });
  std::vector<Tokens> sorted;
  double total = 0;
  for (std::size_t i : order) {
    sorted.push_back(lengths[i]);
    total += static_cast<double>(lengths[i]);
  }
  if (sorted.empty()) return {};
  const auto cluster = static_cast<double>(view.cluster_capacity());
  const auto n = static_cast<int>(sorted.size());
  // The fewest micro-batches whose token runs all stay below what the cluster holds at once.
  int fewest = std::max(1, static_cast<int>(std::ceil(total / cluster)));
  auto largest_run = [&](int m) {
    const auto b = blast(sorted, m);
    double largest = 0;
    for (int r = 0; r < m; ++r) {
      double run = 0;
      for (std::size_t i = b[static_cast<std::size_t>(r)]; i < b[static_cast<std::size_t>(r) + 1]; ++i)
        run += static_cast<double>(sorted[i]);
      largest = std::max(largest, run);
    }
    return largest;
  };
  while (fewest < n && largest_run(fewest) >= cluster) ++fewest;
  fewest = std::min(fewest, n);

  // Each degree a candidate of its own for BatchAda (one degree per batch); one heterogeneous search otherwise.
  const std::size_t searches = options_.heterogeneous ? 1 : view.degrees().size();
  Candidate best;
  for (std::size_t d = 0; d < searches; ++d) {
    for (int m = fewest; m < fewest + options_.microbatch_trials && m <= n; ++m) {
      const auto bounds = blast(sorted, m);
      Candidate c;
      c.seconds = 0;
      for (int r = 0; r < m && std::isfinite(c.seconds); ++r) {
        MicroBatchGroups mb;
        std::vector<Tokens> run;
        for (std::size_t i = bounds[static_cast<std::size_t>(r)]; i < bounds[static_cast<std::size_t>(r) + 1]; ++i) {
          mb.sequences.push_back(order[i]);
          run.push_back(sorted[i]);
        }
        std::optional<GroupPlan> groups =
            options_.heterogeneous ? assign_heterogeneous(run, view) : assign_homogeneous(run, view, d);
        if (groups && options_.exact) {
          ExactResult exact = assign_exact(run, view, options_.milp, groups);
          if (exact.plan && exact.plan->makespan < groups->makespan) groups = std::move(exact.plan);
        }
        if (!groups) {
          c.seconds = kInfinity;
          break;
        }
        c.seconds += groups->makespan;
        mb.groups = std::move(*groups);
        c.micro_batches.push_back(std::move(mb));
      }
      if (c.seconds < best.seconds) best = std::move(c);
    }
  }
  if (!std::isfinite(best.seconds))
    throw PlanningError("flexsp: no grouping of " + std::to_string(view.gpus()) + " GPUs holds a micro-batch of the " +
                        "batch (longest sequence " + std::to_string(sorted.front()) + " tokens; an SP group of " +
                        std::to_string(view.degrees().back().degree) + " holds " +
                        std::to_string(view.degrees().back().capacity) + ")");
  return std::move(best.micro_batches);
}

std::vector<IterationPlan> FlexSpPolicy::plan(const PlanningContext& context, std::span<const GlobalBatch> batches) {
  const CostModel& cost = *context.cost;
  const Recompute recompute = options_.recompute.value_or(context.training.recompute);
  const FlexSpView view(cost, recompute, options_.max_sp.value_or(cost.cluster().world_size()), options_.allow_sp1);
  std::vector<IterationPlan> plans;
  for (std::size_t b = 0; b < batches.size(); ++b) {
    std::vector<Tokens> lengths;
    for (const auto& s : batches[b]) lengths.push_back(s.tokens);
    std::vector<MicroBatchGroups> micro_batches;
    try {
      micro_batches = schedule(lengths, view);
    } catch (const PlanningError& e) {
      throw PlanningError("batch " + std::to_string(b) + ": " + e.what());
    }
    IterationPlan plan;
    plan.index = static_cast<int>(b);
    plan.label = "batch " + std::to_string(b) + ": M=" + std::to_string(micro_batches.size());
    for (std::size_t m = 0; m < micro_batches.size(); ++m) {
      add_phase(plan, batches[b], micro_batches[m], static_cast<int>(m), cost.cluster().world_size(), recompute);
      plan.label += (m ? " | " : " ") + describe(micro_batches[m].groups);
    }
    plans.push_back(std::move(plan));
  }
  return plans;
}

namespace {

std::unique_ptr<Policy> make(const PolicySpec& spec, bool heterogeneous) {
  auto reader = policy_options(spec);
  FlexSpOptions o;
  o.heterogeneous = heterogeneous;
  if (reader.has("microbatch_trials"))
    o.microbatch_trials = static_cast<int>(reader.integer_in("microbatch_trials", 1, 64));
  if (reader.has("max_sp")) {
    const auto sp = reader.integer_in("max_sp", 1, 1 << 20);
    if ((sp & (sp - 1)) != 0) reader.fail("max_sp", "must be a power of two, got " + std::to_string(sp));
    o.max_sp = static_cast<int>(sp);
  }
  if (reader.has("allow_sp1")) o.allow_sp1 = reader.required<bool>("allow_sp1");
  if (reader.has("solver")) {
    const auto solver = reader.required<std::string>("solver");
    if (solver != "heuristic" && solver != "milp")
      reader.fail("solver", "expected \"heuristic\" or \"milp\", got \"" + solver + "\"");
    if (solver == "milp" && !heterogeneous)
      reader.fail("solver", "flexsp-batchada has one degree per batch: nothing for the MILP to choose");
    o.exact = solver == "milp";
  }
  if (reader.has("milp_time_limit_s")) o.milp.time_limit_s = reader.positive("milp_time_limit_s");
  if (reader.has("milp_max_nodes"))
    o.milp.max_nodes = static_cast<int>(reader.integer_in("milp_max_nodes", 1, 1 << 30));
  o.recompute = read_recompute(reader, "recompute");
  reader.finish();
  return std::make_unique<FlexSpPolicy>(std::move(o));
}

}  // namespace

std::unique_ptr<Policy> make_flexsp_policy(const PolicySpec& spec) {
  return make(spec, true);
}

std::unique_ptr<Policy> make_flexsp_batchada_policy(const PolicySpec& spec) {
  return make(spec, false);
}

}  // namespace lcsim::flexsp
