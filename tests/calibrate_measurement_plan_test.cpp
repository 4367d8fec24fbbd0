// Sweep planning of `lcsim-gpu calibrate`: which points are measured, with how many GPUs, within what memory.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "base/errors.hpp"
#include "calibrate/measure/measurement_plan.hpp"

namespace lcsim {
namespace calibrate_measurement_plan_test {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

int sum(const std::vector<int>& v) {
  return std::accumulate(v.begin(), v.end(), 0);
}

bool mentions(const std::vector<std::string>& lines, const std::string& part) {
  for (const auto& l : lines) {
    if (l.find(part) != std::string::npos) return true;
  }
  return false;
}

TEST(CalibrateSweep, FullPlanOnOneGpuCoversTheDocumentedRanges) {
  const auto plan = plan_measurements(named_model("Qwen2.5-7B"), {80 * kGiB, 1, false, 1});
  EXPECT_EQ(plan.warmup, 5);
  EXPECT_EQ(plan.repetitions, 20);
  EXPECT_EQ(plan.gemm_tokens, (std::vector<Tokens>{128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768}));
  ASSERT_EQ(plan.attention.size(), 9u);
  EXPECT_EQ(plan.attention.front().seq_len, 128);
  EXPECT_EQ(plan.attention.front().sequences, 256);  // packed to 32768 tokens
  EXPECT_EQ(plan.attention.back().seq_len, 32768);
  EXPECT_EQ(plan.attention.back().sequences, 1);
  // Lone sequences of 16, 128 and 1024 tokens (the launch-bound end), then 4 compositions of 4096 and 4 of 16384.
  ASSERT_EQ(plan.layer_batches.size(), 11u);
  EXPECT_EQ(plan.layer_batches[0], std::vector<int>{16});
  EXPECT_EQ(plan.layer_batches[1], std::vector<int>{128});
  EXPECT_EQ(plan.layer_batches[2], std::vector<int>{1024});
  for (std::size_t i = 3; i < 7; ++i) EXPECT_EQ(sum(plan.layer_batches[i]), 4096);
  for (std::size_t i = 7; i < 11; ++i) EXPECT_EQ(sum(plan.layer_batches[i]), 16384);
  EXPECT_EQ(plan.layer_recompute, (std::vector<Recompute>{Recompute::None, Recompute::Selective, Recompute::Full}));
  ASSERT_EQ(plan.memory.size(), 3 * named_models().size());
  EXPECT_EQ(plan.memory.front().layers, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(plan.memory.front().tokens, 2048);
  EXPECT_TRUE(plan.collectives.empty());
  EXPECT_TRUE(plan.ulysses.empty());
  EXPECT_TRUE(mentions(plan.skipped, "one GPU visible"));
  EXPECT_EQ(plan.optimizer_parameters.size(), 5u);
}

TEST(CalibrateSweep, EveryGroupSizeAndOpOnEightGpus) {
  const auto plan = plan_measurements(named_model("Qwen2.5-0.5B"), {80 * kGiB, 8, false, 1});
  // Groups 2, 4, 8: four collectives each, plus send_recv between 2.
  ASSERT_EQ(plan.collectives.size(), 13u);
  int send_recv = 0;
  for (const auto& c : plan.collectives) {
    EXPECT_TRUE(c.group_size == 2 || c.group_size == 4 || c.group_size == 8);
    ASSERT_EQ(c.bytes.size(), 21u);  // 1 KiB .. 1 GiB, x2
    EXPECT_EQ(c.bytes.front(), 1024);
    EXPECT_EQ(c.bytes.back(), kGiB);
    if (c.op == CollectiveOp::SendRecv) {
      ++send_recv;
      EXPECT_EQ(c.group_size, 2);
    }
  }
  EXPECT_EQ(send_recv, 1);
  ASSERT_EQ(plan.ulysses.size(), 9u);
  EXPECT_EQ(plan.ulysses[0].cp, 2);
  EXPECT_EQ(plan.ulysses[0].tokens_per_gpu, 2048);  // 4096-token sequence over 2 GPUs
  EXPECT_EQ(plan.ulysses[8].cp, 8);
  EXPECT_EQ(plan.ulysses[8].tokens_per_gpu, 8192);  // 65536 over 8
  EXPECT_FALSE(mentions(plan.skipped, "one GPU"));
}

TEST(CalibrateSweep, GroupSizesAndMessageSizes) {
  EXPECT_TRUE(collective_groups(1).empty());
  EXPECT_EQ(collective_groups(2), (std::vector<int>{2}));
  EXPECT_EQ(collective_groups(6), (std::vector<int>{2, 4, 6}));
  EXPECT_EQ(collective_groups(8), (std::vector<int>{2, 4, 8}));
  const auto quick = collective_sizes(true);
  ASSERT_EQ(quick.size(), 11u);
  EXPECT_EQ(quick[1], 4096);
  EXPECT_EQ(quick.back(), kGiB);
}

TEST(CalibrateSweep, CompositionsFillTheBudgetExactly) {
  const auto c = layer_compositions(4096, 11);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0], (std::vector<int>{4096}));
  EXPECT_EQ(c[1], std::vector<int>(8, 512));
  ASSERT_EQ(c[2].size(), 9u);
  EXPECT_EQ(c[2][0], 2048);
  EXPECT_EQ(c[2][1], 256);
  for (const auto& batch : c) EXPECT_EQ(sum(batch), 4096);
  for (std::size_t i = 0; i + 1 < c[3].size(); ++i) {
    EXPECT_GE(c[3][i], 64);
    EXPECT_LE(c[3][i], 2048);
  }
  EXPECT_EQ(layer_compositions(4096, 11), c);        // deterministic
  EXPECT_NE(layer_compositions(4096, 12)[3], c[3]);  // the seed matters
  EXPECT_EQ(sum(layer_compositions(5000, 1)[1]), 5000);
  EXPECT_THROW(layer_compositions(100, 1), std::invalid_argument);
}

TEST(CalibrateSweep, PointsThatDoNotFitAreDroppedAndListed) {
  const auto& model = named_model("LLaMA3.1-70B");
  const double memory = 8 * kGiB;
  const auto plan = plan_measurements(model, {memory, 1, false, 1});
  EXPECT_LT(plan.gemm_tokens.size(), 9u);
  EXPECT_FALSE(plan.gemm_tokens.empty());
  for (Tokens t : plan.gemm_tokens) EXPECT_LE(estimate_gemm_bytes(model, t), 0.8 * memory);
  EXPECT_TRUE(mentions(plan.skipped, "GEMMs at 32768 tokens"));
  EXPECT_TRUE(mentions(plan.skipped, "80% of free memory"));
  for (const auto& probe : plan.memory) {
    EXPECT_LE(estimate_layer_bytes(probe.model, probe.tokens, 3), 0.8 * memory) << probe.model.name;
  }
}

TEST(CalibrateSweep, QuickPlanIsASmallerSubset) {
  const auto full = plan_measurements(named_model("Qwen2.5-0.5B"), {80 * kGiB, 8, false, 1});
  const auto quick = plan_measurements(named_model("Qwen2.5-0.5B"), {80 * kGiB, 8, true, 1});
  EXPECT_EQ(quick.gemm_tokens, (std::vector<Tokens>{128, 512, 2048, 8192, 32768}));
  EXPECT_EQ(quick.repetitions, 5);
  EXPECT_EQ(quick.layer_batches.size(), 5u);  // the 16-token sequence and the compositions of 4096 tokens
  EXPECT_EQ(quick.memory.front().layers, (std::vector<int>{1, 2}));
  EXPECT_EQ(quick.collectives.front().bytes.size(), 11u);
  EXPECT_LT(quick.attention.size(), full.attention.size());
}

TEST(CalibrateSweep, BadOptionsAreInputErrors) {
  EXPECT_THROW(plan_measurements(named_model("Qwen2.5-7B"), {0, 1, false, 1}), InputError);
  EXPECT_THROW(plan_measurements(named_model("Qwen2.5-7B"), {80 * kGiB, 0, false, 1}), InputError);
  ModelConfig odd = named_model("Qwen2.5-7B");
  odd.head_dim = 96;
  EXPECT_THROW(plan_measurements(odd, {80 * kGiB, 1, false, 1}), InputError);
}

TEST(CalibrateSweep, RotationSetsExceedTheL2Cache) {
  const double l2 = 50e6;
  EXPECT_EQ(rotation_sets(10e6, l2), 8);  // 15 needed, capped
  EXPECT_EQ(rotation_sets(40e6, l2), 4);  // 150 MB / 40 MB -> 4
  EXPECT_EQ(rotation_sets(100e6, l2), 2);
  EXPECT_EQ(rotation_sets(1e9, l2), 1);
  EXPECT_EQ(rotation_sets(1e6, 0), 1);
  EXPECT_THROW(rotation_sets(0, l2), std::invalid_argument);
}

TEST(CalibrateSweep, MemoryEstimatesGrowWithTokensAndLayers) {
  const auto& m = named_model("Qwen2.5-7B");
  EXPECT_LT(estimate_gemm_bytes(m, 1024), estimate_gemm_bytes(m, 2048));
  // One more layer adds the per-token kept bytes times the tokens, nothing else.
  const double one = estimate_layer_bytes(m, 1000, 1), two = estimate_layer_bytes(m, 1000, 2);
  const double three = estimate_layer_bytes(m, 1000, 3);
  EXPECT_NEAR(three - two, two - one, 1e-6);
  EXPECT_GT(two - one, 1000.0 * 12 * m.hidden);
  EXPECT_GT(estimate_attention_bytes(m, 32768), 32768.0 * 2 * 4 * m.q_hidden());
}

}  // namespace calibrate_measurement_plan_test
}  // namespace lcsim
