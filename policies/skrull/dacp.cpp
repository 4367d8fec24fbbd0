#include "policies/skrull/dacp.hpp"

#include <algorithm>
#include <numeric>

#include "base/check.hpp"

namespace lcsim::skrull {
namespace {

// Bookkeeping shared by DACP and round-robin: remaining bucket RB and load L per CP rank, kept in the order the
// algorithm visits sequences (ascending length for DACP, input order for round-robin). Buckets are counted in
// units of 1/N token so that shards S/N are whole numbers and the comparisons at the edge (Sum == C N) are exact.
class CpBuckets {
 public:
  CpBuckets(std::span<const Tokens> lengths, std::span<const double> flops, std::span<const std::size_t> order,
            double bucket, int cp)
      : lengths_(lengths),
        flops_(flops),
        order_(order),
        cp_(cp),
        remaining_(static_cast<std::size_t>(cp), bucket * cp),
        load_(static_cast<std::size_t>(cp), 0.0),
        ranks_(lengths.size(), kUnplaced) {}

  double remaining(int rank) const { return remaining_[static_cast<std::size_t>(rank)]; }
  /// A whole sequence, in bucket units.
  double length(std::size_t seq) const { return static_cast<double>(lengths_[seq]) * cp_; }
  /// Its shard S/N, in bucket units.
  double shard(std::size_t seq) const { return static_cast<double>(lengths_[seq]); }

  int argmin_load() const { return index_of(std::min_element(load_.begin(), load_.end()), load_); }
  int argmax_remaining() const { return index_of(std::max_element(remaining_.begin(), remaining_.end()), remaining_); }
  int argmin_remaining() const { return index_of(std::min_element(remaining_.begin(), remaining_.end()), remaining_); }

  // UpdateLocal
  void place_local(std::size_t seq, int rank) {
    ranks_[seq] = rank;
    remaining_[static_cast<std::size_t>(rank)] -= length(seq);
    load_[static_cast<std::size_t>(rank)] += flops_.empty() ? 0.0 : flops_[seq];
  }

  // UpdateAll
  void place_sharded(std::size_t seq) {
    ranks_[seq] = CpAssignment::kSharded;
    const double shard_units = shard(seq);
    const double shard_flops = flops_.empty() ? 0.0 : flops_[seq] / cp_;
    for (int r = 0; r < cp_; ++r) {
      remaining_[static_cast<std::size_t>(r)] -= shard_units;
      load_[static_cast<std::size_t>(r)] += shard_flops;
    }
  }

  // RollBack(rank): the first local sequence of `rank` in visiting order becomes distributed. Algorithm 3 prints
  // RB[rank] <- RB[rank] - S + S/N and leaves the other ranks alone; that would tighten the bucket it means to
  // relieve and ignore the shards the other ranks now hold (Eq. 7). We apply what the roll-back means: `rank`
  // gets S - S/N back and every other rank takes S/N. A rank pushed below zero by that is repaired the same way
  // (its own first local sequence is distributed) before scheduling goes on. The only failure left is a
  // negative rank with nothing local, which means the distributed tokens alone exceed C on every rank.
  bool roll_back(int rank) {
    if (!distribute_first_local(rank)) return false;
    for (;;) {
      const int worst = argmin_remaining();
      if (remaining(worst) >= 0) return true;
      if (!distribute_first_local(worst)) return false;
      ++repairs_;
    }
  }

  int repairs() const { return repairs_; }

  std::vector<int> take_ranks() { return std::move(ranks_); }

 private:
  static constexpr int kUnplaced = -2;

  bool distribute_first_local(int rank) {
    for (const std::size_t seq : order_) {
      if (ranks_[seq] != rank) continue;
      remaining_[static_cast<std::size_t>(rank)] += length(seq);
      load_[static_cast<std::size_t>(rank)] -= flops_.empty() ? 0.0 : flops_[seq];
      place_sharded(seq);
      return true;
    }
    return false;
  }

  static int index_of(std::vector<double>::const_iterator it, const std::vector<double>& v) {
    return static_cast<int>(it - v.begin());
  }

  std::span<const Tokens> lengths_;
  std::span<const double> flops_;
  std::span<const std::size_t> order_;
  int cp_;
  std::vector<double> remaining_;
  std::vector<double> load_;
  std::vector<int> ranks_;
  int repairs_ = 0;
};

// The shared tail of both algorithms: shard if the fullest rank can take S/N, else roll back and retry (returns
// false to retry the same sequence), or fail / overflow.
enum class Step { Placed, Retry, Failed };

Step shard_or_roll_back(CpBuckets& buckets, std::size_t seq, bool rollback, CpAssignment& out) {
  const int fullest = buckets.argmin_remaining();
  if (buckets.remaining(fullest) >= buckets.shard(seq)) {
    buckets.place_sharded(seq);
    return Step::Placed;
  }
  if (!rollback) {
    buckets.place_sharded(seq);
    out.within_bucket = false;
    return Step::Placed;
  }
  const int repairs_before = buckets.repairs();
  if (!buckets.roll_back(fullest)) return Step::Failed;
  out.rollbacks += 1 + buckets.repairs() - repairs_before;
  return Step::Retry;
}

std::vector<std::size_t> identity_order(std::size_t n) {
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  return order;
}

}  // namespace

CpAssignment dacp_schedule(std::span<const Tokens> lengths, std::span<const double> flops, double bucket_tokens, int cp,
                           bool rollback) {
  LCSIM_CHECK(cp >= 1, "DACP needs a CP group of at least one rank");
  LCSIM_CHECK(flops.size() == lengths.size(), "DACP needs one FLOP count per sequence");
  std::vector<std::size_t> order = identity_order(lengths.size());
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return lengths[a] < lengths[b]; });

  CpAssignment out;
  CpBuckets buckets(lengths, flops, order, bucket_tokens, cp);
  for (std::size_t pos = 0; pos < order.size();) {
    const std::size_t seq = order[pos];
    const double s = buckets.length(seq);
    if (int t = buckets.argmin_load(); buckets.remaining(t) >= s) {
      buckets.place_local(seq, t);
    } else if (t = buckets.argmax_remaining(); buckets.remaining(t) >= s) {
      buckets.place_local(seq, t);
    } else {
      const Step step = shard_or_roll_back(buckets, seq, rollback, out);
      if (step == Step::Failed) return CpAssignment{{}, false, true, out.rollbacks};
      if (step == Step::Retry) continue;
    }
    ++pos;
  }
  out.ranks = buckets.take_ranks();
  return out;
}

CpAssignment round_robin_schedule(std::span<const Tokens> lengths, double bucket_tokens, int cp, bool rollback) {
  LCSIM_CHECK(cp >= 1, "round robin needs a CP group of at least one rank");
  const std::vector<std::size_t> order = identity_order(lengths.size());
  CpAssignment out;
  CpBuckets buckets(lengths, {}, order, bucket_tokens, cp);
  for (std::size_t pos = 0; pos < order.size();) {
    const std::size_t seq = order[pos];
    if (const int t = buckets.argmax_remaining(); buckets.remaining(t) >= buckets.length(seq)) {
      buckets.place_local(seq, t);
    } else {
      const Step step = shard_or_roll_back(buckets, seq, rollback, out);
      if (step == Step::Failed) return CpAssignment{{}, false, true, out.rollbacks};
      if (step == Step::Retry) continue;
    }
    ++pos;
  }
  out.ranks = buckets.take_ranks();
  return out;
}

}  // namespace lcsim::skrull
