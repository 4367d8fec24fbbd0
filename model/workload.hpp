#pragma once
// Sequences, datasets and seeded length samplers for named length distributions.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/random.hpp"

namespace lcsim {

using Tokens = std::int64_t;
/// "K" in lcsim means 1024 tokens (BucketSize 26K = 26,624 tokens), as in the papers' length buckets.
inline constexpr Tokens kKiloTokens = 1024;

struct Sequence {
  std::int64_t id = 0;
  Tokens tokens = 0;
  friend bool operator==(const Sequence&, const Sequence&) = default;
};

/// The longest sequence lcsim accepts: 2^30 tokens, ~1000x the longest published context, and small enough that a
/// run's token sums cannot overflow (at most 2e6 sequences, formats/scenario.hpp).
inline constexpr Tokens kMaxSequenceTokens = Tokens{1} << 30;

/// An ordered collection of sequences (epoch order).
class Dataset {
 public:
  Dataset() = default;
  Dataset(std::string name, std::vector<Sequence> sequences);

  const std::string& name() const { return name_; }
  const std::vector<Sequence>& sequences() const { return sequences_; }
  std::size_t size() const { return sequences_.size(); }
  Tokens total_tokens() const { return total_tokens_; }
  Tokens longest() const { return longest_; }

 private:
  std::string name_;
  std::vector<Sequence> sequences_;
  Tokens total_tokens_ = 0;
  Tokens longest_ = 0;
};

/// A length distribution given by its cumulative shares: share[i] of all sequences are at most upper[i] tokens.
/// Inside a bin lengths are log-uniform. `anchors` beyond a paper's table are lcsim's assumptions and say so in
/// `source`.
struct LengthDistribution {
  std::string name;
  Tokens shortest = 1;
  std::vector<Tokens> upper;  ///< strictly increasing bin upper bounds; the last is the longest sequence
  std::vector<double> share;  ///< cumulative share at each upper bound, increasing, last == 1
  std::string source;         ///< where the numbers come from
};

/// The built-in distributions: wikipedia, lmsyschat1m, chatqa2-long-sft (Skrull Table 1), tulu3, longcite,
/// commoncrawl, github (documented approximations), wikipedia-galvatron (measured on FlexSP's released lengths),
/// wlbllm-fig3 (read off WLB-LLM Fig. 3).
const std::vector<LengthDistribution>& named_distributions();
/// Throws InputError listing the known names when `name` is not one of them.
const LengthDistribution& named_distribution(std::string_view name);

/// Draws lengths from a distribution, deterministically from a seed.
class LengthSampler {
 public:
  LengthSampler(const LengthDistribution& distribution, std::uint64_t seed);
  Tokens sample();

 private:
  const LengthDistribution* distribution_;
  Rng rng_;
};

/// One component of a mixture of distributions (e.g. tulu3 + longcite).
struct MixComponent {
  const LengthDistribution* distribution = nullptr;
  double weight = 1.0;
};

/// `count` sequences with ids first_id.. drawn from the weighted mixture `components`.
Dataset sample_dataset(std::string name, const std::vector<MixComponent>& components, std::size_t count,
                       std::uint64_t seed, std::int64_t first_id = 0);

/// The mixture itself as about `count` lengths, without sampling noise: component c contributes
/// max(1, round(count w_c / sum w)) lengths at its quantiles (i + 1/2) / m_c, ascending within each component.
std::vector<Tokens> distribution_lengths(const std::vector<MixComponent>& components, std::size_t count);

}  // namespace lcsim
