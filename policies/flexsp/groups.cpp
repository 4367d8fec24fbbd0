#include "policies/flexsp/groups.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>
#include <set>
#include <stdexcept>

namespace lcsim::flexsp {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr int kBisectionSteps = 40;
constexpr double kMakespanPrecision = 1e-4;  // relative: finer than any cost the view can tell apart
constexpr std::size_t kNoGroup = std::numeric_limits<std::size_t>::max();
constexpr int kOrderedFromGpus = 256;

std::vector<std::size_t> longest_first(std::span<const Tokens> lengths) {
  std::vector<std::size_t> order(lengths.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return lengths[x] > lengths[y]; });
  return order;
}

const DegreeCost& cost_of(const FlexSpView& view, int degree) {
  for (const auto& d : view.degrees())
    if (d.degree == degree) return d;
  throw std::logic_error("flexsp: a group of a degree the view does not have");
}

void add(Group& g, Tokens tokens, std::size_t index) {
  const auto s = static_cast<double>(tokens);
  g.members.push_back(index);
  g.sum += s;
  g.sum_sq += s * s;
}

double makespan_of(const std::vector<Group>& groups, const FlexSpView& view) {
  double m = 0;
  for (const auto& g : groups) m = std::max(m, group_time(g, view));
  return m;
}

/// The shortest of the sequences in `order`: a group it no longer fits takes none of those still to come.
double shortest_of(std::span<const Tokens> lengths, std::span<const std::size_t> order) {
  Tokens least = std::numeric_limits<Tokens>::max();
  for (std::size_t i : order) least = std::min(least, lengths[i]);
  return static_cast<double>(least);
}

/// The degree a new group opens with for a sequence of `tokens`: the first (smallest) that holds it, has its GPUs
/// free beside the `used` ones and runs it within `limit`; none when no degree can.
std::optional<std::size_t> degree_to_open(const FlexSpView& view, Tokens tokens, int used, double limit) {
  const auto s = static_cast<double>(tokens);
  const std::vector<DegreeCost>& degrees = view.degrees();
  for (std::size_t k = 0; k < degrees.size(); ++k) {
    const DegreeCost& d = degrees[k];
    if (tokens > d.capacity || used + d.degree > view.gpus() || d.seconds(s * s, s) > limit) continue;
    return k;
  }
  return std::nullopt;
}

/// greedy_within on a few open groups: a scan of them all, in group order.
/// The scan reads the open groups' sums and coefficients from columns, and leaves out for good a group that can take
/// no sequence still to come (the shortest of them does not fit it): with a, b >= 0 a group's time only grows with
/// the sequence and with what it holds, so such a group is never chosen again. Same choices, same arithmetic.
std::optional<std::vector<Group>> greedy_scan(std::span<const Tokens> lengths, std::span<const std::size_t> order,
                                              const FlexSpView& view, double limit) {
  std::vector<Group> groups;
  struct Open {
    std::vector<double> a, b, c, sum, sum_sq, capacity;
    std::vector<std::size_t> group;
    std::vector<char> rises;  ///< a, b >= 0: the time test may rule the group out for good
    void erase(std::size_t j) {
      const auto at = static_cast<std::ptrdiff_t>(j);
      for (auto* column : {&a, &b, &c, &sum, &sum_sq, &capacity}) column->erase(column->begin() + at);
      group.erase(group.begin() + at);
      rises.erase(rises.begin() + at);
    }
  } open;
  const double shortest = shortest_of(lengths, order);
  int used = 0;
  for (std::size_t i : order) {
    const auto s = static_cast<double>(lengths[i]);
    const double s2 = s * s;
    std::size_t best = kNoGroup;
    double best_time = -1;
    const std::size_t live = open.group.size();
    for (std::size_t j = 0; j < live; ++j) {
      if (open.sum[j] + s > open.capacity[j]) continue;
      const double t = open.a[j] * (open.sum_sq[j] + s2) + open.b[j] * (open.sum[j] + s) + open.c[j];
      if (t <= limit && t > best_time) best = j, best_time = t;
    }
    if (best == kNoGroup) {
      const std::optional<std::size_t> k = degree_to_open(view, lengths[i], used, limit);
      if (!k) return std::nullopt;
      const DegreeCost* opened = &view.degrees()[*k];
      groups.push_back(Group{opened->degree, {}, 0, 0});
      used += opened->degree;
      open.a.push_back(opened->time.a);
      open.b.push_back(opened->time.b);
      open.c.push_back(opened->time.c);
      open.sum.push_back(0);
      open.sum_sq.push_back(0);
      open.capacity.push_back(static_cast<double>(opened->capacity));
      open.group.push_back(groups.size() - 1);
      open.rises.push_back(opened->time.a >= 0 && opened->time.b >= 0);
      best = open.group.size() - 1;
    }
    Group& g = groups[open.group[best]];
    add(g, lengths[i], i);
    open.sum[best] = g.sum;
    open.sum_sq[best] = g.sum_sq;
    const bool full =
        g.sum + shortest > open.capacity[best] ||
        (open.rises[best] &&
         open.a[best] * (g.sum_sq + shortest * shortest) + open.b[best] * (g.sum + shortest) + open.c[best] > limit);
    if (full) open.erase(best);
  }
  return groups;
}

/// The greedy at makespan `limit`: every sequence, longest first, into the group it leaves fullest (the largest
/// time still within the limit, ties to the earlier group), else a new group of the smallest degree that runs it
/// within the limit.
///
/// The groups of one degree share the time formula, and a sequence adds the same a s^2 + b s to each: their times
/// after it keep the order of their times before it, up to rounding. So each degree keeps its open groups ordered
/// by time, and a sequence visits, per degree, only those whose time plus its own lies within `margin` of the limit
/// and of the best found so far; each one visited is priced exactly as a scan of every group would price it, so
/// the choice is the scan's. A group the shortest sequence to come no longer fits leaves for good (with a, b >= 0
/// its time only grows with what it holds and with the sequence).
std::optional<std::vector<Group>> greedy_within(std::span<const Tokens> lengths, std::span<const std::size_t> order,
                                                const FlexSpView& view, double limit) {
  // The ordered sets pay off once there are hundreds of groups; below, scanning them all is cheaper.
  if (view.gpus() < kOrderedFromGpus) return greedy_scan(lengths, order, view, limit);
  std::vector<Group> groups;
  const std::vector<DegreeCost>& degrees = view.degrees();
  std::vector<std::size_t> slot_of;                                            // per group: its degree's index
  std::vector<std::set<std::pair<double, std::size_t>>> open(degrees.size());  // per degree: (time, group)
  std::vector<std::multiset<double>> sums(degrees.size());                     // per degree: its open groups' tokens
  const double shortest = shortest_of(lengths, order);
  int used = 0;
  for (std::size_t i : order) {
    const auto s = static_cast<double>(lengths[i]);
    const double s2 = s * s;
    std::size_t best = kNoGroup;
    double best_time = -1;
    for (std::size_t k = 0; k < degrees.size(); ++k) {
      if (open[k].empty()) continue;
      const DegreeCost& d = degrees[k];
      const double a = d.time.a, b = d.time.b, c = d.time.c;
      const auto capacity = static_cast<double>(d.capacity);
      if (*sums[k].begin() + s > capacity) continue;  // not even its emptiest group has room
      const double added = a * s2 + b * s;
      // Rounding in either sum is a few ulps of its largest term; a group holds at most capacity tokens.
      const double margin =
          1e-12 * (std::abs(a) * (capacity * capacity + s2) + std::abs(b) * (capacity + s) + std::abs(c));
      auto it = open[k].upper_bound({limit - added + margin, kNoGroup});
      while (it != open[k].begin()) {
        --it;
        const auto [before, g] = *it;
        if (before + added < best_time - margin) break;
        const Group& group = groups[g];
        if (group.sum + s > capacity) continue;
        const double t = d.seconds(group.sum_sq + s2, group.sum + s);
        if (t <= limit && (t > best_time || (t == best_time && g < best))) best = g, best_time = t;
      }
    }
    if (best == kNoGroup) {
      const std::optional<std::size_t> k = degree_to_open(view, lengths[i], used, limit);
      if (!k) return std::nullopt;
      groups.push_back(Group{degrees[*k].degree, {}, 0, 0});
      slot_of.push_back(*k);
      used += degrees[*k].degree;
      best = groups.size() - 1;
    } else {
      const DegreeCost& d = degrees[slot_of[best]];
      open[slot_of[best]].erase({d.seconds(groups[best].sum_sq, groups[best].sum), best});
      sums[slot_of[best]].erase(sums[slot_of[best]].find(groups[best].sum));
    }
    Group& g = groups[best];
    add(g, lengths[i], i);
    const DegreeCost& d = degrees[slot_of[best]];
    const bool rises = d.time.a >= 0 && d.time.b >= 0;
    const bool full = g.sum + shortest > static_cast<double>(d.capacity) ||
                      (rises && d.seconds(g.sum_sq + shortest * shortest, g.sum + shortest) > limit);
    if (!full) {
      open[slot_of[best]].insert({d.seconds(g.sum_sq, g.sum), best});
      sums[slot_of[best]].insert(g.sum);
    }
  }
  return groups;
}

/// One use of GPUs no group holds: double a group (its tokens within the larger degree's capacity) or give a new
/// group one sequence of a group of several. The move that lowers the makespan most; false when none lowers it.
bool place_spare_gpus(std::span<const Tokens> lengths, const FlexSpView& view, std::vector<Group>& groups) {
  const int spare = view.gpus() - GroupPlan{groups, 0}.gpus_used();
  if (spare <= 0) return false;
  std::vector<double> times;
  for (const auto& g : groups) times.push_back(group_time(g, view));
  // The makespan without group `skip` (and, when given, `skip2`).
  auto others = [&](std::size_t skip, std::size_t skip2) {
    double m = 0;
    for (std::size_t g = 0; g < groups.size(); ++g)
      if (g != skip && g != skip2) m = std::max(m, times[g]);
    return m;
  };
  const double current = makespan_of(groups, view);
  double best = current;
  std::vector<Group> chosen;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const Group& group = groups[g];
    if (group.degree <= spare) {  // double it
      for (const auto& d : view.degrees()) {
        if (d.degree != 2 * group.degree || group.sum > static_cast<double>(d.capacity)) continue;
        const double m = std::max(others(g, g), d.seconds(group.sum_sq, group.sum));
        if (m < best) {
          best = m;
          chosen = groups;
          chosen[g].degree = d.degree;
        }
      }
    }
    if (group.members.size() < 2) continue;
    for (const auto& d : view.degrees()) {  // move one of its sequences to a new group of degree d
      if (d.degree > spare) break;
      for (std::size_t k = 0; k < group.members.size(); ++k) {
        const std::size_t i = group.members[k];
        const auto s = static_cast<double>(lengths[i]);
        if (lengths[i] > d.capacity) continue;
        const double left = cost_of(view, group.degree).seconds(group.sum_sq - s * s, group.sum - s);
        const double m = std::max({others(g, g), left, d.seconds(s * s, s)});
        if (m < best) {
          best = m;
          chosen = groups;
          Group& from = chosen[g];
          from.members.erase(from.members.begin() + static_cast<std::ptrdiff_t>(k));
          from.sum -= s, from.sum_sq -= s * s;
          chosen.push_back(Group{d.degree, {}, 0, 0});
          add(chosen.back(), lengths[i], i);
        }
      }
    }
  }
  if (!(best < current * (1 - 1e-12))) return false;
  groups = std::move(chosen);
  return true;
}

}  // namespace

int GroupPlan::gpus_used() const {
  int used = 0;
  for (const auto& g : groups) used += g.degree;
  return used;
}

double group_time(const Group& g, const FlexSpView& view) {
  return cost_of(view, g.degree).seconds(g.sum_sq, g.sum);
}

std::optional<GroupPlan> assign_homogeneous(std::span<const Tokens> lengths, const FlexSpView& view,
                                            std::size_t degree_index) {
  const DegreeCost& d = view.degrees().at(degree_index);
  std::vector<Group> groups(static_cast<std::size_t>(view.gpus() / d.degree), Group{d.degree, {}, 0, 0});
  if (groups.empty()) return std::nullopt;
  // The group that finishes first (ties: the lowest index) from a heap; groups too full for this sequence wait
  // aside, since a later, shorter one may still fit them.
  using Entry = std::pair<double, std::size_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ready;
  for (std::size_t g = 0; g < groups.size(); ++g) ready.push({d.seconds(0, 0), g});
  std::vector<Entry> aside;
  for (std::size_t i : longest_first(lengths)) {
    const auto s = static_cast<double>(lengths[i]);
    while (!ready.empty() && groups[ready.top().second].sum + s > static_cast<double>(d.capacity)) {
      aside.push_back(ready.top());
      ready.pop();
    }
    if (ready.empty()) return std::nullopt;
    const std::size_t g = ready.top().second;
    ready.pop();
    add(groups[g], lengths[i], i);
    ready.push({d.seconds(groups[g].sum_sq, groups[g].sum), g});
    for (const Entry& e : aside) ready.push(e);
    aside.clear();
  }
  // A group left without sequences takes no part: its GPUs stay free (they idle through the micro-batch).
  std::erase_if(groups, [](const Group& g) { return g.members.empty(); });
  GroupPlan plan{std::move(groups), 0};
  plan.makespan = makespan_of(plan.groups, view);
  return plan;
}

std::optional<GroupPlan> assign_heterogeneous(std::span<const Tokens> lengths, const FlexSpView& view) {
  // Incumbent: the best homogeneous grouping (the warm start FlexSP's solver gives its MILP).
  std::optional<GroupPlan> best;
  for (std::size_t d = 0; d < view.degrees().size(); ++d) {
    auto plan = assign_homogeneous(lengths, view, d);
    if (plan && (!best || plan->makespan < best->makespan)) best = std::move(plan);
  }
  const auto order = longest_first(lengths);
  double lo = 0;
  double hi = best ? best->makespan : kInfinity;
  if (!best) {  // no single degree holds it: find any limit the greedy meets
    double limit = 1;
    for (int i = 0; i < 64 && !greedy_within(lengths, order, view, limit); ++i) limit *= 4;
    if (!greedy_within(lengths, order, view, limit)) return std::nullopt;
    hi = limit;
  }
  for (int step = 0; step < kBisectionSteps && hi - lo > kMakespanPrecision * hi; ++step) {
    const double mid = 0.5 * (lo + hi);
    if (auto groups = greedy_within(lengths, order, view, mid)) {
      const double m = makespan_of(*groups, view);
      if (!best || m < best->makespan) best = GroupPlan{std::move(*groups), m};
      hi = std::min(mid, m);
    } else {
      lo = mid;
    }
  }
  if (!best) return std::nullopt;
  while (place_spare_gpus(lengths, view, best->groups)) {
  }
  best->makespan = makespan_of(best->groups, view);
  return best;
}

std::vector<int> group_offsets(const std::vector<Group>& groups) {
  std::vector<std::size_t> order(groups.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t x, std::size_t y) { return groups[x].degree > groups[y].degree; });
  std::vector<int> offsets(groups.size());
  int next = 0;
  for (std::size_t g : order) {
    offsets[g] = next;
    next += groups[g].degree;
  }
  return offsets;
}

}  // namespace lcsim::flexsp
