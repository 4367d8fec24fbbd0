#include "policies/skrull/objective.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

namespace lcsim::skrull {
namespace {

// Running sums of one micro-batch's placement, enough to evaluate Eq. 2 for every rank.
struct PlacementSums {
  explicit PlacementSums(int cp) : local_flops(static_cast<std::size_t>(cp), 0.0) {}
  std::vector<double> local_flops;
  double dist_flops = 0;   // sum of FLOPs(S) over distributed sequences (Dist = this / N)
  Tokens dist_tokens = 0;  // sum of S over distributed sequences (V = Volume(this))

  double seconds(const SkrullView& view, int cp) const {
    const double comm = dist_tokens > 0 ? view.tcomm(view.volume(dist_tokens)) : 0.0;
    const double dist = dist_flops > 0 ? view.tcomp(dist_flops / cp) : 0.0;
    double worst = 0;
    for (const double local : local_flops) {
      const double overlapped = std::max(comm, local > 0 ? view.tcomp(local) : 0.0);
      worst = std::max(worst, overlapped + dist);
    }
    return worst;
  }
};

class DacpSearch {
 public:
  DacpSearch(const SkrullView& view, std::span<const Tokens> lengths, double bucket, int cp)
      : view_(view), lengths_(lengths), cp_(cp), order_(lengths.size()), sums_(cp),
        remaining_(static_cast<std::size_t>(cp), bucket * cp), ranks_(lengths.size(), CpAssignment::kSharded) {
    std::iota(order_.begin(), order_.end(), std::size_t{0});
    // Long sequences first: they decide feasibility and dominate the objective, so bounds bite early.
    std::stable_sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) { return lengths[a] > lengths[b]; });
    for (const Tokens s : lengths) flops_.push_back(view.flops(s));
  }

  std::optional<OptimalDacp> run() {
    search(0, 0);
    if (!best_) return std::nullopt;
    best_->nodes = nodes_;
    return best_;
  }

 private:
  // Buckets in units of 1/N token, as in dacp.cpp, so Sum == C N is decided exactly.
  bool fits_shard(Tokens s) const {
    return std::all_of(remaining_.begin(), remaining_.end(), [&](double r) { return r >= static_cast<double>(s); });
  }

  void search(std::size_t depth, int used_ranks) {
    ++nodes_;
    const double bound = sums_.seconds(view_, cp_);
    if (best_ && bound >= best_->seconds) return;
    if (depth == order_.size()) {
      best_ = OptimalDacp{bound, ranks_, 0};
      return;
    }
    const std::size_t seq = order_[depth];
    const Tokens s = lengths_[seq];
    const double whole = static_cast<double>(s) * cp_;
    // Local on an already used rank, or on the first unused one (the others are symmetric to it).
    for (int r = 0; r < std::min(cp_, used_ranks + 1); ++r) {
      auto& room = remaining_[static_cast<std::size_t>(r)];
      if (room < whole) continue;
      room -= whole;
      sums_.local_flops[static_cast<std::size_t>(r)] += flops_[seq];
      ranks_[seq] = r;
      search(depth + 1, std::max(used_ranks, r + 1));
      sums_.local_flops[static_cast<std::size_t>(r)] -= flops_[seq];
      room += whole;
    }
    if (fits_shard(s)) {
      for (auto& room : remaining_) room -= static_cast<double>(s);
      sums_.dist_flops += flops_[seq];
      sums_.dist_tokens += s;
      ranks_[seq] = CpAssignment::kSharded;
      search(depth + 1, used_ranks);
      sums_.dist_tokens -= s;
      sums_.dist_flops -= flops_[seq];
      for (auto& room : remaining_) room += static_cast<double>(s);
    }
  }

  const SkrullView& view_;
  std::span<const Tokens> lengths_;
  int cp_;
  std::vector<std::size_t> order_;
  std::vector<double> flops_;
  PlacementSums sums_;
  std::vector<double> remaining_;
  std::vector<int> ranks_;
  std::optional<OptimalDacp> best_;
  long long nodes_ = 0;
};

}  // namespace

double tdacp_seconds(const SkrullView& view, std::span<const Tokens> lengths, std::span<const int> ranks, int cp) {
  PlacementSums sums(cp);
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    if (ranks[i] == CpAssignment::kSharded) {
      sums.dist_flops += view.flops(lengths[i]);
      sums.dist_tokens += lengths[i];
    } else {
      sums.local_flops[static_cast<std::size_t>(ranks[i])] += view.flops(lengths[i]);
    }
  }
  return sums.seconds(view, cp);
}

double joint_objective_seconds(const SkrullView& view, std::span<const Tokens> lengths,
                               std::span<const RankSchedule> ranks, int cp) {
  double slowest = 0;
  std::vector<Tokens> member_lengths;
  for (const RankSchedule& rank : ranks) {
    double total = 0;
    for (const ScheduledMicroBatch& mb : rank.micro_batches) {
      member_lengths.clear();
      for (const std::size_t i : mb.sequences) member_lengths.push_back(lengths[i]);
      total += tdacp_seconds(view, member_lengths, mb.ranks, cp);
    }
    slowest = std::max(slowest, total);
  }
  return slowest;
}

std::optional<OptimalDacp> optimal_dacp(const SkrullView& view, std::span<const Tokens> lengths, double bucket_tokens,
                                        int cp) {
  return DacpSearch(view, lengths, bucket_tokens, cp).run();
}

}  // namespace lcsim::skrull
