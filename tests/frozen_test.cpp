// Partial freezing in the cost model and the iteration program, checked by hand on the toy model of
// policy_test_fixtures.hpp with 4 layers (hidden 8, q 8, kv 8, ffn 16, vocab 32, 1000 FLOP/s). One sequence of 10
// tokens: a layer's GEMMs G = 12.8 s and attention A = 1.6 s forward, the LM head H = 5.12 s forward; a layer has
// 656 parameters, a vocabulary matrix 256.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "base/errors.hpp"
#include "formats/scenario_loader.hpp"
#include "model/finetuning.hpp"
#include "model/plan_demand.hpp"
#include "policies/skrull/skrull_view.hpp"
#include "program/iteration_program.hpp"
#include "tests/policy_test_fixtures.hpp"
#include "tests/scenario_test_support.hpp"

namespace lcsim {
namespace frozen_test {

using program::Step;
using program::WorkKind;
using testing::plausible_profile;
using testing::scheme;
using testing::tiny_cluster;
using testing::tiny_model;
using testing::tiny_profile;

constexpr double kTol = 1e-9;

Finetuning frozen(bool embeddings, bool lm_head, int first_layers) {
  Finetuning f;
  f.method = FinetuningMethod::Frozen;
  f.frozen_embeddings = embeddings;
  f.frozen_lm_head = lm_head;
  f.frozen_layers = first_layers;
  return f;
}

CostModel toy(Finetuning finetuning, Profile profile = tiny_profile(), int gpus = 4) {
  return CostModel(tiny_model(4), tiny_cluster(1, gpus, 1e12), std::move(profile),
                   CostModelOptions{.zero_stage = 2, .finetuning = std::move(finetuning)});
}

const SequenceShare kShare{10, 1};
const std::span<const SequenceShare> kWork(&kShare, 1);

TEST(Frozen, LayersSplitIntoNoGradFrozenAndTrained) {
  const CostModel prefix = toy(frozen(true, false, 2));
  EXPECT_EQ(prefix.layer_grad(0), LayerGrad::None);
  EXPECT_EQ(prefix.layer_grad(1), LayerGrad::None);
  EXPECT_EQ(prefix.layer_grad(2), LayerGrad::Full);
  // Trained embeddings need the gradient to flow through the frozen layers.
  EXPECT_EQ(toy(frozen(false, false, 2)).layer_grad(1), LayerGrad::Activations);
  // Checkpointing counts from the first layer with a backward: layers 2 and 3 here, none of the no_grad ones.
  ParallelScheme s = scheme(1, 1, 1);
  s.checkpointed_layers = 3;
  const LayerMix mix = prefix.layer_mix(s, LayerSpan{0, 4});
  EXPECT_EQ(mix.none, 2);
  EXPECT_EQ(mix.full, 2);
  EXPECT_EQ(mix.checkpointed(), 2);
  const LayerMix flowing = toy(frozen(false, false, 2)).layer_mix(s, LayerSpan{0, 4});
  EXPECT_EQ(flowing.activations, 2);
  EXPECT_EQ(flowing.checkpointed_activations, 2);
  EXPECT_EQ(flowing.checkpointed_full, 1);
}

TEST(Frozen, FrozenLayersSkipWeightGradientsAndANoGradPrefixItsBackward) {
  // Trained: 3 G + 3.5 A = 44 s; frozen with gradients flowing: 2 G + 3.5 A = 31.2 s; no_grad: G + A = 14.4 s.
  const CostModel full = toy({});
  const CostModel prefix = toy(frozen(true, false, 2));
  const CostModel flowing = toy(frozen(false, false, 2));
  EXPECT_NEAR(prefix.layer_seconds(kWork, 1, Recompute::Selective, false, LayerGrad::Full), 44.0, kTol);
  EXPECT_NEAR(prefix.layer_seconds(kWork, 1, Recompute::Selective, false, LayerGrad::Activations), 31.2, kTol);
  EXPECT_NEAR(prefix.layer_seconds(kWork, 1, Recompute::Selective, false, LayerGrad::None), 14.4, kTol);
  // A no_grad layer is never recomputed.
  EXPECT_NEAR(prefix.layer_seconds(kWork, 1, Recompute::Full, true, LayerGrad::None), 14.4, kTol);
  // Whole model, head 3 H = 15.36: full 4 x 44 + 15.36; no_grad prefix 2 x 14.4 + 2 x 44 + 15.36; gradients
  // through the prefix 2 x 31.2 + 2 x 44 + 15.36; frozen head 2 H = 10.24.
  EXPECT_NEAR(full.compute_seconds(kWork, scheme(1, 1, 1), LayerSpan{0, 4}, true), 191.36, kTol);
  EXPECT_NEAR(prefix.compute_seconds(kWork, scheme(1, 1, 1), LayerSpan{0, 4}, true), 132.16, kTol);
  EXPECT_NEAR(flowing.compute_seconds(kWork, scheme(1, 1, 1), LayerSpan{0, 4}, true), 165.76, kTol);
  EXPECT_NEAR(toy(frozen(true, true, 2)).compute_seconds(kWork, scheme(1, 1, 1), LayerSpan{0, 4}, true), 127.04, kTol);
  // Which layers, not how many: the second stage of a 2-stage pipeline trains both its layers.
  EXPECT_NEAR(prefix.compute_seconds(kWork, scheme(1, 2, 1), LayerSpan{2, 2}, false), 88.0, kTol);
  EXPECT_NEAR(prefix.compute_seconds(kWork, scheme(1, 2, 1), LayerSpan{0, 2}, false), 28.8, kTol);
}

TEST(Frozen, ANoGradLayerCostsTheForwardOfAFrozenLayerOverheadIncluded) {
  // 10 s of fixed overhead a layer and 10% of the GEMM passes (G = 12.8 s, A = 1.6 s): the forward pass takes the
  // fixed part in proportion to its share of the layer's work (14.4 of a frozen layer's 31.2 s, of a trained
  // layer's 44 s).
  Profile profile = tiny_profile();
  profile.compute.layer_overhead_us = 10e6;
  profile.compute.gemm_work_overhead = 0.1;
  const CostModel cost = toy(frozen(true, false, 2), profile);
  const double no_grad = 14.4 + 0.1 * 12.8 + 10 * 14.4 / 31.2;
  EXPECT_NEAR(cost.layer_seconds(kWork, 1, Recompute::Selective, false, LayerGrad::None), no_grad, kTol);
  EXPECT_NEAR(cost.forward_seconds(kWork, scheme(1, 2, 1), LayerSpan{0, 2}, false), 2 * no_grad, kTol);
  EXPECT_NEAR(cost.forward_seconds(kWork, scheme(1, 2, 1), LayerSpan{2, 2}, false),
              2 * (14.4 + 0.1 * 12.8 + 10 * 14.4 / 44), kTol);
  // Gradients through the frozen layers: 2 G + 3.5 A + 0.1 (2 G) + 10 s.
  EXPECT_NEAR(toy(frozen(false, false, 2), profile)
                  .layer_seconds(kWork, 1, Recompute::Selective, false, LayerGrad::Activations),
              31.2 + 0.1 * 25.6 + 10, kTol);
}

TEST(Frozen, ANoGradPrefixKeepsNoActivations) {
  // Selective: 8 bytes a token a layer, logits 0.5 x 32 = 16. Full 4 x 8 + 16 = 48; the no_grad prefix keeps
  // nothing: 2 x 8 + 16 = 32; gradients through the prefix keep everything: 48.
  EXPECT_NEAR(toy({}).activation_bytes_per_token(scheme(1, 1, 1), LayerSpan{0, 4}, true), 48, kTol);
  EXPECT_NEAR(toy(frozen(true, false, 2)).activation_bytes_per_token(scheme(1, 1, 1), LayerSpan{0, 4}, true), 32, kTol);
  EXPECT_NEAR(toy(frozen(false, false, 2)).activation_bytes_per_token(scheme(1, 1, 1), LayerSpan{0, 4}, true), 48,
              kTol);
  EXPECT_NEAR(toy(frozen(true, false, 2)).activation_bytes_per_token(scheme(1, 2, 1), LayerSpan{0, 2}, false), 0, kTol);
}

TEST(Frozen, ParametersGradientSyncAndStaticBytesCoverTheTrainedPartOnly) {
  // plausible_profile: ZeRO-2 keeps 2 bytes a trained parameter replicated and 14 sharded (over 4: 5.5 bytes).
  const Profile profile = plausible_profile();
  const CostModel full = toy({}, profile);
  const CostModel prefix = toy(frozen(true, false, 2), profile);
  // No pipeline: 4 x 656 + 2 x 256 = 3136 parameters; trained 2 x 656 + 256 (the head) = 1568.
  EXPECT_NEAR(prefix.parameters_per_gpu(scheme(1, 1, 1)), 3136, kTol);
  EXPECT_NEAR(prefix.trained_parameters_per_gpu(scheme(1, 1, 1), 0), 1568, kTol);
  EXPECT_NEAR(full.static_bytes(scheme(1, 1, 1), 4, 0), 3136 * 5.5, 1e-6);
  EXPECT_NEAR(prefix.static_bytes(scheme(1, 1, 1), 4, 0), 1568 * 2 + 1568 * 5.5, 1e-6);
  const auto calls = prefix.gradient_sync_calls(scheme(1, 1, 1), 4, 0);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_NEAR(calls[0].bytes, 1568 * 2, kTol);
  EXPECT_NEAR(calls[1].bytes, 1568 * 2, kTol);
  EXPECT_NEAR(prefix.optimizer_seconds(scheme(1, 1, 1), 4, 0), 20e-6 * 1568 / 4 / 1e6, 1e-18);
  // Two stages of 2 x 656 + 256: the first (embeddings and its layers frozen) trains nothing, syncs nothing and
  // holds bf16 weights only; the second trains all of its parameters.
  EXPECT_NEAR(prefix.trained_parameters_per_gpu(scheme(1, 2, 1), 0), 0, kTol);
  EXPECT_NEAR(prefix.trained_parameters_per_gpu(scheme(1, 2, 1), 1), 1568, kTol);
  EXPECT_TRUE(prefix.gradient_sync_calls(scheme(1, 2, 1), 4, 0).empty());
  EXPECT_EQ(prefix.optimizer_seconds(scheme(1, 2, 1), 4, 0), 0.0);
  EXPECT_NEAR(prefix.static_bytes(scheme(1, 2, 1), 4, 0), 1568 * 2, 1e-6);
  EXPECT_NEAR(prefix.static_bytes(scheme(1, 2, 1), 4, 1), 1568 * 5.5, 1e-6);
  // ZeRO-3 shards the frozen weights too.
  const CostModel zero3(tiny_model(4), tiny_cluster(1, 4, 1e12), profile,
                        CostModelOptions{.zero_stage = 3, .finetuning = frozen(true, false, 2)});
  EXPECT_NEAR(zero3.static_bytes(scheme(1, 1, 1), 4, 0), 1568 * 2 / 4.0 + 1568 * 16 / 4.0, 1e-6);
}

TEST(Frozen, ANoGradLayerIssuesItsForwardCollectivesOnly) {
  const CostModel prefix = toy(frozen(true, false, 2));
  // Ulysses: 4 all-to-alls a layer each way, 2 forward for a no_grad layer; TP likewise.
  const auto a2a = prefix.ulysses_calls(10, 2, LayerSpan{0, 4});
  ASSERT_EQ(a2a.size(), 2u);
  EXPECT_NEAR(a2a[0].count, 2 * 2 + 2 * 4, kTol);
  EXPECT_NEAR(prefix.tp_comm_calls(10, 2, LayerSpan{0, 2})[0].count, 2 * 2, kTol);
  EXPECT_NEAR(toy({}).tp_comm_calls(10, 2, LayerSpan{0, 2})[0].count, 2 * 4, kTol);
}

/// Per GPU: the seconds of its compute steps and the activation bytes it allocates.
struct GpuTotals {
  double compute_s = 0;
  double activation_bytes = 0;
  int gradient_collectives = 0;
  int gradient_sends = 0;
};
GpuTotals totals(const program::IterationProgram& program, std::size_t gpu) {
  GpuTotals t;
  for (const Step& step : program.gpus[gpu]) {
    if (step.type == Step::Type::Compute) t.compute_s += step.seconds;
    t.activation_bytes += step.alloc_bytes;
    if (step.type == Step::Type::Collective) {
      const WorkKind kind = program.collectives[static_cast<std::size_t>(step.index)].kind;
      if (kind == WorkKind::GradReduceScatter || kind == WorkKind::GradAllGather || kind == WorkKind::GradAllReduce)
        ++t.gradient_collectives;
    }
    if (step.type == Step::Type::Send && step.kind == WorkKind::PpGradient) ++t.gradient_sends;
  }
  return t;
}

// PP = 2 over 2 GPUs, DP 2 (4 GPUs): stage 0 holds layers 0-1 (frozen with the embeddings: no_grad), stage 1
// layers 2-3 and the head.
TEST(Frozen, AFrozenFirstStageRunsForwardOnlyHoldsNoActivationsAndSyncsNothing) {
  Profile profile = tiny_profile();  // with ZeRO-2's bytes a parameter: 2 replicated, 14 sharded
  profile.memory.replicated_bytes_per_param = {16, 4, 2, 0};
  profile.memory.sharded_bytes_per_param = {0, 12, 14, 16};
  const CostModel full = toy({}, profile);
  const CostModel prefix = toy(frozen(true, false, 2), profile);
  IterationPlan plan;
  const ParallelScheme s = scheme(1, 2, 1);
  plan.replicas = {testing::replica(s, {0, 1}, {testing::micro_batch({testing::on_rank(1, 10, 0)})}),
                   testing::replica(s, {2, 3}, {testing::micro_batch({testing::on_rank(2, 10, 0)})})};
  const auto frozen_program = program::build_program(plan, prefix, {});
  const auto full_program = program::build_program(plan, full, {});
  const GpuTotals first = totals(frozen_program, 0);
  const GpuTotals second = totals(frozen_program, 1);
  // Stage 0: 2 x 14.4 s forward only (full fine-tuning: 2 x 44); stage 1: 2 x 44 + 3 x 5.12 either way.
  EXPECT_NEAR(first.compute_s, 28.8, kTol);
  EXPECT_NEAR(totals(full_program, 0).compute_s, 88.0, kTol);
  EXPECT_NEAR(second.compute_s, 103.36, kTol);
  EXPECT_LT(first.compute_s, second.compute_s);
  // Activations: none on stage 0 (full: 2 x 8 bytes x 10 tokens), 2 x 8 + 16 logits a token on stage 1.
  EXPECT_NEAR(first.activation_bytes, 0, kTol);
  EXPECT_NEAR(totals(full_program, 0).activation_bytes, 160, kTol);
  EXPECT_NEAR(second.activation_bytes, 320, kTol);
  // No gradient crosses into a stage without backward, and that stage has nothing to sync.
  EXPECT_EQ(second.gradient_sends, 0);
  EXPECT_EQ(totals(full_program, 1).gradient_sends, 1);
  EXPECT_EQ(first.gradient_collectives, 0);
  EXPECT_EQ(second.gradient_collectives, 2);  // ZeRO-2 reduce-scatter and all-gather across the two replicas
  EXPECT_EQ(totals(full_program, 0).gradient_collectives, 2);
  // The static memory set on each GPU is its own stage's.
  EXPECT_NEAR(frozen_program.gpus[0][0].bytes, prefix.static_bytes(s, 2, 0), kTol);
  EXPECT_NEAR(frozen_program.gpus[1][0].bytes, prefix.static_bytes(s, 2, 1), kTol);
  EXPECT_NEAR(frozen_program.gpus[0][0].bytes, 1568 * 2, kTol);  // bf16 weights only
  EXPECT_NEAR(frozen_program.gpus[1][0].bytes, 1568 * (2 + 14 / 2.0), kTol);
  // The estimate's peaks agree: the frozen first stage holds less than full fine-tuning's.
  EXPECT_LT(estimate_peak_bytes(plan, prefix)[0], estimate_peak_bytes(plan, full)[0]);
}

// The OOM edge moves out: Qwen2.5-14B on 8 H100 (ZeRO-2 over 8, CP 8) cannot hold full fine-tuning's static memory
// next to a 32K-token sequence; freezing the embeddings and the first half of the layers fits, by both static and
// activation memory, and Skrull's BucketSize grows.
TEST(Frozen, FreezingMovesTheOomEdgeOut) {
  const ModelConfig& model = named_model("Qwen2.5-14B");
  const CostModel full = testing::plausible_cost(model, 1);
  const CostModel half = testing::plausible_cost(
      model, 1, 8, CostModelOptions{.zero_stage = 2, .finetuning = frozen(true, false, model.layers / 2)});
  const ParallelScheme s = scheme(1, 1, 8);
  IterationPlan plan;
  plan.replicas = {testing::replica(s, {0, 1, 2, 3, 4, 5, 6, 7}, {testing::micro_batch({testing::sharded(1, 32768)})})};
  const double capacity = full.capacity_bytes();
  EXPECT_GT(estimate_peak_bytes(plan, full)[0], capacity);
  EXPECT_LT(estimate_peak_bytes(plan, half)[0], capacity);
  EXPECT_LT(half.static_bytes(s, 8, 0), full.static_bytes(s, 8, 0));
  const LayerSpan all{0, model.layers};
  EXPECT_LT(half.activation_bytes_per_token(s, all, true), full.activation_bytes_per_token(s, all, true));
  // Skrull's memory view follows: a larger BucketSize.
  EXPECT_GT(skrull::SkrullView(half, s, 8).bucket_size(), skrull::SkrullView(full, s, 8).bucket_size());
}

TEST(Frozen, ScenarioKeyIsReadStrictly) {
  // default.json: Qwen2.5-0.5B, 24 layers, embeddings tied to the LM head.
  const std::string file = std::string(LCSIM_SOURCE_DIR) + "/scenarios/default.json";
  const nlohmann::json base = nlohmann::json::parse(std::ifstream(file));
  const auto& error_of = testing::finetuning_error;
  const auto names = [](const std::string& error, const std::string& key) {
    return error.find(key) != std::string::npos;
  };
  EXPECT_EQ(error_of({{"method", "frozen"}, {"first_layers", 12}}), "");
  EXPECT_EQ(error_of({{"method", "frozen"}, {"embeddings", true}, {"lm_head", true}, {"first_layers", 3}}), "");
  EXPECT_TRUE(names(error_of({{"method", "frozen"}, {"first_layers", 25}}), "training.finetuning.first_layers"));
  EXPECT_TRUE(names(error_of({{"method", "frozen"}, {"first_layers", -1}}), "training.finetuning.first_layers"));
  EXPECT_TRUE(names(error_of({{"method", "frozen"}, {"first_layers", "half"}}), "training.finetuning.first_layers"));
  const std::string nothing = error_of({{"method", "frozen"}});
  EXPECT_TRUE(names(nothing, "training.finetuning.method"));
  EXPECT_TRUE(names(nothing, "use \"full\""));
  const std::string everything =
      error_of({{"method", "frozen"}, {"embeddings", true}, {"lm_head", true}, {"first_layers", 24}});
  EXPECT_TRUE(names(everything, "training.finetuning.first_layers"));
  EXPECT_TRUE(names(everything, "nothing to train"));
  EXPECT_TRUE(
      names(error_of({{"method", "frozen"}, {"first_layers", 2}, {"layers", 2}}), "training.finetuning.layers"));
  EXPECT_TRUE(names(error_of({{"method", "frozen"}, {"embeddings", true}}), "training.finetuning.embeddings"));
  EXPECT_TRUE(names(error_of({{"method", "frozen"}, {"lm_head", 1}}), "training.finetuning.lm_head"));
  // The method reaches the cost model.
  nlohmann::json doc = base;
  doc["training"]["finetuning"] = {{"method", "frozen"}, {"first_layers", 6}};
  const LoadedScenario loaded = load_and_prepare(doc, file, 1);
  EXPECT_TRUE(loaded.cost->options().finetuning.frozen());
  EXPECT_EQ(loaded.cost->options().finetuning.frozen_layers, 6);
  EXPECT_EQ(loaded.cost->layer_grad(5), LayerGrad::Activations);
}

}  // namespace frozen_test
}  // namespace lcsim
