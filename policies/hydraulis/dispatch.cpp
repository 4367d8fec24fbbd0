#include "policies/hydraulis/dispatch.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <stdexcept>

#include "base/random.hpp"

namespace lcsim::hydraulis {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

/// The non-empty pipelines of one scheme: argmin_j C_j + k max(W_j, x) (k = PP - 1), lowest index on ties, by
/// branch and bound over a segment tree keeping per node min C, min (C + k W), min W and max W.
class GroupTree {
 public:
  GroupTree(std::size_t members, double k) : k_(k) {
    while (leaves_ < members) leaves_ *= 2;
    nodes_.resize(2 * leaves_);
  }

  void clear() { std::fill(nodes_.begin(), nodes_.end(), Node{}); }

  void set(std::size_t member, double c, double w) {
    std::size_t n = leaves_ + member;
    nodes_[n] = Node{c, member, c + k_ * w, member, w, w};
    for (n /= 2; n >= 1; n /= 2) nodes_[n] = merge(nodes_[2 * n], nodes_[2 * n + 1]);
  }

  /// {value, member}; member == kNone when no pipeline of the group is loaded yet.
  std::pair<double, std::size_t> best(double x) const {
    std::pair<double, std::size_t> found{kInf, kNone};
    if (k_ == 0) {
      if (nodes_[1].min_c < kInf) found = {nodes_[1].min_c, nodes_[1].min_c_at};
      return found;
    }
    search(1, x, found);
    return found;
  }

 private:
  struct Node {
    double min_c = kInf;
    std::size_t min_c_at = kNone;
    double min_cw = kInf;
    std::size_t min_cw_at = kNone;
    double min_w = kInf;
    double max_w = -kInf;
  };

  static Node merge(const Node& l, const Node& r) {
    Node n;
    // Left holds the lower indices: it wins ties.
    if (r.min_c < l.min_c) {
      n.min_c = r.min_c;
      n.min_c_at = r.min_c_at;
    } else {
      n.min_c = l.min_c;
      n.min_c_at = l.min_c_at;
    }
    if (r.min_cw < l.min_cw) {
      n.min_cw = r.min_cw;
      n.min_cw_at = r.min_cw_at;
    } else {
      n.min_cw = l.min_cw;
      n.min_cw_at = l.min_cw_at;
    }
    n.min_w = std::min(l.min_w, r.min_w);
    n.max_w = std::max(l.max_w, r.max_w);
    return n;
  }

  // Depth first, left first: leaves are met in index order, so an equal value found later never wins.
  void search(std::size_t n, double x, std::pair<double, std::size_t>& found) const {
    const Node& node = nodes_[n];
    if (node.min_c == kInf) return;
    if (std::max(node.min_c + k_ * x, node.min_cw) >= found.first) return;
    if (node.min_w >= x) {
      found = {node.min_cw, node.min_cw_at};
    } else if (node.max_w <= x) {
      found = {node.min_c + k_ * x, node.min_c_at};
    } else {
      search(2 * n, x, found);
      search(2 * n + 1, x, found);
    }
  }

  double k_;
  std::size_t leaves_ = 1;
  std::vector<Node> nodes_;
};

struct Group {
  const SchemeInfo* scheme;
  std::size_t first;  ///< its first pipeline index
  std::size_t size;
};

/// Placement key of Algorithm 1 with its tie-breaks: smaller objective, then an empty pipeline, then the smaller
/// new bound, then the lower pipeline index.
struct Key {
  double objective = kInf;
  bool loaded = true;
  double bound = kInf;
  std::size_t pipeline = kNone;
  bool operator<(const Key& o) const {
    if (objective != o.objective) return objective < o.objective;
    if (loaded != o.loaded) return !loaded;
    if (bound != o.bound) return bound < o.bound;
    return pipeline < o.pipeline;
  }
};

/// The pipelines as runs of one scheme each, in MaxLen descending order (throws std::invalid_argument otherwise).
std::vector<Group> group_pipelines(std::span<const std::size_t> pipeline_schemes, const SchemeSpace& space) {
  std::vector<Group> groups;
  for (std::size_t j = 0; j < pipeline_schemes.size(); ++j) {
    const SchemeInfo* s = &space[pipeline_schemes[j]];
    if (!groups.empty() && groups.back().scheme == s) {
      ++groups.back().size;
      continue;
    }
    if (!groups.empty() && groups.back().scheme->max_len < s->max_len)
      throw std::invalid_argument("hydraulis::dispatch: pipelines must be in MaxLen descending order");
    for (const auto& g : groups)
      if (g.scheme == s) throw std::invalid_argument("hydraulis::dispatch: one scheme's pipelines must be together");
    groups.push_back(Group{s, j, 1});
  }
  return groups;
}

}  // namespace

struct DispatchBatch::State {
  State(std::span<const Tokens> l, const SchemeSpace& s, std::uint64_t seed)
      : lengths(l.begin(), l.end()),
        space(&s),
        master(seed),
        work(s.size()),
        least_work_of_rank(s.size()),
        work_rises(s.size(), false) {
    for (const auto& scheme : s.schemes()) levels.push_back(scheme.max_len);
    std::sort(levels.begin(), levels.end(), std::greater<>());
    levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
    rank.resize(lengths.size());
    per_rank.assign(levels.size() + 1, 0);
    longest_of_rank.assign(levels.size() + 1, 0);
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      // Levels holding the sequence: a prefix of the descending levels.
      const auto held = std::upper_bound(levels.begin(), levels.end(), lengths[i], std::greater<>());
      rank[i] = static_cast<std::uint32_t>(held - levels.begin());
      ++per_rank[rank[i]];
      longest_of_rank[rank[i]] = std::max(longest_of_rank[rank[i]], lengths[i]);
    }
    order.resize(lengths.size());
    assignment.resize(lengths.size());
  }

  /// work(l) of every sequence on `scheme`, with the facts the floor bound needs.
  const double* work_on(std::size_t scheme) {
    auto& w = work[scheme];
    if (w.empty() && !lengths.empty()) {
      if (by_length.empty()) {
        by_length.resize(lengths.size());
        std::iota(by_length.begin(), by_length.end(), std::size_t{0});
        std::stable_sort(by_length.begin(), by_length.end(),
                         [&](std::size_t x, std::size_t y) { return lengths[x] < lengths[y]; });
      }
      w.resize(lengths.size());
      const SchemeInfo& s = (*space)[scheme];
      for (std::size_t i = 0; i < lengths.size(); ++i) w[i] = s.work(lengths[i]);
      auto& least = least_work_of_rank[scheme];
      least.assign(levels.size() + 1, kInf);
      for (std::size_t i = 0; i < lengths.size(); ++i) least[rank[i]] = std::min(least[rank[i]], w[i]);
      bool rising = true;
      for (std::size_t k = 1; k < by_length.size(); ++k) rising = rising && !(w[by_length[k]] < w[by_length[k - 1]]);
      work_rises[scheme] = rising;
    }
    return w.data();
  }

  /// Trial `trial`'s shuffled sequence indices: the trial's stream is split off the seed's in trial order, as a
  /// dispatch of its own would draw it. Kept while the kept shuffles stay under kShuffleBudget.
  std::span<const std::uint32_t> shuffled(int trial) {
    const auto t = static_cast<std::size_t>(trial);
    while (streams.size() <= t) streams.push_back(master.split(static_cast<std::uint64_t>(streams.size())));
    if (t < shuffles.size()) return shuffles[t];
    std::vector<std::uint32_t>* out = &scratch;
    if (t == shuffles.size() && (t + 1) * lengths.size() * sizeof(std::uint32_t) <= kShuffleBudget) {
      shuffles.emplace_back();
      out = &shuffles.back();
    }
    out->resize(lengths.size());
    std::iota(out->begin(), out->end(), std::uint32_t{0});
    Rng rng = streams[t];
    rng.shuffle(*out);
    return *out;
  }

  static constexpr std::size_t kShuffleBudget = std::size_t{64} << 20;

  std::vector<Tokens> lengths;
  const SchemeSpace* space;
  Rng master;
  std::vector<Rng> streams;                          ///< per trial
  std::vector<std::vector<std::uint32_t>> shuffles;  ///< per trial, the first ones
  std::vector<std::uint32_t> scratch;                ///< a trial's shuffle past the budget
  std::vector<std::vector<double>> work;             ///< [scheme][sequence], empty until used
  std::vector<Tokens> levels;                        ///< the space's distinct MaxLen, descending
  std::vector<std::uint32_t> rank;                   ///< per sequence: the levels holding it (a prefix)
  std::vector<std::size_t> per_rank;                 ///< sequences per rank
  std::vector<Tokens> longest_of_rank;
  std::vector<std::vector<double>> least_work_of_rank;  ///< [scheme][rank], with work
  /// [scheme]: work never decreases with the length over the batch's sequences, as computed (with work)
  std::vector<bool> work_rises;
  std::vector<std::size_t> by_length;  ///< sequence indices by length
  std::vector<double> cheapest;        ///< the floor bound's buffers
  std::vector<double> eligible_at;
  std::vector<std::size_t> order, assignment;  ///< a dispatch's buffers
};

DispatchBatch::DispatchBatch(std::span<const Tokens> lengths, const SchemeSpace& space, std::uint64_t seed)
    : state_(std::make_unique<State>(lengths, space, seed)) {
  if (lengths.size() > std::numeric_limits<std::uint32_t>::max())
    throw std::invalid_argument("hydraulis::dispatch: too many sequences");
}

DispatchBatch::~DispatchBatch() = default;

std::span<const Tokens> DispatchBatch::lengths() const {
  return state_->lengths;
}

const SchemeSpace& DispatchBatch::space() const {
  return *state_->space;
}

namespace {

/// Algorithm 1's randomized greedy over one set of pipelines of a batch.
class Dispatcher {
 public:
  Dispatcher(DispatchBatch::State& batch, std::span<const std::size_t> pipeline_schemes)
      : batch_(batch),
        groups_(group_pipelines(pipeline_schemes, *batch.space)),
        pipelines_(pipeline_schemes.size()),
        load_(pipelines_),
        longest_(pipelines_),
        next_empty_(groups_.size()),
        level_start_(groups_.size() + 1) {
    for (const auto& g : groups_) {
      trees_.emplace_back(g.size, g.scheme->scheme.pp - 1);
      scheme_of_.push_back(static_cast<std::size_t>(g.scheme - batch_.space->schemes().data()));
      work_.push_back(batch_.work_on(scheme_of_.back()));
    }
    // Eligible groups per rank: how many of the first groups hold the rank's lengths. Longer than every MaxLen:
    // the groups of the largest MaxLen (the iteration will run out of memory; the estimate reports it).
    std::size_t top = 0;
    while (top < groups_.size() && groups_[top].scheme->max_len == groups_[0].scheme->max_len) ++top;
    eligible_of_rank_.assign(batch_.levels.size() + 1, top);
    for (std::size_t r = 1; r <= batch_.levels.size(); ++r) {
      std::size_t n = 0;
      while (n < groups_.size() && groups_[n].scheme->max_len >= batch_.levels[r - 1]) ++n;
      if (n > 0) eligible_of_rank_[r] = n;
    }
    // Counting sort by eligible groups, fewest first: where each level starts, the same for every trial.
    std::vector<std::size_t> count(groups_.size() + 1, 0);
    for (std::size_t r = 0; r < eligible_of_rank_.size(); ++r) count[eligible_of_rank_[r]] += batch_.per_rank[r];
    for (std::size_t e = 1; e < count.size(); ++e) level_start_[e] = level_start_[e - 1] + count[e - 1];
    // Every pipeline pays its sync whether it gets sequences or not: the objective starts there.
    for (const auto& g : groups_) idle_ = std::max(idle_, g.scheme->sync);
  }

  double idle() const { return idle_; }
  const std::vector<std::size_t>& assignment() const { return batch_.assignment; }

  /// No trial can end below this bound: every sequence sits in some pipeline whose bound is at least that of the
  /// sequence alone on its best eligible scheme, and the largest bound is at least the mean of the D loads. Once a
  /// trial reaches it, the remaining trials cannot win (ties go to the earlier trial): stopping changes nothing.
  double floor_bound() const {
    const std::size_t n = batch_.lengths.size();
    double syncs = 0;
    for (const auto& g : groups_) syncs += g.scheme->sync * static_cast<double>(g.size);
    double floor = idle_;
    // The bounds assume non-negative costs (a fit could break that): c, and work where a sequence is eligible.
    bool signs_hold =
        std::all_of(groups_.begin(), groups_.end(), [](const Group& g) { return g.scheme->overhead() >= 0; });
    for (std::size_t r = 0; r < eligible_of_rank_.size(); ++r)
      for (std::size_t g = 0; g < eligible_of_rank_[r] && batch_.per_rank[r] > 0; ++g)
        signs_hold = signs_hold && batch_.least_work_of_rank[scheme_of_[g]][r] >= 0;
    const auto alone = [&](std::size_t eligible, const auto& work_of) {
      double best = kInf;
      for (std::size_t g = 0; g < eligible; ++g) {
        const SchemeInfo& s = *groups_[g].scheme;
        best = std::min(best, s.scheme.pp * (work_of(g) + s.overhead()) + s.sync);
      }
      return best;
    };
    // A sequence's bound alone rises with its work, monotonically under rounding too: where every group's work
    // rises with the length, the longest sequence of a rank (the same eligible groups) has the rank's largest.
    const bool rising =
        std::all_of(scheme_of_.begin(), scheme_of_.end(), [&](std::size_t s) { return batch_.work_rises[s]; });
    for (std::size_t r = 0; rising && r < eligible_of_rank_.size(); ++r)
      if (batch_.per_rank[r] > 0)
        floor = std::max(floor, alone(eligible_of_rank_[r], [&](std::size_t g) {
                           return groups_[g].scheme->work(batch_.longest_of_rank[r]);
                         }));
    for (std::size_t i = 0; !rising && i < n; ++i)
      floor = std::max(floor, alone(eligible(i), [&](std::size_t g) { return work_[g][i]; }));
    // The mean load: each sequence's cheapest eligible work, summed in sequence order. Group by group, so that
    // the compiler vectorises the minima.
    std::vector<double>& cheapest = batch_.cheapest;
    cheapest.assign(work_[0], work_[0] + n);                // every sequence is eligible on the first group
    std::vector<double>& eligible_at = batch_.eligible_at;  // doubles: the select below then vectorises
    eligible_at.resize(n);
    for (std::size_t i = 0; i < n; ++i) eligible_at[i] = static_cast<double>(eligible(i));
    for (std::size_t g = 1; g < groups_.size(); ++g) {
      const double* w = work_[g];
      const auto level = static_cast<double>(g);
      for (std::size_t i = 0; i < n; ++i)
        cheapest[i] = eligible_at[i] > level ? std::min(cheapest[i], w[i]) : cheapest[i];
    }
    double least_work = syncs;
    for (std::size_t i = 0; i < n; ++i) least_work += cheapest[i];
    floor = std::max(floor, least_work / static_cast<double>(pipelines_));
    return signs_hold ? floor : -kInf;
  }

  /// One trial: places every sequence in the trial's order, fewest eligible groups first. Returns its objective,
  /// or +inf once it reaches `to_beat` (the objective only grows, and ties go to the earlier trial).
  double run_trial(int trial, double to_beat) {
    sort_order(batch_.shuffled(trial));
    for (auto& t : trees_) t.clear();
    std::fill(next_empty_.begin(), next_empty_.end(), 0);
    double objective = idle_;
    for (std::size_t i : batch_.order) {
      const auto [best, group] = best_placement(i, objective);
      if (best.objective >= to_beat) return kInf;
      place(i, best, group);
      objective = std::max(objective, best.bound);
    }
    return objective;
  }

 private:
  std::size_t eligible(std::size_t i) const { return eligible_of_rank_[batch_.rank[i]]; }

  /// Stable counting sort of a shuffled order by the number of eligible groups: fewest first.
  void sort_order(std::span<const std::uint32_t> shuffled) {
    cursor_ = level_start_;
    for (const std::uint32_t i : shuffled) batch_.order[cursor_[eligible(i)]++] = i;
  }

  /// The best pipeline for sequence i over its eligible groups (Key's order), with its group.
  std::pair<Key, std::size_t> best_placement(std::size_t i, double objective) const {
    Key best;
    std::size_t best_group = 0;
    const std::size_t eligible_groups = eligible(i);
    for (std::size_t g = 0; g < eligible_groups; ++g) {
      const SchemeInfo& s = *groups_[g].scheme;
      const double t = work_[g][i];
      const double pp = s.scheme.pp;
      Key key;
      if (next_empty_[g] < groups_[g].size) {
        key.loaded = false;
        key.bound = pp * (t + s.overhead()) + s.sync;
        key.pipeline = groups_[g].first + next_empty_[g];
      } else {
        const auto [value, member] = trees_[g].best(t);
        key.bound = pp * s.overhead() + t + value + s.sync;
        key.pipeline = groups_[g].first + member;
      }
      key.objective = std::max(key.bound, objective);
      if (key < best) {
        best = key;
        best_group = g;
      }
    }
    return {best, best_group};
  }

  void place(std::size_t i, const Key& key, std::size_t group) {
    const std::size_t j = key.pipeline;
    const double t = work_[group][i];
    if (!key.loaded) {
      ++next_empty_[group];
      load_[j] = t;
      longest_[j] = t;
    } else {
      load_[j] += t;
      longest_[j] = std::max(longest_[j], t);
    }
    trees_[group].set(j - groups_[group].first, load_[j], longest_[j]);
    batch_.assignment[i] = j;
  }

  DispatchBatch::State& batch_;
  std::vector<Group> groups_;
  std::size_t pipelines_;
  std::vector<const double*> work_;     ///< per group: work(l) of every sequence
  std::vector<std::size_t> scheme_of_;  ///< per group: its scheme's index
  std::vector<std::size_t> eligible_of_rank_;
  std::vector<GroupTree> trees_;
  double idle_ = 0;
  std::vector<double> load_, longest_;             ///< per pipeline
  std::vector<std::size_t> next_empty_;            ///< per group: its first pipeline without sequences
  std::vector<std::size_t> level_start_, cursor_;  ///< per eligible count: where its sequences start
};

/// The trials of one dispatch: the best objective below `give_up_at` (+inf when none) and, when `best` is given,
/// the assignment that reached it (all zeros when none did).
double run_trials(Dispatcher& dispatcher, std::size_t sequences, int trials, double give_up_at,
                  std::vector<std::size_t>* best, double floor_bound) {
  double best_objective = give_up_at;
  bool found = false;
  if (best) best->assign(sequences, 0);
  for (int trial = 0; trial < trials && !(best_objective <= floor_bound); ++trial) {
    const double objective = dispatcher.run_trial(trial, best_objective);
    if (objective < best_objective) {
      best_objective = objective;
      if (best) *best = dispatcher.assignment();
      found = true;
    }
  }
  return sequences == 0 ? dispatcher.idle() : found ? best_objective : kInf;
}

void check_dispatch(std::span<const std::size_t> pipeline_schemes, int trials) {
  if (trials < 1) throw std::invalid_argument("hydraulis::dispatch: trials must be >= 1");
  if (pipeline_schemes.empty()) throw std::invalid_argument("hydraulis::dispatch: no pipelines");
}

}  // namespace

double dispatch_lower_bound(std::span<const Tokens> lengths, const SchemeInfo& scheme) {
  if (lengths.empty()) return scheme.sync;
  double sum = 0;
  double longest = 0;
  for (Tokens l : lengths) {
    sum += scheme.work(l);
    longest = std::max(longest, scheme.work(l));
  }
  const double c = scheme.overhead();
  return sum + c + (scheme.scheme.pp - 1) * (longest + c) + scheme.sync;
}

DispatchResult dispatch(DispatchBatch& batch, std::span<const std::size_t> pipeline_schemes, int trials,
                        double give_up_at) {
  check_dispatch(pipeline_schemes, trials);
  Dispatcher dispatcher(*batch.state_, pipeline_schemes);
  const std::size_t n = batch.state_->lengths.size();
  std::vector<std::size_t> best_assignment;
  DispatchResult result;
  result.objective = run_trials(dispatcher, n, trials, give_up_at, &best_assignment, dispatcher.floor_bound());
  result.per_pipeline.resize(pipeline_schemes.size());
  for (std::size_t i = 0; i < n; ++i) result.per_pipeline[best_assignment[i]].push_back(i);
  return result;
}

DispatchResult dispatch(std::span<const Tokens> lengths, std::span<const std::size_t> pipeline_schemes,
                        const SchemeSpace& space, int trials, std::uint64_t seed, double give_up_at) {
  check_dispatch(pipeline_schemes, trials);
  DispatchBatch batch(lengths, space, seed);
  return dispatch(batch, pipeline_schemes, trials, give_up_at);
}

double dispatch_objective(DispatchBatch& batch, std::span<const std::size_t> pipeline_schemes, int trials,
                          double give_up_at) {
  check_dispatch(pipeline_schemes, trials);
  Dispatcher dispatcher(*batch.state_, pipeline_schemes);
  return run_trials(dispatcher, batch.state_->lengths.size(), trials, give_up_at, nullptr, dispatcher.floor_bound());
}

std::vector<std::pair<std::size_t, double>> keep_best(DispatchBatch& batch,
                                                      const std::vector<std::vector<std::size_t>>& candidates,
                                                      int trials, std::size_t keep) {
  std::vector<std::pair<std::size_t, double>> kept;
  for (const auto& schemes : candidates) check_dispatch(schemes, trials);
  if (keep == 0 || candidates.size() <= keep) {
    for (std::size_t c = 0; c < candidates.size(); ++c)
      kept.emplace_back(c, dispatch_objective(batch, candidates[c], trials));
    return kept;
  }
  // Candidates by floor bound ascending, so that good ones come early and tighten the cutoff: a candidate can be
  // kept only if (objective, index) is below the keep-th best pair found so far, so its trials give up at that
  // objective (just above it when it has the lower index). Whatever the order, the pairs kept are the keep
  // smallest, each with its own objective: a kept candidate's objective is below every cutoff it meets. Once the
  // cutoff is below the next floor bound, no later candidate's trials can end below it (every trial objective is
  // at least the floor, as the trials' early stop already relies on) and the screening ends.
  const std::size_t n = batch.state_->lengths.size();
  std::vector<std::unique_ptr<Dispatcher>> dispatchers;
  std::vector<double> floors;
  for (const auto& schemes : candidates) {
    dispatchers.push_back(std::make_unique<Dispatcher>(*batch.state_, schemes));
    floors.push_back(dispatchers.back()->floor_bound());
  }
  std::vector<std::size_t> order(candidates.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return floors[x] < floors[y]; });
  std::vector<std::pair<double, std::size_t>> best;  // the keep smallest (objective, index) so far, a max-heap
  for (const std::size_t c : order) {
    double cutoff = kInf;
    if (best.size() == keep) {
      const auto& [objective, index] = best.front();
      if (objective < floors[c]) break;
      cutoff = c < index ? std::nextafter(objective, kInf) : objective;
    }
    const double objective = run_trials(*dispatchers[c], n, trials, cutoff, nullptr, floors[c]);
    if (!(objective < cutoff)) continue;
    best.emplace_back(objective, c);
    std::push_heap(best.begin(), best.end());
    if (best.size() > keep) {
      std::pop_heap(best.begin(), best.end());
      best.pop_back();
    }
  }
  // Fewer than keep below +inf (a sequence no candidate can price): the rest by index, as a stable sort would.
  for (std::size_t c = 0; c < candidates.size() && best.size() < keep; ++c)
    if (std::none_of(best.begin(), best.end(), [&](const auto& e) { return e.second == c; }))
      best.emplace_back(kInf, c);
  for (const auto& [objective, index] : best) kept.emplace_back(index, objective);
  std::sort(kept.begin(), kept.end());
  return kept;
}

}  // namespace lcsim::hydraulis
