// Named length distributions, the seeded sampler and mixtures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "base/errors.hpp"
#include "model/workload.hpp"

namespace lcsim {
namespace workload_test {

constexpr Tokens K = kKiloTokens;
constexpr std::size_t kSamples = 1'000'000;

std::vector<Tokens> draw(const LengthDistribution& distribution, std::size_t count, std::uint64_t seed) {
  LengthSampler sampler(distribution, seed);
  std::vector<Tokens> lengths(count);
  for (auto& length : lengths) length = sampler.sample();
  return lengths;
}

double share_below(const std::vector<Tokens>& lengths, Tokens threshold) {
  const auto n = std::count_if(lengths.begin(), lengths.end(), [&](Tokens t) { return t < threshold; });
  return static_cast<double>(n) / static_cast<double>(lengths.size());
}

double share_at_most(const std::vector<Tokens>& lengths, Tokens bound) {
  return share_below(lengths, bound + 1);
}

// Skrull Table 1, typed in from the paper independently of workload.cpp: shares below 1K, 4K, 8K, 32K, 128K.
struct PublishedRow {
  const char* name;
  double below[5];
  Tokens longest;
};
constexpr Tokens kThresholds[5] = {1 * K, 4 * K, 8 * K, 32 * K, 128 * K};
constexpr PublishedRow kSkrullTable1[] = {
    {"wikipedia", {0.8788, 0.9934, 0.9992, 0.9999, 1.000}, 78 * K},
    {"lmsyschat1m", {0.8712, 0.9935, 0.9987, 0.9998, 0.9999}, 1643 * K},
    {"chatqa2-long-sft", {0.2192, 0.3148, 0.4043, 0.9986, 1.000}, 99 * K},
};

TEST(WorkloadDistributionTest, SkrullTable1SharesHoldWithinOnePoint) {
  for (const auto& row : kSkrullTable1) {
    SCOPED_TRACE(row.name);
    const auto& distribution = named_distribution(row.name);
    const auto lengths = draw(distribution, kSamples, 7);
    for (int i = 0; i < 5; ++i)
      EXPECT_NEAR(share_below(lengths, kThresholds[i]), row.below[i], 0.01) << "below " << kThresholds[i];
    EXPECT_LE(*std::max_element(lengths.begin(), lengths.end()), row.longest);
    EXPECT_GE(*std::min_element(lengths.begin(), lengths.end()), distribution.shortest);
    EXPECT_EQ(distribution.upper.back(), row.longest);
  }
}

TEST(WorkloadDistributionTest, EveryDeclaredAnchorHoldsWithinOnePoint) {
  ASSERT_EQ(named_distributions().size(), 9u);
  std::uint64_t seed = 100;
  for (const auto& distribution : named_distributions()) {
    SCOPED_TRACE(distribution.name);
    EXPECT_FALSE(distribution.source.empty());
    const auto lengths = draw(distribution, kSamples, ++seed);
    for (std::size_t i = 0; i < distribution.upper.size(); ++i)
      EXPECT_NEAR(share_at_most(lengths, distribution.upper[i]), distribution.share[i], 0.01)
          << "at most " << distribution.upper[i];
    EXPECT_LE(*std::max_element(lengths.begin(), lengths.end()), distribution.upper.back());
    EXPECT_GE(*std::min_element(lengths.begin(), lengths.end()), distribution.shortest);
  }
}

TEST(WorkloadDistributionTest, ApproximationsStayInsideTheirContextLengths) {
  EXPECT_EQ(named_distribution("tulu3").upper.back(), 32 * K);
  EXPECT_EQ(named_distribution("longcite").upper.back(), 128 * K);
  EXPECT_EQ(named_distribution("commoncrawl").upper.back(), 32 * K);
  EXPECT_EQ(named_distribution("github").upper.back(), 32 * K);
  // Sequences truncated to the context length form a point mass at exactly 32K.
  const auto lengths = draw(named_distribution("github"), 200'000, 3);
  const double at_context = static_cast<double>(std::count(lengths.begin(), lengths.end(), 32 * K)) / 200'000.0;
  EXPECT_NEAR(at_context, 0.01, 0.002);
  // Labelled as lcsim's assumptions, not as published numbers.
  for (const char* name : {"tulu3", "longcite", "commoncrawl", "github"})
    EXPECT_NE(named_distribution(name).source.find("assumption"), std::string::npos) << name;
}

TEST(WorkloadDistributionTest, UnknownNameListsTheKnownOnes) {
  try {
    named_distribution("wikipedai");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("unknown length distribution 'wikipedai'"), std::string::npos) << message;
    EXPECT_NE(message.find("known: wikipedia, lmsyschat1m, chatqa2-long-sft, tulu3, longcite, commoncrawl, github, "
                           "wikipedia-galvatron, wlbllm-fig3"),
              std::string::npos)
        << message;
  }
}

TEST(WorkloadSamplerTest, LogUniformInsideABin) {
  // One bin [1, 1023]: x log-uniform on [1, 1024), floored. P(t <= 31) = ln 32 / ln 1024 = 1/2 and
  // P(t == 1) = ln 2 / ln 1024 = 1/10.
  const LengthDistribution d{"test", 1, {1023}, {1.0}, "test"};
  const auto lengths = draw(d, 200'000, 11);
  EXPECT_NEAR(share_at_most(lengths, 31), 0.5, 0.005);
  EXPECT_NEAR(share_at_most(lengths, 1), 0.1, 0.005);
  EXPECT_EQ(*std::max_element(lengths.begin(), lengths.end()), 1023);
  EXPECT_EQ(*std::min_element(lengths.begin(), lengths.end()), 1);
}

TEST(WorkloadSamplerTest, BinEdgesAreExactAndEmptyBinsAreNeverDrawn) {
  // Bins: [10, 10] with 30%, (10, 20] empty, (20, 21] with 70%.
  const LengthDistribution d{"edges", 10, {10, 20, 21}, {0.3, 0.3, 1.0}, "test"};
  const auto lengths = draw(d, 100'000, 5);
  std::size_t tens = 0;
  for (const Tokens t : lengths) {
    ASSERT_TRUE(t == 10 || t == 21) << t;
    tens += t == 10 ? 1 : 0;
  }
  EXPECT_NEAR(static_cast<double>(tens) / 100'000.0, 0.3, 0.01);
}

TEST(WorkloadSamplerTest, SameSeedSameLengthsOtherSeedOtherLengths) {
  const auto& d = named_distribution("lmsyschat1m");
  EXPECT_EQ(draw(d, 1000, 42), draw(d, 1000, 42));
  EXPECT_NE(draw(d, 1000, 42), draw(d, 1000, 43));
}

TEST(WorkloadSamplerTest, RejectsMalformedDistributions) {
  const auto rejects = [](LengthDistribution d) { EXPECT_THROW(LengthSampler(d, 1), InputError) << d.source; };
  rejects({"x", 1, {}, {}, "no bins"});
  rejects({"x", 1, {10, 20}, {1.0}, "size mismatch"});
  rejects({"x", 0, {10}, {1.0}, "shortest 0"});
  rejects({"x", 11, {10}, {1.0}, "shortest above first bound"});
  rejects({"x", 1, {20, 10}, {0.5, 1.0}, "bounds not increasing"});
  rejects({"x", 1, {10, 20}, {0.6, 0.5}, "shares decreasing"});
  rejects({"x", 1, {10, 20}, {0.5, 0.99}, "last share below 1"});
  rejects({"x", 1, {10, 20}, {-0.1, 1.0}, "negative share"});
}

TEST(WorkloadDatasetTest, SingleComponentIsTheSamplerSequence) {
  const auto& d = named_distribution("wikipedia");
  const Dataset dataset = sample_dataset("wiki", {{&d, 1.0}}, 500, 9, 1000);
  EXPECT_EQ(dataset.name(), "wiki");
  ASSERT_EQ(dataset.size(), 500u);
  const auto expected = draw(d, 500, 9);
  Tokens total = 0;
  for (std::size_t i = 0; i < 500; ++i) {
    EXPECT_EQ(dataset.sequences()[i].id, 1000 + static_cast<std::int64_t>(i));
    EXPECT_EQ(dataset.sequences()[i].tokens, expected[i]);
    total += expected[i];
  }
  EXPECT_EQ(dataset.total_tokens(), total);
  EXPECT_EQ(dataset.longest(), *std::max_element(expected.begin(), expected.end()));
}

TEST(WorkloadDatasetTest, MixtureWeightsAreRespected) {
  // Disjoint supports tell the components apart: short in [10, 20], long in [1000, 2000].
  const LengthDistribution short_d{"short", 10, {20}, {1.0}, "test"};
  const LengthDistribution long_d{"long", 1000, {2000}, {1.0}, "test"};
  // Weights need not sum to 1: 4.5 : 0.5 is 90% : 10%.
  const Dataset dataset = sample_dataset("mix", {{&short_d, 4.5}, {&long_d, 0.5}}, 100'000, 17);
  std::size_t short_count = 0;
  for (const auto& s : dataset.sequences()) {
    ASSERT_TRUE((s.tokens >= 10 && s.tokens <= 20) || (s.tokens >= 1000 && s.tokens <= 2000)) << s.tokens;
    short_count += s.tokens <= 20 ? 1 : 0;
  }
  EXPECT_NEAR(static_cast<double>(short_count) / 100'000.0, 0.9, 0.01);
  // Deterministic, and the seed matters.
  EXPECT_EQ(dataset.sequences(), sample_dataset("mix", {{&short_d, 4.5}, {&long_d, 0.5}}, 100'000, 17).sequences());
  EXPECT_NE(dataset.sequences(), sample_dataset("mix", {{&short_d, 4.5}, {&long_d, 0.5}}, 100'000, 18).sequences());
}

// The distribution without sampling noise: lengths at the quantiles (i + 1/2) / m of the sampler's own law.
TEST(WorkloadDatasetTest, DistributionLengthsAreTheQuantilesOfTheSamplersLaw) {
  // One bin [1, 1023], log-uniform on [1, 1024): the quantile at p is floor(1024^p). With m = 4 the points are
  // p = 1/8, 3/8, 5/8, 7/8: 1024^(1/8) = 2.38, 1024^(3/8) = 13.45, 1024^(5/8) = 76.1, 1024^(7/8) = 430.5.
  const LengthDistribution one{"test", 1, {1023}, {1.0}, "test"};
  EXPECT_EQ(distribution_lengths({{&one, 1.0}}, 4), (std::vector<Tokens>{2, 13, 76, 430}));
  // Empty bins hold no point; the bin edges are exact ([10, 10] holds 30%, (20, 21] 70%).
  const LengthDistribution edges{"edges", 10, {10, 20, 21}, {0.3, 0.3, 1.0}, "test"};
  const auto e = distribution_lengths({{&edges, 1.0}}, 10);
  EXPECT_EQ(std::count(e.begin(), e.end(), 10), 3);
  EXPECT_EQ(std::count(e.begin(), e.end(), 21), 7);
  // A mixture: each component its weight's share of the points (at least one), on its own support.
  const LengthDistribution short_d{"short", 10, {20}, {1.0}, "test"};
  const LengthDistribution long_d{"long", 1000, {2000}, {1.0}, "test"};
  const auto mix = distribution_lengths({{&short_d, 4.5}, {&long_d, 0.5}}, 1000);
  ASSERT_EQ(mix.size(), 1000u);
  EXPECT_EQ(std::count_if(mix.begin(), mix.end(), [](Tokens t) { return t <= 20; }), 900);
  EXPECT_EQ(distribution_lengths({{&short_d, 1e6}, {&long_d, 1.0}}, 100).size(), 101u);
  // The same law the sampler draws: a million draws of wikipedia have the quantile points' mean within 1%.
  const auto& wiki = named_distribution("wikipedia");
  const auto points = distribution_lengths({{&wiki, 1.0}}, 1 << 17);
  const auto drawn = draw(wiki, kSamples, 3);
  const auto mean = [](const std::vector<Tokens>& v) {
    double sum = 0;
    for (Tokens t : v) sum += static_cast<double>(t);
    return sum / static_cast<double>(v.size());
  };
  EXPECT_NEAR(mean(points) / mean(drawn), 1.0, 0.01);
  EXPECT_NEAR(share_below(points, 4 * K), share_below(drawn, 4 * K), 0.005);
}

TEST(WorkloadDatasetTest, InvalidMixturesAreInputErrors) {
  const auto& d = named_distribution("tulu3");
  EXPECT_THROW(sample_dataset("m", {}, 10, 1), InputError);
  EXPECT_THROW(sample_dataset("m", {{&d, 0.0}}, 10, 1), InputError);
  EXPECT_THROW(sample_dataset("m", {{&d, 1.0}, {&d, -1.0}}, 10, 1), InputError);
  EXPECT_THROW(sample_dataset("m", {{&d, std::nan("")}}, 10, 1), InputError);
  EXPECT_THROW(sample_dataset("m", {{&d, std::numeric_limits<double>::infinity()}}, 10, 1), InputError);
  EXPECT_THROW(sample_dataset("m", {{nullptr, 1.0}}, 10, 1), InputError);
  EXPECT_THROW(sample_dataset("m", {{&d, 1.0}}, 0, 1), InputError);
  try {
    sample_dataset("m", {{&d, 1.0}, {&named_distribution("longcite"), 0.0}}, 10, 1);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("mixture component 1 (longcite)"), std::string::npos) << e.what();
  }
}

TEST(WorkloadDatasetTest, DatasetTotalsAndRejectsNonPositiveLengths) {
  const Dataset dataset("d", {{0, 5}, {1, 12}, {2, 3}});
  EXPECT_EQ(dataset.size(), 3u);
  EXPECT_EQ(dataset.total_tokens(), 20);
  EXPECT_EQ(dataset.longest(), 12);
  EXPECT_THROW(Dataset("d", {{0, 5}, {1, 0}}), InputError);
}

}  // namespace workload_test
}  // namespace lcsim

namespace lcsim {
namespace workload_test {

TEST(WorkloadDatasetTest, RefusesSequencesOverTheLimit) {
  EXPECT_THROW(Dataset("d", {{0, 0}}), InputError);
  EXPECT_THROW(Dataset("d", {{0, kMaxSequenceTokens + 1}}), InputError);
  // At the limit the sums still fit: the most sequences a run takes, each as long as allowed.
  const Dataset longest("d", {{0, kMaxSequenceTokens}, {1, kMaxSequenceTokens}});
  EXPECT_EQ(longest.total_tokens(), 2 * kMaxSequenceTokens);
}

}  // namespace workload_test
}  // namespace lcsim
