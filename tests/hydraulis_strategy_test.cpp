// Hydraulis scheme space, UtilLen, strategies and their GPU layout.
#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "base/errors.hpp"
#include "base/json_reader.hpp"
#include "model/topology.hpp"
#include "policies/hydraulis/hydraulis_view.hpp"
#include "policies/hydraulis/strategy.hpp"
#include "tests/policy_test_fixtures.hpp"

namespace lcsim::hydraulis {
namespace hydraulis_strategy_test {

SchemeInfo scheme(int tp, int pp, Tokens max_len) {
  SchemeInfo s;
  s.scheme.tp = tp;
  s.scheme.pp = pp;
  s.max_len = max_len;
  s.util_len = 1;
  s.latency.b = 1e-3;
  return s;
}

TEST(HydraulisStrategy, DegreesFollowTheNodeAndTheLayers) {
  EXPECT_EQ(tp_degrees(8, 64), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(tp_degrees(8, 4), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(tp_degrees(6, 64), (std::vector<int>{1, 2}));  // 4 does not divide 6: a TP group could cross nodes
  EXPECT_EQ(pp_degrees(60, 16), (std::vector<int>{1, 2, 3, 4, 5, 6, 10, 12, 15}));
  EXPECT_EQ(pp_degrees(32, 64), (std::vector<int>{1, 2, 4, 8, 16, 32}));
}

TEST(HydraulisStrategy, SchemeSpaceOfLlama7bOnTwoNodes) {
  const CostModel cost = testing::plausible_cost(named_model("LLaMA2-7B"), 2);
  const SchemeSpace space(cost, 16, SpaceOptions{});
  const HydraulisView view(cost, 16);
  std::set<std::pair<int, int>> seen;
  for (const auto& s : space.schemes()) {
    EXPECT_EQ(s.scheme.cp, 1);
    EXPECT_LE(s.gpus(), 16);
    EXPECT_EQ(32 % s.scheme.pp, 0);
    EXPECT_EQ(8 % s.scheme.tp, 0);
    EXPECT_GT(s.max_len, 0);
    EXPECT_EQ(s.max_len, view.max_len(s.scheme));
    EXPECT_GE(s.util_len, 128);
    // The fit is the view's, and T grows with the length where the scheme is used.
    EXPECT_EQ(s.latency.a, view.latency(s.scheme).a);
    EXPECT_LT(s.seconds(1024), s.seconds(4096));
    seen.insert({s.scheme.tp, s.scheme.pp});
  }
  // TP 1, 2, 4, 8 x PP 1..16 within 16 GPUs: 5 + 4 + 3 + 2 = 14 schemes, minus those without memory for activations.
  EXPECT_LE(space.size(), 14u);
  EXPECT_TRUE(seen.count({8, 2}));
  EXPECT_TRUE(seen.count({2, 1}));
  // More TP holds longer sequences.
  EXPECT_LT(space[*space.find(1, 1)].max_len, space[*space.find(8, 1)].max_len);
  EXPECT_EQ(space[space.longest()].max_len,
            std::max_element(space.schemes().begin(), space.schemes().end(), [](const auto& x, const auto& y) {
              return x.max_len < y.max_len;
            })->max_len);
}

TEST(HydraulisStrategy, UtilLenIsWhereThroughputReachesTheThreshold) {
  const CostModel cost = testing::plausible_cost(named_model("LLaMA2-7B"), 1);
  const HydraulisView view(cost, 8);
  ParallelScheme s;
  s.tp = 4;
  auto throughput = [&](Tokens l) { return static_cast<double>(l) / view.stage_seconds(s, l); };
  double best = 0;
  for (Tokens l = 128; l <= view.max_len(s); l = l * 11 / 10) best = std::max(best, throughput(l));
  const Tokens util = view.util_len(s, 0.85);
  EXPECT_GE(throughput(util), 0.85 * best * 0.999);
  EXPECT_LT(throughput(util - 1), throughput(util));
  EXPECT_LT(throughput(util - 1), 0.85 * best * 1.001);
  EXPECT_LE(view.util_len(s, 0.5), util);
  EXPECT_THROW(view.util_len(s, 0), std::invalid_argument);
}

TEST(HydraulisStrategy, SyncIsTheEstimatesReplicaTail) {
  const CostModel cost = testing::plausible_cost(named_model("LLaMA2-7B"), 2);
  const SchemeSpace serial(cost, 16, SpaceOptions{});
  SpaceOptions options;
  options.serial_optimization = false;
  const SchemeSpace hidden(cost, 16, options);
  for (std::size_t k = 0; k < serial.size(); ++k) {
    const ParallelScheme& s = serial[k].scheme;
    const int shards = 16 / s.gpus();  // every TP x PP of the space divides 16 here
    EXPECT_DOUBLE_EQ(serial[k].sync, cost.gradient_sync_seconds(s, shards, LinkClass::InfiniBand, 0) +
                                         cost.optimizer_seconds(s, shards, 0));
    EXPECT_EQ(hidden[k].sync, 0.0);
  }
  // A <1,1> pipeline synchronises the whole model, a <8,2> one a sixteenth of it.
  EXPECT_GT(serial[*serial.find(1, 1)].sync, 8 * serial[*serial.find(8, 2)].sync);
}

TEST(HydraulisStrategy, SyncIsPricedWhereTheWiringHelpsLeast) {
  // On rail-optimized nodes a <1,1> scheme's 16 shards, were they two whole nodes, would spread their rings over 8
  // NICs each; which GPUs hold its slices depends on the mix the proposal picks, so the space prices them one GPU
  // per node: the same sync as on a fat-tree, where no placement spreads.
  const CostModel fat = testing::plausible_cost(named_model("LLaMA2-7B"), 2);
  ClusterSpec rail_cluster = fat.cluster();
  const nlohmann::json no_keys = nlohmann::json::object();
  JsonObjectReader reader(no_keys, "test.json", "cluster");
  rail_cluster.topology_kind = find_topology("rail-optimized")->read(reader);
  const CostModel rail(fat.model(), rail_cluster, fat.profile());
  const SchemeSpace on_fat(fat, 16, SpaceOptions{});
  const SchemeSpace on_rail(rail, 16, SpaceOptions{});
  const std::size_t k = *on_rail.find(1, 1);
  EXPECT_DOUBLE_EQ(on_rail[k].sync, on_fat[*on_fat.find(1, 1)].sync);
  EXPECT_LT(rail.gradient_sync_seconds(on_rail[k].scheme, 16, LinkClass::InfiniBand, 0), on_rail[k].sync)
      << "aligned, the same shards would spread";
}

TEST(HydraulisStrategy, ExplicitSchemesMustBeInTheSpace) {
  const CostModel cost = testing::plausible_cost(named_model("LLaMA2-7B"), 1);
  const SchemeSpace space(cost, 8, SpaceOptions{}, {{8, 1}, {2, 1}, {8, 1}});
  EXPECT_EQ(space.size(), 2u);
  EXPECT_THROW(SchemeSpace(cost, 8, SpaceOptions{}, {{3, 1}}), InputError);  // TP not a power of 2
  EXPECT_THROW(SchemeSpace(cost, 8, SpaceOptions{}, {{1, 3}}), InputError);  // 3 does not divide 32
  EXPECT_THROW(SchemeSpace(cost, 8, SpaceOptions{}, {{8, 2}}), InputError);  // 16 GPUs > 8
}

TEST(HydraulisStrategy, MakeStrategyMergesAndDescribes) {
  const SchemeSpace space({scheme(1, 1, 1000), scheme(8, 1, 9000), scheme(2, 2, 4000)}, 32, 8);
  const Strategy s = make_strategy({{0, 4}, {1, 1}, {0, 2}, {2, 0}});
  EXPECT_EQ(s.counts, (std::vector<std::pair<std::size_t, int>>{{0, 6}, {1, 1}}));
  EXPECT_EQ(s.gpus(space), 14);
  EXPECT_EQ(s.pipelines(), 7);
  EXPECT_EQ(s.max_len(space), 9000);
  EXPECT_EQ(s.describe(space), "1x<8,1> + 6x<1,1>");
}

TEST(HydraulisStrategy, LayOutKeepsTpGroupsInsideNodesAndOrdersByMaxLen) {
  // 2x<1,1>, 1x<2,2>, 1x<4,1>, 1x<8,1> (18 GPUs) on 3 nodes of 8: in the given order the <8,1> would cross nodes.
  const SchemeSpace space({scheme(1, 1, 1000), scheme(2, 2, 5000), scheme(4, 1, 6000), scheme(8, 1, 9000)}, 24, 8);
  const auto pipelines = lay_out(make_strategy({{0, 2}, {1, 1}, {2, 1}, {3, 1}}), space);
  ASSERT_EQ(pipelines.size(), 5u);
  std::set<int> used;
  Tokens previous = std::numeric_limits<Tokens>::max();
  for (const auto& p : pipelines) {
    const auto& s = space[p.scheme];
    EXPECT_LE(s.max_len, previous);  // dispatch order
    previous = s.max_len;
    ASSERT_EQ(p.gpus.size(), static_cast<std::size_t>(s.gpus()));
    for (int stage = 0; stage < s.scheme.pp; ++stage) {
      const int first = p.gpus[static_cast<std::size_t>(stage * s.scheme.tp)];
      for (int t = 0; t < s.scheme.tp; ++t) {
        const int g = p.gpus[static_cast<std::size_t>(stage * s.scheme.tp + t)];
        EXPECT_EQ(g / 8, first / 8) << "TP group across nodes";
        EXPECT_TRUE(used.insert(g).second);
      }
    }
  }
  EXPECT_EQ(used.size(), 18u);
  EXPECT_EQ(*used.rbegin(), 17);                                                  // contiguous from GPU 0
  EXPECT_EQ(pipelines.front().gpus, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));  // <8,1> first, on node 0
  EXPECT_THROW(lay_out(make_strategy({{3, 4}}), space), PlanningError);           // 32 GPUs > 24
}

TEST(HydraulisStrategy, PipelineSchemesAreLayOutsSchemes) {
  // Screening takes the schemes without laying the pipelines out: the same order, MaxLen ties included.
  const SchemeSpace space(
      {scheme(1, 1, 1000), scheme(2, 2, 5000), scheme(4, 1, 5000), scheme(8, 1, 9000), scheme(1, 2, 1000)}, 64, 8);
  for (const auto& strategy : {make_strategy({{0, 2}, {1, 1}, {2, 1}, {3, 1}}), make_strategy({{4, 3}, {0, 1}}),
                               make_strategy({{2, 2}, {1, 3}, {4, 1}}), make_strategy({{3, 1}})}) {
    std::vector<std::size_t> laid;
    for (const auto& p : lay_out(strategy, space)) laid.push_back(p.scheme);
    EXPECT_EQ(pipeline_schemes(strategy, space), laid) << strategy.describe(space);
  }
}

TEST(HydraulisStrategy, SharedSpaceIsReusedForTheSameInputsOnly) {
  const CostModel cost = testing::plausible_cost(named_model("LLaMA2-7B"), 1);
  const SpaceOptions base;
  const auto a = shared_scheme_space(cost, 8, base);
  const auto b = shared_scheme_space(cost, 8, base);
  EXPECT_EQ(a.get(), b.get());
  SpaceOptions full = base;
  full.recompute = Recompute::Full;
  SpaceOptions util = base;
  util.util_threshold = 0.9;
  SpaceOptions hidden = base;
  hidden.serial_optimization = false;
  EXPECT_NE(a.get(), shared_scheme_space(cost, 8, full).get());
  EXPECT_NE(a.get(), shared_scheme_space(cost, 8, util).get());
  EXPECT_NE(a.get(), shared_scheme_space(cost, 8, hidden).get());
  Profile other = testing::plausible_profile();
  other.compute.layer_overhead_us += 1;
  const CostModel changed(cost.model(), cost.cluster(), other);
  const auto c = shared_scheme_space(changed, 8, base);
  EXPECT_NE(a.get(), c.get());
  EXPECT_NE(a->schemes().front().latency.c, c->schemes().front().latency.c);
  // The cost model's options: a LoRA run keeps less per GPU, so its schemes hold longer sequences.
  CostModelOptions lora_options = cost.options();
  lora_options.finetuning.method = FinetuningMethod::Lora;
  lora_options.finetuning.lora_rank = 16;
  lora_options.finetuning.lora_targets = {LoraTarget::Q, LoraTarget::V};
  const CostModel lora(cost.model(), cost.cluster(), cost.profile(), lora_options);
  const auto d = shared_scheme_space(lora, 8, base);
  EXPECT_NE(a.get(), d.get());
  EXPECT_GT(d->schemes().front().max_len, a->schemes().front().max_len);
  CostModelOptions ring_options = cost.options();
  ring_options.cp_attention = CpAttention::Zigzag;
  EXPECT_NE(a.get(),
            shared_scheme_space(CostModel(cost.model(), cost.cluster(), cost.profile(), ring_options), 8, base).get());
}

}  // namespace hydraulis_strategy_test
}  // namespace lcsim::hydraulis
