#include "model/workload.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "base/errors.hpp"
#include "base/suggest.hpp"

namespace lcsim {

Dataset::Dataset(std::string name, std::vector<Sequence> sequences)
    : name_(std::move(name)), sequences_(std::move(sequences)) {
  for (const auto& sequence : sequences_) {
    if (sequence.tokens <= 0 || sequence.tokens > kMaxSequenceTokens)
      throw InputError("dataset '" + name_ + "': sequence " + std::to_string(sequence.id) + " has " +
                       std::to_string(sequence.tokens) + " tokens (must be in 1.." +
                       std::to_string(kMaxSequenceTokens) + ")");
    total_tokens_ += sequence.tokens;
    longest_ = std::max(longest_, sequence.tokens);
  }
}

namespace {

constexpr Tokens K = kKiloTokens;

// Every number below is documented, with its source, in DISTRIBUTIONS.md (same folder). Shares marked "Skrull
// Table 1" are the paper's; every other anchor is an lcsim assumption and the `source` string says so.
std::vector<LengthDistribution> make_named_distributions() {
  std::vector<LengthDistribution> all;
  all.push_back({"wikipedia",
                 32,
                 {400, 1 * K, 4 * K, 8 * K, 32 * K, 78 * K},
                 {0.50, 0.8788, 0.9934, 0.9992, 0.9999, 1.0},
                 "Skrull Table 1 (Wikipedia): <1K 87.88%, <4K 99.34%, <8K 99.92%, <32K 99.99%, <128K 100.0%, longest "
                 "78K; lcsim assumptions: shortest 32 tokens, median 400 tokens"});
  all.push_back({"lmsyschat1m",
                 16,
                 {300, 1 * K, 4 * K, 8 * K, 32 * K, 128 * K, 1643 * K},
                 {0.50, 0.8712, 0.9935, 0.9987, 0.9998, 0.9999, 1.0},
                 "Skrull Table 1 (LMsysChat1M): <1K 87.12%, <4K 99.35%, <8K 99.87%, <32K 99.98%, <128K 99.99%, "
                 "longest 1643K; lcsim assumptions: shortest 16 tokens, median 300 tokens"});
  all.push_back({"chatqa2-long-sft",
                 32,
                 {1 * K, 4 * K, 8 * K, 32 * K, 99 * K},
                 {0.2192, 0.3148, 0.4043, 0.9986, 1.0},
                 "Skrull Table 1 (ChatQA2-Long-SFT): <1K 21.92%, <4K 31.48%, <8K 40.43%, <32K 99.86%, <128K 100.0%, "
                 "longest 99K; lcsim assumption: shortest 32 tokens"});
  all.push_back({"tulu3",
                 16,
                 {256, 512, 1 * K, 2 * K, 4 * K, 8 * K, 16 * K, 32 * K},
                 {0.26, 0.52, 0.77, 0.91, 0.975, 0.995, 0.9993, 1.0},
                 "lcsim assumption (no published length table): Tulu 3 SFT mixture as trained by HBP at 32K; short "
                 "chat/instruction samples, median 512 tokens, mean ~0.9K (near HBP Table 3's Ave-T of 0.8-0.9K "
                 "with random batching), longest 32K"});
  all.push_back({"longcite",
                 1 * K,
                 {4 * K, 8 * K, 16 * K, 32 * K, 64 * K, 128 * K},
                 {0.03, 0.10, 0.30, 0.60, 0.86, 1.0},
                 "lcsim assumption (no published length table): LongCite-45k as trained by HBP at 128K; long-context "
                 "QA, 90% of samples 8K-128K, median ~27K, longest 128K"});
  all.push_back({"commoncrawl",
                 32,
                 {256, 512, 1 * K, 2 * K, 4 * K, 8 * K, 16 * K, 32 * K - 1, 32 * K},
                 {0.40, 0.67, 0.86, 0.955, 0.985, 0.9955, 0.9988, 0.9998, 1.0},
                 "lcsim assumption (no published length table): RefinedWeb (CommonCrawl) documents as used by "
                 "Hydraulis at 32K context; mean ~0.65K tokens (dataset card: 500-650B tokens in 968M documents), "
                 "0.12% above 16K, 0.02% truncated to exactly 32K"});
  all.push_back({"github",
                 16,
                 {256, 512, 1 * K, 2 * K, 4 * K, 8 * K, 16 * K, 32 * K - 1, 32 * K},
                 {0.20, 0.37, 0.56, 0.73, 0.85, 0.93, 0.975, 0.99, 1.0},
                 "lcsim assumption (no published length table): codeparrot github-code files as used by Hydraulis at "
                 "32K context; heavier tail than commoncrawl, median ~0.8K tokens, 1% truncated to exactly 32K"});
  all.push_back({"wikipedia-galvatron",
                 1,
                 {256, 512, 1 * K, 2 * K, 4 * K, 8 * K, 16 * K, 32 * K, 64 * K, 128 * K, 192 * K, 384 * K},
                 {0.4165, 0.626855, 0.788089, 0.896471, 0.956053, 0.984012, 0.995233, 0.998698, 0.999725, 0.999953,
                  0.999983, 1.0},
                 "measured: the 1,000,000 Wikipedia lengths FlexSP released (Hetu-Galvatron, branch flexsp, "
                 "galvatron/datasets/wikipedia.txt), cumulative shares at each anchor, the 2 of 1M above 384K dropped "
                 "as FlexSP drops sequences beyond its context; mean ~1.0K tokens, median 347"});
  // WLB-LLM Fig. 3 (left): 20 bins of 128K / 20 tokens, counts read off the histogram (only the first, 96,784, is
  // printed); cumulative shares of the 99,009 documents read.
  all.push_back({"wlbllm-fig3",
                 32,
                 {6553,  13107, 19660, 26214, 32768, 39321,  45875,  52428,  58982,  65536,
                  72089, 78643, 85196, 91750, 98304, 104857, 111411, 117964, 124518, 131072},
                 {0.977527, 0.989243, 0.992374, 0.99399,  0.994798, 0.995556, 0.99601,  0.996364, 0.996616, 0.996818,
                  0.99702,  0.997323, 0.997576, 0.997778, 0.998131, 0.998434, 0.998636, 0.998788, 0.998939, 1.0},
                 "WLB-LLM Fig. 3 (left) as read from the plot: pre-training documents of a 128K job, 97.8% within the "
                 "first bin (6.5K; its shape is not published: log-uniform from 32 is lcsim's assumption), 0.1% in "
                 "the last (at the window); documents under 64K hold ~83% of the tokens (paper: over 75%)"});
  return all;
}

std::string known_names() {
  std::string names;
  for (const auto& distribution : named_distributions()) {
    if (!names.empty()) names += ", ";
    names += distribution.name;
  }
  return names;
}

// A distribution is built in code today, but scenarios may one day carry their own; check every invariant the
// sampler relies on so a bad table fails loudly instead of sampling out of range.
void check_distribution(const LengthDistribution& d) {
  const auto fail = [&](const std::string& message) {
    throw InputError("length distribution '" + d.name + "': " + message);
  };
  if (d.upper.empty()) fail("no bins");
  if (d.upper.size() != d.share.size())
    fail(std::to_string(d.upper.size()) + " upper bounds but " + std::to_string(d.share.size()) + " shares");
  if (d.shortest < 1) fail("shortest must be at least 1 token, got " + std::to_string(d.shortest));
  if (d.upper.front() < d.shortest)
    fail("first upper bound " + std::to_string(d.upper.front()) + " is below shortest " + std::to_string(d.shortest));
  for (std::size_t i = 0; i < d.upper.size(); ++i) {
    if (i > 0 && d.upper[i] <= d.upper[i - 1]) fail("upper bounds must be strictly increasing");
    if (!(d.share[i] >= 0.0 && d.share[i] <= 1.0)) fail("shares must lie in [0, 1]");
    if (i > 0 && d.share[i] < d.share[i - 1]) fail("cumulative shares must not decrease");
  }
  if (d.share.back() != 1.0) fail("the last cumulative share must be 1");
}

}  // namespace

const std::vector<LengthDistribution>& named_distributions() {
  static const std::vector<LengthDistribution> all = [] {
    auto built = make_named_distributions();
    for (const auto& d : built) check_distribution(d);
    return built;
  }();
  return all;
}

const LengthDistribution& named_distribution(std::string_view name) {
  for (const auto& distribution : named_distributions())
    if (distribution.name == name) return distribution;
  std::vector<std::string> names;
  for (const auto& distribution : named_distributions()) names.push_back(distribution.name);
  throw InputError("unknown length distribution '" + std::string(name) + "'" + did_you_mean(name, names) +
                   " (known: " + known_names() + ")");
}

LengthSampler::LengthSampler(const LengthDistribution& distribution, std::uint64_t seed)
    : distribution_(&distribution), rng_(seed) {
  check_distribution(distribution);
}

Tokens LengthSampler::sample() {
  const LengthDistribution& d = *distribution_;
  // Bin: the first whose cumulative share exceeds u; u < 1 == share.back(), and empty bins are never chosen.
  const double u = rng_.uniform();
  std::size_t bin = 0;
  while (u >= d.share[bin]) ++bin;
  const Tokens low = bin == 0 ? d.shortest : d.upper[bin - 1] + 1;
  const Tokens high = d.upper[bin];
  // Log-uniform over the real interval [low, high + 1), floored: integer k gets mass ln((k+1)/k), so every
  // integer of [low, high] is reachable and the bin boundaries hold exactly.
  const double a = static_cast<double>(low);
  const double b = static_cast<double>(high + 1);
  const double x = a * std::exp(rng_.uniform() * std::log(b / a));
  // Only floating-point rounding at the interval ends can step outside [low, high].
  return std::clamp(static_cast<Tokens>(x), low, high);
}

Dataset sample_dataset(std::string name, const std::vector<MixComponent>& components, std::size_t count,
                       std::uint64_t seed, std::int64_t first_id) {
  const std::string where = "dataset '" + name + "': ";
  if (components.empty()) throw InputError(where + "no length distribution to sample from");
  if (count == 0) throw InputError(where + "sequence count must be positive");
  double total_weight = 0;
  for (std::size_t i = 0; i < components.size(); ++i) {
    const auto& component = components[i];
    const std::string which = "mixture component " + std::to_string(i);
    if (component.distribution == nullptr) throw InputError(where + which + " has no distribution");
    if (!std::isfinite(component.weight) || component.weight <= 0)
      throw InputError(where + which + " (" + component.distribution->name +
                       "): weight must be a positive finite number, got " + std::to_string(component.weight));
    total_weight += component.weight;
  }

  // Component i draws from its own stream; component 0 uses `seed` itself, so a one-component dataset is exactly
  // LengthSampler(distribution, seed)'s sequence. The component choice uses a third, independent stream.
  std::vector<LengthSampler> samplers;
  std::vector<double> cumulative;
  samplers.reserve(components.size());
  double running = 0;
  for (std::size_t i = 0; i < components.size(); ++i) {
    samplers.emplace_back(*components[i].distribution, seed ^ (i * 0xD1B54A32D192ED03ULL));
    running += components[i].weight;
    cumulative.push_back(running / total_weight);
  }
  cumulative.back() = 1.0;  // exact, whatever the rounding of the sum
  Rng chooser(seed ^ 0x6C656E6774686D78ULL);

  std::vector<Sequence> sequences;
  sequences.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    std::size_t pick = 0;
    if (samplers.size() > 1) {
      const double u = chooser.uniform();
      while (u >= cumulative[pick]) ++pick;
    }
    sequences.push_back({first_id + static_cast<std::int64_t>(i), samplers[pick].sample()});
  }
  return Dataset(std::move(name), std::move(sequences));
}

namespace {

/// The length at cumulative share p in [0, 1) of `d`: the inverse of LengthSampler's draw (bin, then log-uniform).
Tokens length_quantile(const LengthDistribution& d, double p) {
  std::size_t bin = 0;
  while (p >= d.share[bin]) ++bin;
  const Tokens low = bin == 0 ? d.shortest : d.upper[bin - 1] + 1;
  const Tokens high = d.upper[bin];
  const double below = bin == 0 ? 0.0 : d.share[bin - 1];
  const double within = (p - below) / (d.share[bin] - below);
  const double a = static_cast<double>(low);
  const double b = static_cast<double>(high + 1);
  return std::clamp(static_cast<Tokens>(a * std::exp(within * std::log(b / a))), low, high);
}

}  // namespace

std::vector<Tokens> distribution_lengths(const std::vector<MixComponent>& components, std::size_t count) {
  if (components.empty() || count == 0)
    throw std::invalid_argument("distribution_lengths: needs a component and a positive count");
  double total_weight = 0;
  for (const auto& c : components) total_weight += c.weight;
  std::vector<Tokens> lengths;
  for (const auto& c : components) {
    const auto m = std::max<std::size_t>(
        1, static_cast<std::size_t>(std::llround(static_cast<double>(count) * c.weight / total_weight)));
    for (std::size_t i = 0; i < m; ++i)
      lengths.push_back(length_quantile(*c.distribution, (static_cast<double>(i) + 0.5) / static_cast<double>(m)));
  }
  return lengths;
}

}  // namespace lcsim
