// LoRA in the cost model, checked by hand on the toy model of policy_test_fixtures.hpp (hidden 8, q 8, kv 8, ffn
// 16, vocab 32, 2 layers, 1000 FLOP/s): adapters of rank 2 on q (8 x 8) and down (16 x 8).
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "base/errors.hpp"
#include "formats/scenario_loader.hpp"
#include "model/finetuning.hpp"
#include "model/plan_demand.hpp"
#include "policies/hydraulis/hydraulis_view.hpp"
#include "policies/skrull/skrull_view.hpp"
#include "tests/policy_test_fixtures.hpp"
#include "tests/scenario_test_support.hpp"

namespace lcsim {
namespace finetuning_test {

using testing::plausible_profile;
using testing::scheme;
using testing::tiny_cluster;
using testing::tiny_model;
using testing::tiny_profile;

constexpr double kTol = 1e-9;

Finetuning lora(int rank, std::vector<LoraTarget> targets) {
  Finetuning f;
  f.method = FinetuningMethod::Lora;
  f.lora_rank = rank;
  f.lora_alpha = 2.0 * rank;
  f.lora_targets = std::move(targets);
  return f;
}

CostModel toy(Finetuning finetuning, double hbm_TBps = 0, Profile profile = tiny_profile(), int zero_stage = 2) {
  ClusterSpec cluster = tiny_cluster(1, 4, 1e12);
  cluster.gpu.hbm_TBps = hbm_TBps;
  return CostModel(
      tiny_model(), cluster, std::move(profile),
      CostModelOptions{
          .zero_stage = zero_stage, .cp_attention = CpAttention::Ulysses, .finetuning = std::move(finetuning)});
}

const Finetuning kLora = lora(2, {LoraTarget::Q, LoraTarget::Down});

TEST(Finetuning, AdapterParametersAreRankTimesInPlusOut) {
  // q: 2 (8 + 8) = 32; down: 2 (16 + 8) = 48.
  EXPECT_NEAR(lora_parameters_per_layer(tiny_model(), kLora), 80, kTol);
  EXPECT_NEAR(lora_parameters_per_layer(tiny_model(), Finetuning{}), 0, kTol);
  EXPECT_NEAR(toy(kLora).trained_parameters_per_gpu(scheme(1, 1, 1), 0), 2 * 80, kTol);
  EXPECT_NEAR(toy(kLora).trained_parameters_per_gpu(scheme(2, 2, 1), 0), 2 * 80 / 4.0, kTol);
  const CostModel full = toy({});
  EXPECT_NEAR(full.trained_parameters_per_gpu(scheme(1, 1, 1), 0), full.parameters_per_gpu(scheme(1, 1, 1)), kTol);
}

TEST(Finetuning, AdaptersAreTimedByTheirFlopsOrTheirBytesWhicheverIsSlower) {
  // 10 tokens. FLOPs: q 10 x 2 x 2 x 16 = 640, down 10 x 2 x 2 x 24 = 960: 1.6 s at 1000 FLOP/s.
  EXPECT_NEAR(toy(kLora).lora_forward_seconds(10, 1), 1.6, kTol);
  EXPECT_NEAR(toy(kLora).lora_forward_seconds(10, 2), 0.8, kTol);
  // Bytes (bf16): q 10 x 2 x (8 + 4 + 16) = 560, down 10 x 2 x (16 + 4 + 16) = 720. At 100 B/s the adapters are
  // memory-bound: 5.6 + 7.2 s; at 1000 B/s q is still FLOP-bound (0.64 > 0.56) and down too (0.96 > 0.72).
  EXPECT_NEAR(toy(kLora, 1e-10).lora_forward_seconds(10, 1), 12.8, kTol);
  EXPECT_NEAR(toy(kLora, 1e-9).lora_forward_seconds(10, 1), 1.6, kTol);
  EXPECT_NEAR(toy({}).lora_forward_seconds(10, 1), 0, kTol);
}

TEST(Finetuning, FrozenBaseWeightsSkipTheirWeightGradients) {
  // One sequence of 10 tokens: GEMMs G = 12.8 s, attention A = 1.6 s forward, the head 5.12 s forward.
  const SequenceShare share{10, 1};
  const std::span<const SequenceShare> work(&share, 1);
  // Full: 3 G + 3.5 A = 44 s a layer; 2 layers + 3 x 5.12 head = 103.36 s.
  EXPECT_NEAR(toy({}).layer_seconds(work, 1, Recompute::Selective, false, LayerGrad::Full), 44.0, kTol);
  EXPECT_NEAR(toy({}).compute_seconds(work, scheme(1, 1, 1), 2, true), 103.36, kTol);
  // LoRA: 2 G + 3 x 1.6 (adapters) + 3.5 A = 36 s a layer; the frozen head 2 x 5.12: 82.24 s.
  EXPECT_NEAR(toy(kLora).layer_seconds(work, 1, Recompute::Selective, false, LayerGrad::Full), 36.0, kTol);
  EXPECT_NEAR(toy(kLora).compute_seconds(work, scheme(1, 1, 1), 2, true), 82.24, kTol);
  // A checkpointed layer recomputes its forward, adapters included: + 12.8 + 1.6 + 1.6.
  EXPECT_NEAR(toy(kLora).layer_seconds(work, 1, Recompute::Selective, true, LayerGrad::Full), 36.0 + 16.0, kTol);
  // The forward pass: G + L + A per layer, the head's forward.
  EXPECT_NEAR(toy(kLora).forward_seconds(work, scheme(1, 2, 1), 1, true), 12.8 + 1.6 + 1.6 + 5.12, kTol);
}

TEST(Finetuning, GradientSyncAndOptimizerCoverTheAdaptersOnly) {
  Profile profile = plausible_profile();
  const CostModel cost = toy(kLora, 0, profile);
  const auto calls = cost.gradient_sync_calls(scheme(1, 1, 1), 4, 0);
  ASSERT_EQ(calls.size(), 2u);  // ZeRO-2: reduce-scatter then all-gather
  EXPECT_NEAR(calls[0].bytes, 160 * 2, kTol);
  EXPECT_NEAR(calls[1].bytes, 160 * 2, kTol);
  // 20 us per million parameters, the GPU's quarter of 160.
  EXPECT_NEAR(cost.optimizer_seconds(scheme(1, 1, 1), 4, 0), 20e-6 * 40 / 1e6, kTol);
}

TEST(Finetuning, FrozenWeightsHoldBf16OnlyAndZero3ShardsThem) {
  // plausible_profile: ZeRO-2 keeps 2 bytes a parameter replicated and 14 sharded; ZeRO-3 16 sharded.
  const Profile profile = plausible_profile();
  const double params = toy({}, 0, profile).parameters_per_gpu(scheme(1, 1, 1));
  EXPECT_NEAR(toy({}, 0, profile).static_bytes(scheme(1, 1, 1), 4, 0), params * (2 + 14 / 4.0), 1e-6);
  EXPECT_NEAR(toy(kLora, 0, profile).static_bytes(scheme(1, 1, 1), 4, 0), params * 2 + 160 * (2 + 14 / 4.0), 1e-6);
  EXPECT_NEAR(toy(kLora, 0, profile, 3).static_bytes(scheme(1, 1, 1), 4, 0), params * 2 / 4 + 160 * 16 / 4.0, 1e-6);
}

TEST(Finetuning, AdaptersKeepTheirRankWideIntermediates) {
  // Selective: 1 byte per hidden unit = 8 bytes a token a layer; LoRA adds x A of both targets, 2 x 2 x 2 bytes.
  // Two layers and the logits (0.5 x 32 = 16): full 2 x 8 + 16 = 32, LoRA 2 x 16 + 16 = 48 bytes a token.
  EXPECT_NEAR(toy({}).activation_bytes_per_token(scheme(1, 1, 1), 2, true), 32, kTol);
  EXPECT_NEAR(toy(kLora).activation_bytes_per_token(scheme(1, 1, 1), 2, true), 48, kTol);
  // Full recomputation stores each layer's input only (0.25 x 8 = 2 bytes), but the layer being recomputed in
  // backward holds everything again, its adapters' x A included: 2 x 8 + 8 - 2 = 22 bytes, more than the 16 of
  // logits. 2 x 2 + 22 = 26 bytes a token (full fine-tuning: 2 x 2 + max(16, 14) = 20).
  EXPECT_NEAR(toy(kLora).activation_bytes_per_token(scheme(1, 1, 1, Recompute::Full), 2, true), 26, kTol);
  EXPECT_NEAR(toy({}).activation_bytes_per_token(scheme(1, 1, 1, Recompute::Full), 2, true), 20, kTol);
}

// The OOM edge moves the right way: Qwen2.5-14B on one H100 (ZeRO-2 over 8 GPUs, CP 8) cannot hold the optimizer
// states of full fine-tuning next to a 32K-token sequence, LoRA can; and Skrull's BucketSize grows with LoRA.
TEST(Finetuning, LoraMovesTheOomEdgeOut) {
  const ModelConfig& model = named_model("Qwen2.5-14B");
  const CostModel full = testing::plausible_cost(model, 1);
  const CostModel with_lora = testing::plausible_cost(
      model, 1, 8, CostModelOptions{.zero_stage = 2, .finetuning = lora(16, all_lora_targets())});
  const ParallelScheme s = scheme(1, 1, 8);
  IterationPlan plan;
  plan.replicas = {testing::replica(s, {0, 1, 2, 3, 4, 5, 6, 7}, {testing::micro_batch({testing::sharded(1, 32768)})})};
  const double capacity = full.capacity_bytes();
  const auto full_peak = estimate_peak_bytes(plan, full);
  const auto lora_peak = estimate_peak_bytes(plan, with_lora);
  EXPECT_GT(full_peak[0], capacity);
  EXPECT_LT(lora_peak[0], capacity);
  EXPECT_GT(skrull::SkrullView(with_lora, s, 8).bucket_size(), skrull::SkrullView(full, s, 8).bucket_size());
}

TEST(Finetuning, HydraulisMaxLenFollowsWhatIsTrained) {
  // MaxLen (Appendix B.1) is what the GPU's memory holds after the static bytes: LoRA keeps the base weights in
  // bf16 alone and trains a few adapters, partial freezing trains half the layers, so both leave more room for
  // activations than full fine-tuning on the same <TP 8, PP 1> scheme.
  const ModelConfig& model = named_model("Qwen2.5-14B");
  Finetuning half;
  half.method = FinetuningMethod::Frozen;
  half.frozen_embeddings = true;
  half.frozen_layers = model.layers / 2;
  const CostModel full = testing::plausible_cost(model, 1);
  const CostModel with_lora = testing::plausible_cost(
      model, 1, 8, CostModelOptions{.zero_stage = 2, .finetuning = lora(16, all_lora_targets())});
  const CostModel frozen = testing::plausible_cost(model, 1, 8, CostModelOptions{.zero_stage = 2, .finetuning = half});
  const ParallelScheme s = scheme(8, 1, 1);
  const Tokens full_len = hydraulis::HydraulisView(full, 8).max_len(s);
  const Tokens lora_len = hydraulis::HydraulisView(with_lora, 8).max_len(s);
  const Tokens frozen_len = hydraulis::HydraulisView(frozen, 8).max_len(s);
  EXPECT_GT(full_len, 0);
  EXPECT_GT(frozen_len, full_len);
  EXPECT_GT(lora_len, full_len);
  // Exactly: (capacity - static bytes) / activation bytes per token, where full fine-tuning holds its P / 8
  // parameters at ZeRO-2's replicated bytes and all P's states sharded over the 8 GPUs, and LoRA its P / 8 base
  // weights in bf16 plus the adapters A likewise.
  const auto& memory = full.profile().memory;
  const double rep = memory.replicated_bytes_per_param[2], shard = memory.sharded_bytes_per_param[2];
  const double gpu_params = full.parameters_per_gpu(s);
  const double adapters = model.layers * lora_parameters_per_layer(model, lora(16, all_lora_targets()));
  const LayerSpan all = stage_span(model, 1, 0);
  EXPECT_EQ(full_len, static_cast<Tokens>((full.capacity_bytes() - gpu_params * rep - model.parameters() * shard / 8) /
                                          full.activation_bytes_per_token(s, all, true)));
  EXPECT_EQ(lora_len, static_cast<Tokens>(
                          (with_lora.capacity_bytes() - gpu_params * 2 - adapters / 8 * rep - adapters * shard / 8) /
                          with_lora.activation_bytes_per_token(s, all, true)));
}

TEST(Finetuning, ScenarioKeyIsReadStrictly) {
  const std::string file = std::string(LCSIM_SOURCE_DIR) + "/scenarios/default.json";
  const nlohmann::json base = nlohmann::json::parse(std::ifstream(file));
  const auto& error_of = testing::finetuning_error;
  EXPECT_EQ(error_of({{"method", "full"}}), "");
  EXPECT_EQ(error_of({{"method", "lora"}, {"rank", 16}}), "");
  EXPECT_NE(error_of({{"method", "lora"}, {"rank", 0}}).find("training.finetuning.rank"), std::string::npos);
  EXPECT_NE(error_of({{"method", "lora"}, {"rank", 8}, {"targets", {"q", "x"}}}).find("targets[1]"), std::string::npos);
  EXPECT_NE(error_of({{"method", "lora"}, {"rank", 8}, {"targets", {"q", "q"}}}).find("duplicate"), std::string::npos);
  EXPECT_NE(error_of({{"method", "lora"}, {"rank", 8}, {"dropout", 0.1}}).find("dropout"), std::string::npos);
  // alpha has a range (#55): 1e308, 2^63 and a denormal were taken.
  EXPECT_EQ(error_of({{"method", "lora"}, {"rank", 8}, {"alpha", 1e6}}), "");
  EXPECT_EQ(error_of({{"method", "lora"}, {"rank", 8}, {"alpha", 0.001}}), "");
  for (const double alpha : {1e308, 9223372036854775808.0, 1e-320, 0.0, -1.0}) {
    const std::string error = error_of({{"method", "lora"}, {"rank", 8}, {"alpha", alpha}});
    EXPECT_NE(error.find("training.finetuning.alpha: must be in [0.001, 1e+06]"), std::string::npos) << error;
  }
  EXPECT_NE(error_of({{"method", "frozen"}}).find("freezes nothing"), std::string::npos);  // frozen_test.cpp
  EXPECT_NE(error_of({{"method", "qlora"}}).find("training.finetuning.method"), std::string::npos);
  // The method reaches the cost model.
  nlohmann::json doc = base;
  doc["training"]["finetuning"] = {{"method", "lora"}, {"rank", 16}, {"targets", {"q", "v"}}};
  const LoadedScenario loaded = load_and_prepare(doc, file, 1);
  EXPECT_TRUE(loaded.cost->options().finetuning.lora());
  EXPECT_EQ(loaded.cost->options().finetuning.lora_targets, (std::vector<LoraTarget>{LoraTarget::Q, LoraTarget::V}));
}

}  // namespace finetuning_test
}  // namespace lcsim
