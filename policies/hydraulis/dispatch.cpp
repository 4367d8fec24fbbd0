#include "policies/hydraulis/dispatch.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "policies/core/random.hpp"

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
                        const SchemeSpace& space, int trials, std::uint64_t seed) {
  if (trials < 1) throw std::invalid_argument("hydraulis::dispatch: trials must be >= 1");
  if (pipeline_schemes.empty()) throw std::invalid_argument("hydraulis::dispatch: no pipelines");
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

  // Eligible groups of each sequence: a prefix of the groups. Longer than every MaxLen: the groups of the
  // largest MaxLen (the iteration will run out of memory; the estimate reports it).
  std::size_t top = 0;
  while (top < groups.size() && groups[top].scheme->max_len == groups[0].scheme->max_len) ++top;
  std::vector<std::size_t> eligible(lengths.size());
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    std::size_t n = 0;
    while (n < groups.size() && groups[n].scheme->max_len >= lengths[i]) ++n;
    eligible[i] = n == 0 ? top : n;
  }

  std::vector<GroupTree> trees;
  for (const auto& g : groups) trees.emplace_back(g.size, g.scheme->scheme.pp - 1);
  const std::size_t pipelines = pipeline_schemes.size();
  const std::size_t group_count = groups.size();
  // work(l) of every sequence on every group, computed once for all trials.
  std::vector<double> work(lengths.size() * group_count);
  for (std::size_t i = 0; i < lengths.size(); ++i)
    for (std::size_t g = 0; g < group_count; ++g) work[i * group_count + g] = groups[g].scheme->work(lengths[i]);
  std::vector<double> load(pipelines), longest(pipelines);
  std::vector<std::size_t> next_empty(group_count);
  std::vector<std::size_t> assignment(lengths.size()), best_assignment(lengths.size());
  std::vector<std::size_t> shuffled(lengths.size()), order(lengths.size());
  std::vector<std::size_t> level_start(group_count + 2);

  // No trial can end below this bound: every sequence sits in some pipeline whose bound is at least that of the
  // sequence alone on its best eligible scheme, and the largest bound is at least the mean of the D loads. Once a
  // trial reaches it, the remaining trials cannot win (ties go to the earlier trial): stopping changes nothing.
  // Every pipeline pays its sync whether it gets sequences or not: the objective starts there.
  double idle = 0;
  double syncs = 0;
  for (const auto& g : groups) {
    idle = std::max(idle, g.scheme->sync);
    syncs += g.scheme->sync * static_cast<double>(g.size);
  }
  double floor_bound = idle;
  double least_work = syncs;
  bool signs_hold = std::all_of(groups.begin(), groups.end(), [](const Group& g) { return g.scheme->overhead() >= 0; });
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    double alone = kInf;
    double cheapest = kInf;
    for (std::size_t g = 0; g < eligible[i]; ++g) {
      const SchemeInfo& s = *groups[g].scheme;
      alone = std::min(alone, s.scheme.pp * (work[i * group_count + g] + s.overhead()) + s.sync);
      cheapest = std::min(cheapest, work[i * group_count + g]);
      signs_hold = signs_hold && work[i * group_count + g] >= 0;
    }
    floor_bound = std::max(floor_bound, alone);
    least_work += cheapest;
  }
  floor_bound = std::max(floor_bound, least_work / static_cast<double>(pipelines));
  if (!signs_hold) floor_bound = -kInf;  // the bounds assume non-negative costs (a fit could break that)

  double best_objective = kInf;
  Rng master(seed);
  for (int trial = 0; trial < trials && !(best_objective <= floor_bound); ++trial) {
    Rng rng = master.split(static_cast<std::uint64_t>(trial));
    std::iota(shuffled.begin(), shuffled.end(), std::size_t{0});
    rng.shuffle(shuffled);
    // Stable counting sort by the number of eligible groups: fewest first, shuffled order within a level.
    std::fill(level_start.begin(), level_start.end(), 0);
    for (std::size_t i : shuffled) ++level_start[eligible[i] + 1];
    for (std::size_t e = 1; e < level_start.size(); ++e) level_start[e] += level_start[e - 1];
    for (std::size_t i : shuffled) order[level_start[eligible[i]]++] = i;
    for (auto& t : trees) t.clear();
    std::fill(next_empty.begin(), next_empty.end(), 0);
    double objective = idle;

    bool beaten = false;
    for (std::size_t i : order) {
      Key best;
      std::size_t best_group = 0;
      const double* w = &work[i * group_count];
      for (std::size_t g = 0; g < eligible[i]; ++g) {
        const SchemeInfo& s = *groups[g].scheme;
        const double t = w[g];
        const double pp = s.scheme.pp;
        Key key;
        if (next_empty[g] < groups[g].size) {
          key.loaded = false;
          key.bound = pp * (t + s.overhead()) + s.sync;
          key.pipeline = groups[g].first + next_empty[g];
        } else {
          const auto [value, member] = trees[g].best(t);
          key.bound = pp * s.overhead() + t + value + s.sync;
          key.pipeline = groups[g].first + member;
        }
        key.objective = std::max(key.bound, objective);
        if (key < best) {
          best = key;
          best_group = g;
        }
      }
      // The objective only grows: a trial that reaches the best one so far cannot win (ties go to the earlier).
      if (best.objective >= best_objective) {
        beaten = true;
        break;
      }
      const std::size_t j = best.pipeline;
      const double t = w[best_group];
      if (!best.loaded) {
        ++next_empty[best_group];
        load[j] = t;
        longest[j] = t;
      } else {
        load[j] += t;
        longest[j] = std::max(longest[j], t);
      }
      trees[best_group].set(j - groups[best_group].first, load[j], longest[j]);
      objective = std::max(objective, best.bound);
      assignment[i] = j;
    }
    if (!beaten && objective < best_objective) {
      best_objective = objective;
      best_assignment = assignment;
    }
  }

  DispatchResult result;
  result.objective = lengths.empty() ? idle : best_objective;
  result.per_pipeline.resize(pipelines);
  for (std::size_t i = 0; i < lengths.size(); ++i) result.per_pipeline[best_assignment[i]].push_back(i);
  return result;
}

}  // namespace lcsim::hydraulis
