#include "policies/hydraulis/dispatch.hpp"

#include <algorithm>
#include <limits>
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

/// Eligible groups of each sequence: how many of the first groups hold it. Longer than every MaxLen: the groups of
/// the largest MaxLen (the iteration will run out of memory; the estimate reports it).
std::vector<std::size_t> eligible_groups(std::span<const Tokens> lengths, const std::vector<Group>& groups) {
  std::size_t top = 0;
  while (top < groups.size() && groups[top].scheme->max_len == groups[0].scheme->max_len) ++top;
  std::vector<std::size_t> eligible(lengths.size());
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    std::size_t n = 0;
    while (n < groups.size() && groups[n].scheme->max_len >= lengths[i]) ++n;
    eligible[i] = n == 0 ? top : n;
  }
  return eligible;
}

/// Algorithm 1's randomized greedy over one set of pipelines: the buffers live across trials.
class Dispatcher {
 public:
  Dispatcher(std::span<const Tokens> lengths, std::span<const std::size_t> pipeline_schemes, const SchemeSpace& space)
      : groups_(group_pipelines(pipeline_schemes, space)),
        eligible_(eligible_groups(lengths, groups_)),
        pipelines_(pipeline_schemes.size()),
        work_(lengths.size() * groups_.size()),
        load_(pipelines_),
        longest_(pipelines_),
        next_empty_(groups_.size()),
        assignment_(lengths.size()),
        shuffled_(lengths.size()),
        order_(lengths.size()),
        level_start_(groups_.size() + 2) {
    for (const auto& g : groups_) trees_.emplace_back(g.size, g.scheme->scheme.pp - 1);
    // work(l) of every sequence on every group, computed once for all trials.
    for (std::size_t i = 0; i < lengths.size(); ++i)
      for (std::size_t g = 0; g < groups_.size(); ++g)
        work_[i * groups_.size() + g] = groups_[g].scheme->work(lengths[i]);
    // Every pipeline pays its sync whether it gets sequences or not: the objective starts there.
    for (const auto& g : groups_) idle_ = std::max(idle_, g.scheme->sync);
  }

  double idle() const { return idle_; }
  const std::vector<std::size_t>& assignment() const { return assignment_; }

  /// No trial can end below this bound: every sequence sits in some pipeline whose bound is at least that of the
  /// sequence alone on its best eligible scheme, and the largest bound is at least the mean of the D loads. Once a
  /// trial reaches it, the remaining trials cannot win (ties go to the earlier trial): stopping changes nothing.
  double floor_bound() const {
    const std::size_t group_count = groups_.size();
    double syncs = 0;
    for (const auto& g : groups_) syncs += g.scheme->sync * static_cast<double>(g.size);
    double floor = idle_;
    double least_work = syncs;
    bool signs_hold =
        std::all_of(groups_.begin(), groups_.end(), [](const Group& g) { return g.scheme->overhead() >= 0; });
    for (std::size_t i = 0; i < eligible_.size(); ++i) {
      double alone = kInf;
      double cheapest = kInf;
      for (std::size_t g = 0; g < eligible_[i]; ++g) {
        const SchemeInfo& s = *groups_[g].scheme;
        alone = std::min(alone, s.scheme.pp * (work_[i * group_count + g] + s.overhead()) + s.sync);
        cheapest = std::min(cheapest, work_[i * group_count + g]);
        signs_hold = signs_hold && work_[i * group_count + g] >= 0;
      }
      floor = std::max(floor, alone);
      least_work += cheapest;
    }
    floor = std::max(floor, least_work / static_cast<double>(pipelines_));
    return signs_hold ? floor : -kInf;  // the bounds assume non-negative costs (a fit could break that)
  }

  /// One trial: places every sequence in `rng`'s order, fewest eligible groups first. Returns its objective, or
  /// +inf once it reaches `to_beat` (the objective only grows, and ties go to the earlier trial).
  double run_trial(Rng& rng, double to_beat) {
    shuffle_order(rng);
    for (auto& t : trees_) t.clear();
    std::fill(next_empty_.begin(), next_empty_.end(), 0);
    double objective = idle_;
    for (std::size_t i : order_) {
      const auto [best, group] = best_placement(i, objective);
      if (best.objective >= to_beat) return kInf;
      place(i, best, group);
      objective = std::max(objective, best.bound);
    }
    return objective;
  }

 private:
  /// Stable counting sort of a shuffled order by the number of eligible groups: fewest first.
  void shuffle_order(Rng& rng) {
    std::iota(shuffled_.begin(), shuffled_.end(), std::size_t{0});
    rng.shuffle(shuffled_);
    std::fill(level_start_.begin(), level_start_.end(), 0);
    for (std::size_t i : shuffled_) ++level_start_[eligible_[i] + 1];
    for (std::size_t e = 1; e < level_start_.size(); ++e) level_start_[e] += level_start_[e - 1];
    for (std::size_t i : shuffled_) order_[level_start_[eligible_[i]]++] = i;
  }

  /// The best pipeline for sequence i over its eligible groups (Key's order), with its group.
  std::pair<Key, std::size_t> best_placement(std::size_t i, double objective) const {
    Key best;
    std::size_t best_group = 0;
    const double* w = &work_[i * groups_.size()];
    for (std::size_t g = 0; g < eligible_[i]; ++g) {
      const SchemeInfo& s = *groups_[g].scheme;
      const double t = w[g];
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
    const double t = work_[i * groups_.size() + group];
    if (!key.loaded) {
      ++next_empty_[group];
      load_[j] = t;
      longest_[j] = t;
    } else {
      load_[j] += t;
      longest_[j] = std::max(longest_[j], t);
    }
    trees_[group].set(j - groups_[group].first, load_[j], longest_[j]);
    assignment_[i] = j;
  }

  std::vector<Group> groups_;
  std::vector<std::size_t> eligible_;
  std::size_t pipelines_;
  std::vector<double> work_;  ///< [sequence][group]
  std::vector<GroupTree> trees_;
  double idle_ = 0;
  std::vector<double> load_, longest_;   ///< per pipeline
  std::vector<std::size_t> next_empty_;  ///< per group: its first pipeline without sequences
  std::vector<std::size_t> assignment_;  ///< per sequence: its pipeline in the current trial
  std::vector<std::size_t> shuffled_, order_, level_start_;
};

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

DispatchResult dispatch(std::span<const Tokens> lengths, std::span<const std::size_t> pipeline_schemes,
                        const SchemeSpace& space, int trials, std::uint64_t seed, double give_up_at) {
  if (trials < 1) throw std::invalid_argument("hydraulis::dispatch: trials must be >= 1");
  if (pipeline_schemes.empty()) throw std::invalid_argument("hydraulis::dispatch: no pipelines");
  Dispatcher dispatcher(lengths, pipeline_schemes, space);
  const double floor_bound = dispatcher.floor_bound();
  double best_objective = give_up_at;
  bool found = false;
  std::vector<std::size_t> best_assignment(lengths.size());
  Rng master(seed);
  for (int trial = 0; trial < trials && !(best_objective <= floor_bound); ++trial) {
    Rng rng = master.split(static_cast<std::uint64_t>(trial));
    const double objective = dispatcher.run_trial(rng, best_objective);
    if (objective < best_objective) {
      best_objective = objective;
      best_assignment = dispatcher.assignment();
      found = true;
    }
  }

  DispatchResult result;
  result.objective = lengths.empty() ? dispatcher.idle() : found ? best_objective : kInf;
  result.per_pipeline.resize(pipeline_schemes.size());
  for (std::size_t i = 0; i < lengths.size(); ++i) result.per_pipeline[best_assignment[i]].push_back(i);
  return result;
}

}  // namespace lcsim::hydraulis
