#include "policies/wlbllm/packing.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace lcsim::wlbllm {

OutlierQueues::OutlierQueues(std::vector<Tokens> thresholds, std::size_t release)
    : thresholds_(std::move(thresholds)), release_(release), queues_(thresholds_.size()) {
  if (release_ < 1) throw std::invalid_argument("OutlierQueues: release count must be >= 1");
  for (std::size_t i = 0; i < thresholds_.size(); ++i)
    if (thresholds_[i] <= 0 || (i > 0 && thresholds_[i] <= thresholds_[i - 1]))
      throw std::invalid_argument("OutlierQueues: thresholds must be positive and strictly increasing");
}

bool OutlierQueues::push(const Sequence& d) {
  std::size_t queue = thresholds_.size();
  for (std::size_t i = 0; i < thresholds_.size() && d.tokens > thresholds_[i]; ++i) queue = i;
  if (queue == thresholds_.size()) return false;
  queues_[queue].push_back(d);
  return true;
}

std::vector<Sequence> OutlierQueues::release() {
  std::vector<Sequence> out;
  for (auto& q : queues_)
    if (q.size() >= release_) {
      out.insert(out.end(), q.begin(), q.begin() + static_cast<std::ptrdiff_t>(release_));
      q.erase(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(release_));
    }
  return out;
}

std::vector<Sequence> OutlierQueues::flush() {
  std::vector<Sequence> out;
  for (auto& q : queues_) {
    out.insert(out.end(), q.begin(), q.end());
    q.clear();
  }
  return out;
}

bool OutlierQueues::empty() const {
  return std::all_of(queues_.begin(), queues_.end(), [](const auto& q) { return q.empty(); });
}

std::vector<std::vector<Sequence>> pack_greedy(std::span<const Sequence> docs, int micro_batches, Tokens s_max,
                                               const Workload& workload, std::vector<Sequence>* left) {
  const auto n = static_cast<std::size_t>(micro_batches);
  std::vector<std::vector<Sequence>> mbs(n);
  std::vector<double> work(n, 0.0);
  std::vector<Tokens> tokens(n, 0);
  for (const Sequence& d : docs) {
    // w: least estimated time; l: fewest tokens (std::min_element keeps the lowest index on ties).
    const auto w = static_cast<std::size_t>(std::min_element(work.begin(), work.end()) - work.begin());
    const auto l = static_cast<std::size_t>(std::min_element(tokens.begin(), tokens.end()) - tokens.begin());
    std::size_t to = n;
    if (tokens[w] + d.tokens < s_max)
      to = w;
    else if (tokens[l] + d.tokens < s_max)
      to = l;
    if (to == n) {
      if (left) left->push_back(d);
      continue;
    }
    mbs[to].push_back(d);
    work[to] += workload(d.tokens);
    tokens[to] += d.tokens;
  }
  return mbs;
}

VariableLengthPacker::VariableLengthPacker(int micro_batches, Tokens s_max, Workload workload, OutlierQueues queues)
    : micro_batches_(micro_batches), s_max_(s_max), workload_(std::move(workload)), queues_(std::move(queues)) {
  if (micro_batches_ < 1) throw std::invalid_argument("VariableLengthPacker: micro_batches must be >= 1");
  if (s_max_ < 1) throw std::invalid_argument("VariableLengthPacker: s_max must be >= 1");
}

std::vector<std::vector<Sequence>> VariableLengthPacker::pack(std::vector<Sequence> fresh) {
  std::stable_sort(fresh.begin(), fresh.end(),
                   [](const Sequence& a, const Sequence& b) { return a.tokens > b.tokens; });
  std::vector<Sequence> docs = std::move(remained_);
  remained_.clear();
  docs.insert(docs.end(), fresh.begin(), fresh.end());
  auto mbs = pack_greedy(docs, micro_batches_, s_max_, workload_, &remained_);
  std::erase_if(mbs, [](const auto& mb) { return mb.empty(); });
  return mbs;
}

std::vector<std::vector<Sequence>> VariableLengthPacker::next(std::span<const Sequence> batch) {
  std::vector<Sequence> fresh;
  for (const Sequence& d : batch) {
    if (d.tokens >= s_max_)
      throw std::invalid_argument("VariableLengthPacker: document " + std::to_string(d.id) + " has " +
                                  std::to_string(d.tokens) + " tokens, not below S_max " + std::to_string(s_max_));
    if (!queues_.push(d)) fresh.push_back(d);
  }
  const std::vector<Sequence> released = queues_.release();
  fresh.insert(fresh.end(), released.begin(), released.end());
  return pack(std::move(fresh));
}

std::vector<std::vector<Sequence>> VariableLengthPacker::flush() {
  if (drained()) return {};
  return pack(queues_.flush());
}

namespace {

struct Search {
  std::span<const Sequence> docs;
  Tokens s_max;
  std::vector<double> weights;
  std::vector<double> work;
  std::vector<Tokens> tokens;
  double best = std::numeric_limits<double>::infinity();

  void place(std::size_t i, std::size_t used, double current) {
    if (current >= best) return;
    if (i == docs.size()) {
      best = current;
      return;
    }
    // Micro-batches are interchangeable: a document opens at most one new (empty) micro-batch.
    const std::size_t limit = std::min(used + 1, work.size());
    for (std::size_t k = 0; k < limit; ++k) {
      if (tokens[k] + docs[i].tokens >= s_max) continue;
      work[k] += weights[i];
      tokens[k] += docs[i].tokens;
      place(i + 1, std::max(used, k + 1), std::max(current, work[k]));
      work[k] -= weights[i];
      tokens[k] -= docs[i].tokens;
    }
  }
};

}  // namespace

double exact_max_workload(std::span<const Sequence> docs, int micro_batches, Tokens s_max, const Workload& workload) {
  if (micro_batches < 1) throw std::invalid_argument("exact_max_workload: micro_batches must be >= 1");
  std::vector<Sequence> sorted(docs.begin(), docs.end());  // heaviest first prunes sooner
  std::sort(sorted.begin(), sorted.end(), [](const Sequence& a, const Sequence& b) { return a.tokens > b.tokens; });
  Search s{sorted,
           s_max,
           {},
           std::vector<double>(static_cast<std::size_t>(micro_batches), 0.0),
           std::vector<Tokens>(static_cast<std::size_t>(micro_batches), 0)};
  for (const auto& d : sorted) s.weights.push_back(workload(d.tokens));
  s.place(0, 0, 0.0);
  return s.best;
}

}  // namespace lcsim::wlbllm
