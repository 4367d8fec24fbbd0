#include <algorithm>
#include <future>
#include <list>
#include <mutex>
#include <optional>
#include <utility>

#include "policies/hydraulis/proposal.hpp"

namespace lcsim::hydraulis {
namespace {

bool same_fit(const QuadraticFit& x, const QuadraticFit& y) {
  return x.a == y.a && x.b == y.b && x.c == y.c && x.mape == y.mape;
}

/// Everything of a space the proposal reads (and the rest of it): equal spaces give equal proposals.
bool same_space(const SchemeSpace& x, const SchemeSpace& y) {
  if (x.size() != y.size() || x.total_gpus() != y.total_gpus() || x.domain_gpus() != y.domain_gpus()) return false;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const SchemeInfo& a = x[i];
    const SchemeInfo& b = y[i];
    if (!(a.scheme == b.scheme) || a.max_len != b.max_len || a.util_len != b.util_len ||
        !same_fit(a.latency, b.latency) || a.sync != b.sync)
      return false;
  }
  return true;
}

bool same_options(const ProposalOptions& x, const ProposalOptions& y) {
  return x.length_step == y.length_step && x.gpu_step == y.gpu_step && x.precision == y.precision &&
         x.roundings_per_length == y.roundings_per_length;
}

struct Key {
  SchemeSpace space;
  std::vector<Tokens> lengths;
  double iterations;
  ProposalOptions options;

  bool matches(std::span<const Tokens> l, double it, const SchemeSpace& s, const ProposalOptions& o) const {
    return iterations == it && same_options(options, o) && lengths.size() == l.size() &&
           std::equal(lengths.begin(), lengths.end(), l.begin()) && same_space(space, s);
  }
};

using Result = std::shared_future<std::shared_ptr<const Proposal>>;

}  // namespace

std::shared_ptr<const Proposal> shared_proposal(std::span<const Tokens> lengths, double iterations,
                                                const SchemeSpace& space, const ProposalOptions& options) {
  static std::mutex mutex;
  static std::list<std::pair<Key, Result>> recent;  // most recent first
  constexpr std::size_t kKept = 8;
  std::promise<std::shared_ptr<const Proposal>> promise;
  std::optional<Result> found;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    for (auto it = recent.begin(); it != recent.end() && !found; ++it) {
      if (!it->first.matches(lengths, iterations, space, options)) continue;
      recent.splice(recent.begin(), recent, it);
      found = recent.front().second;
    }
    if (!found) {
      recent.emplace_front(Key{space, {lengths.begin(), lengths.end()}, iterations, options},
                           promise.get_future().share());
      if (recent.size() > kKept) recent.pop_back();
    }
  }
  if (found) return found->get();  // waits, outside the lock, for a caller still computing it
  try {
    auto proposal = std::make_shared<const Proposal>(propose_strategies(lengths, iterations, space, options));
    promise.set_value(proposal);
    return proposal;
  } catch (...) {
    // A proposal that failed is not kept: the next caller tries again (and meets the same error).
    promise.set_exception(std::current_exception());
    const std::lock_guard<std::mutex> lock(mutex);
    recent.remove_if([&](const auto& entry) { return entry.first.matches(lengths, iterations, space, options); });
    throw;
  }
}

std::vector<Strategy> strategies_in_space(const std::vector<Strategy>& strategies, const SchemeSpace& from,
                                          const SchemeSpace& to) {
  std::vector<Strategy> out;
  for (const Strategy& strategy : strategies) {
    std::vector<std::pair<std::size_t, int>> counts;
    for (const auto& [scheme, count] : strategy.counts) {
      const auto found = to.find(from[scheme].scheme.tp, from[scheme].scheme.pp);
      if (!found) break;
      counts.emplace_back(*found, count);
    }
    if (counts.size() == strategy.counts.size()) out.push_back(make_strategy(std::move(counts)));
  }
  return out;
}

}  // namespace lcsim::hydraulis
