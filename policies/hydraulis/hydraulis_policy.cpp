#include "policies/hydraulis/hydraulis_policy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "base/errors.hpp"
#include "base/random.hpp"
#include "model/plan_demand.hpp"
#include "policies/hydraulis/dispatch.hpp"

namespace lcsim::hydraulis {
namespace {

constexpr std::uint64_t kHydraulisSalt = 0x4859'4452'4155'4cULL;  // "HYDRAUL": this policy's random stream

std::vector<std::pair<int, int>> explicit_schemes(const HydraulisOptions& options) {
  std::vector<std::pair<int, int>> tp_pp;
  for (const auto& strategy : options.strategies)
    for (const auto& entry : strategy) tp_pp.emplace_back(entry.tp, entry.pp);
  return tp_pp;
}

std::vector<Strategy> explicit_candidates(const HydraulisOptions& options, const SchemeSpace& space) {
  std::vector<Strategy> out;
  for (std::size_t i = 0; i < options.strategies.size(); ++i) {
    std::vector<std::pair<std::size_t, int>> counts;
    for (const auto& entry : options.strategies[i]) counts.emplace_back(*space.find(entry.tp, entry.pp), entry.count);
    Strategy s = make_strategy(counts);
    if (s.gpus(space) > space.total_gpus())
      throw InputError(options.where + ".strategies[" + std::to_string(i) + "]: " + s.describe(space) + " needs " +
                       std::to_string(s.gpus(space)) + " GPUs, the cluster has " + std::to_string(space.total_gpus()));
    out.push_back(std::move(s));
  }
  return out;
}

/// Every pipeline of the largest-MaxLen scheme that fits: the batch holds a sequence no candidate holds.
Strategy fallback_strategy(const SchemeSpace& space) {
  const std::size_t top = space.longest();
  return make_strategy({{top, space.total_gpus() / space[top].gpus()}});
}

IterationPlan build_plan(const GlobalBatch& batch, const std::vector<Pipeline>& pipelines, const Assignment& a,
                         const SchemeSpace& space) {
  IterationPlan plan;
  for (std::size_t p = 0; p < pipelines.size(); ++p) {
    Replica replica;
    replica.scheme = space[pipelines[p].scheme].scheme;
    replica.gpus = pipelines[p].gpus;
    for (const auto& indices : a.micro_batches[p]) {
      MicroBatch mb;
      for (std::size_t i : indices)
        mb.placements.push_back(Placement{batch[i].id, batch[i].tokens, Placement::kSharded});
      replica.micro_batches.push_back(std::move(mb));
    }
    plan.replicas.push_back(std::move(replica));
  }
  return plan;
}

}  // namespace

std::vector<HydraulisPolicy::Finalist> HydraulisPolicy::screen(const std::vector<const Strategy*>& holding,
                                                               DispatchBatch& batch) const {
  const auto keep = static_cast<std::size_t>(options_.finalists);
  if (keep == 0 || holding.size() <= keep) {
    std::vector<Finalist> all;
    for (const Strategy* strategy : holding) all.push_back({strategy, -std::numeric_limits<double>::infinity()});
    return all;
  }
  // The keep best by Eq. 3's objective after screen_trials trials, ties to the earlier candidate; keep_best gives
  // up on a candidate as soon as it cannot be kept, which spares most of the screening's trials at scale.
  std::vector<std::vector<std::size_t>> schemes;
  for (const Strategy* strategy : holding) schemes.push_back(pipeline_schemes(*strategy, batch.space()));
  std::vector<Finalist> finalists;
  for (const auto& [c, objective] : keep_best(batch, schemes, options_.screen_trials, keep))
    finalists.push_back({holding[c], objective});
  return finalists;
}

Assignment assign(std::span<const Tokens> lengths, const std::vector<Pipeline>& pipelines, const SchemeSpace& space,
                  const HydraulisOptions& options, std::uint64_t seed) {
  return *assign_below(lengths, pipelines, space, options, seed, std::numeric_limits<double>::infinity());
}

std::optional<Assignment> assign_below(std::span<const Tokens> lengths, const std::vector<Pipeline>& pipelines,
                                       const SchemeSpace& space, const HydraulisOptions& options, std::uint64_t seed,
                                       double give_up_at) {
  DispatchBatch batch(lengths, space, seed);
  return assign_below(batch, pipelines, options, give_up_at);
}

std::optional<Assignment> assign_below(DispatchBatch& batch, const std::vector<Pipeline>& pipelines,
                                       const HydraulisOptions& options, double give_up_at) {
  const std::span<const Tokens> lengths = batch.lengths();
  const SchemeSpace& space = batch.space();
  std::vector<std::size_t> schemes;
  for (const auto& p : pipelines) schemes.push_back(p.scheme);
  const DispatchResult dispatched = dispatch(batch, schemes, options.trials, give_up_at);
  // Packing order: with a cutoff, the pipelines of largest packing bound first, so that one whose packing reaches
  // the cutoff -- the estimate is their maximum -- ends the work early.
  std::vector<std::size_t> visit(pipelines.size());
  std::iota(visit.begin(), visit.end(), std::size_t{0});
  const bool cut = std::isfinite(give_up_at);
  if (cut) {
    if (!(dispatched.objective < give_up_at)) return std::nullopt;
    // Eq. 2's bound is loose against the packing (it counts c once per pipeline, the packing once per micro-batch);
    // packing_lower_bound is tighter and cheap next to the packing itself.
    std::vector<double> bounds(pipelines.size());
    for (std::size_t p = 0; p < pipelines.size(); ++p) {
      std::vector<Tokens> sub;
      for (std::size_t i : dispatched.per_pipeline[p]) sub.push_back(lengths[i]);
      const SchemeInfo& scheme = space[pipelines[p].scheme];
      bounds[p] = packing_lower_bound(sub, scheme) + scheme.sync;
      if (!(bounds[p] < give_up_at)) return std::nullopt;
    }
    std::stable_sort(visit.begin(), visit.end(), [&](std::size_t x, std::size_t y) { return bounds[x] > bounds[y]; });
  }
  Assignment out;
  out.micro_batches.resize(pipelines.size());
  for (const std::size_t p : visit) {
    const auto& mine = dispatched.per_pipeline[p];
    const SchemeInfo& scheme = space[pipelines[p].scheme];
    out.estimate = std::max(out.estimate, scheme.sync);  // an idle pipeline still synchronises
    if (mine.empty()) continue;
    std::vector<Tokens> sub;
    for (std::size_t i : mine) sub.push_back(lengths[i]);
    const bool exact = options.exact_packing && static_cast<int>(sub.size()) <= options.exact_max_sequences;
    PackingResult packed = exact ? pack_exact(sub, scheme, options.milp) : pack_heuristic(sub, scheme);
    out.estimate = std::max(out.estimate, packed.cost + scheme.sync);
    if (cut && !(out.estimate < give_up_at)) return std::nullopt;
    for (auto& mb : packed.micro_batches) {
      for (auto& i : mb) i = mine[i];
      out.micro_batches[p].push_back(std::move(mb));
    }
  }
  return out;
}

std::vector<IterationPlan> HydraulisPolicy::plan(const PlanningContext& context, std::span<const GlobalBatch> batches) {
  const CostModel& cost = *context.cost;
  const int world = cost.cluster().world_size();
  SpaceOptions space_options;
  space_options.recompute = options_.recompute.value_or(context.training.recompute);
  space_options.util_threshold = options_.util_threshold;
  space_options.serial_optimization = options_.serial_optimization;
  const std::shared_ptr<const SchemeSpace> shared =
      options_.strategies.empty()
          ? shared_scheme_space(cost, world, space_options)
          : std::make_shared<const SchemeSpace>(cost, world, space_options, explicit_schemes(options_));
  const SchemeSpace& space = *shared;
  if (options_.strategies.empty()) {
    // Hydraulis proposes offline, once, from the costs the user profiled and the data expected (Sec. 7). A sampled
    // world is hardware and data the planner never saw: its proposal is the nominal world's, in the world's own
    // space; only the selection below sees the world's batches and costs (docs/uncertainty.md).
    const CostModel& believed = context.nominal ? *context.nominal->cost : cost;
    const std::span<const GlobalBatch> expected = context.nominal ? context.nominal->batches : batches;
    const std::shared_ptr<const SchemeSpace> believed_space =
        context.nominal ? shared_scheme_space(believed, world, space_options) : shared;
    std::vector<Tokens> window;
    for (const auto& batch : expected)
      for (const auto& s : batch) window.push_back(s.tokens);
    const double iterations = static_cast<double>(std::max<std::size_t>(expected.size(), 1));
    const auto& dataset = context.dataset_lengths;
    std::shared_ptr<const Proposal> proposal;
    if (options_.proposal_from_dataset && dataset && !dataset->empty() && !window.empty()) {
      // The paper proposes from the whole dataset (Sec. 7): its lengths, as many iterations' worth as they hold
      // tokens at the window's mean tokens per iteration. A drawn length above the distribution's top quantile
      // joins them, so that every sequence to run has a proposed strategy.
      const auto tokens = [](const std::vector<Tokens>& v) { return std::accumulate(v.begin(), v.end(), 0.0); };
      const double per_iteration = tokens(window) / iterations;
      std::vector<Tokens> lengths = *dataset;
      const Tokens top = *std::max_element(lengths.begin(), lengths.end());
      for (Tokens t : window)
        if (t > top) lengths.push_back(t);
      proposal = shared_proposal(lengths, tokens(lengths) / per_iteration, *believed_space, options_.proposal);
    } else {
      proposal = shared_proposal(window, iterations, *believed_space, options_.proposal);
    }
    candidates_ = believed_space == shared ? proposal->strategies
                                           : strategies_in_space(proposal->strategies, *believed_space, space);
  } else {
    candidates_ = explicit_candidates(options_, space);
  }

  choices_.clear();
  std::vector<IterationPlan> plans;
  Rng rng(context.seed ^ kHydraulisSalt);
  for (std::size_t b = 0; b < batches.size(); ++b) {
    IterationChoice choice;
    IterationPlan plan = plan_batch(batches[b], space, cost, rng.next(), choice);
    plan.index = static_cast<int>(b);
    plan.label = "batch " + std::to_string(b) + ": " + choice.strategy.describe(space) +
                 (choice.candidates == 0 ? " (no candidate holds the longest sequence)" : "");
    plans.push_back(std::move(plan));
    choices_.push_back(std::move(choice));
  }
  return plans;
}

IterationPlan HydraulisPolicy::plan_batch(const GlobalBatch& batch, const SchemeSpace& space, const CostModel& cost,
                                          std::uint64_t seed, IterationChoice& choice) const {
  std::vector<Tokens> lengths;
  Tokens longest = 0;
  for (const auto& s : batch) {
    lengths.push_back(s.tokens);
    longest = std::max(longest, s.tokens);
  }
  std::vector<const Strategy*> holding;
  for (const auto& candidate : candidates_)
    if (candidate.max_len(space) >= longest) holding.push_back(&candidate);
  choice.candidates = static_cast<int>(holding.size());
  const Strategy fallback = fallback_strategy(space);
  DispatchBatch dispatch_batch(lengths, space, seed);
  std::vector<Finalist> finalists = screen(holding, dispatch_batch);
  if (finalists.empty()) finalists.push_back({&fallback, 0.0});

  // The winner is the finalist of smallest estimate (ties: the earlier one) among those whose plan fits memory,
  // else among all. Dispatch's objective never exceeds a finalist's estimate (Eq. 2 bounds every packing from
  // below), so once a plan fits, a finalist whose dispatch reaches its estimate cannot win: its trials give up
  // there and it is never packed; nor can one whose packing of any pipeline reaches it (the estimate is the
  // largest), and its packing stops there. The margin covers rounding between the two sums. Best-screened first,
  // so that a good plan that fits is known early.
  struct Evaluated {
    std::size_t finalist;
    std::vector<Pipeline> pipelines;
    Assignment assignment;
    IterationPlan plan;
    bool fits;
  };
  std::vector<std::size_t> visit(finalists.size());
  std::iota(visit.begin(), visit.end(), std::size_t{0});
  std::stable_sort(visit.begin(), visit.end(),
                   [&](std::size_t x, std::size_t y) { return finalists[x].screened < finalists[y].screened; });
  std::vector<Evaluated> evaluated;
  double give_up_at = std::numeric_limits<double>::infinity();
  for (const std::size_t f : visit) {
    std::vector<Pipeline> pipelines = lay_out(*finalists[f].strategy, space);
    std::optional<Assignment> a = assign_below(dispatch_batch, pipelines, options_, give_up_at);
    if (!a) continue;
    IterationPlan candidate = build_plan(batch, pipelines, *a, space);
    const auto peaks = estimate_peak_bytes(candidate, cost);
    const bool fits =
        std::all_of(peaks.begin(), peaks.end(), [&](double bytes) { return bytes <= cost.capacity_bytes(); });
    if (fits) give_up_at = std::min(give_up_at, a->estimate + 1e-9 * std::abs(a->estimate));
    evaluated.push_back({f, std::move(pipelines), std::move(*a), std::move(candidate), fits});
  }
  std::sort(evaluated.begin(), evaluated.end(),
            [](const Evaluated& x, const Evaluated& y) { return x.finalist < y.finalist; });
  std::stable_sort(evaluated.begin(), evaluated.end(), [](const Evaluated& x, const Evaluated& y) {
    return x.assignment.estimate < y.assignment.estimate;
  });
  // The cost model's memory estimate has the last word: MaxLen spreads the optimizer states evenly over all GPUs
  // (App. B.1), the estimate over the GPUs holding each model slice, which differs when TP x PP does not divide
  // the cluster. The best plan that fits wins; if none fits, the best one.
  const auto fitting = std::find_if(evaluated.begin(), evaluated.end(), [](const Evaluated& e) { return e.fits; });
  Evaluated& chosen_entry = fitting != evaluated.end() ? *fitting : evaluated.front();
  const Finalist* chosen = &finalists[chosen_entry.finalist];
  IterationPlan plan = std::move(chosen_entry.plan);
  choice.estimate = chosen_entry.assignment.estimate;
  choice.strategy = *chosen->strategy;
  return plan;
}

}  // namespace lcsim::hydraulis
