// What the platform is built for (flow groups, link uses) and its merged links: exact, and refused where a flow
// was not declared. Tests that start SimGrid run it in a child process (sim_test_support.hpp).
#include "engine/platform.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <algorithm>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

#include "engine/executor.hpp"
#include "engine/simgrid_collectives.hpp"
#include "program/iteration_program.hpp"
#include "tests/sim_test_support.hpp"

namespace lcsim {
namespace sim_platform_test {

using program::WorkKind;
using sim::LinkUse;
using testing::h100_qwen_cost;
using testing::micro_batch;
using testing::on_rank;
using testing::replica;
using testing::scheme;
using testing::sharded;
using testing::simulate_in_child;

std::vector<int> range(int first, int count) {
  std::vector<int> out;
  for (int g = first; g < first + count; ++g) out.push_back(g);
  return out;
}

std::set<LinkUse> declared_uses(const IterationPlan& plan, const CostModel& cost) {
  std::set<LinkUse> uses;
  for (const auto& group : program::flow_groups(plan, cost))
    for (auto& use : sim::link_uses(cost.cluster(), group.gpus, group.kind)) uses.insert(std::move(use));
  return uses;
}

/// Every use that a flow of the plan's program needs, none of them missing from what flow_groups() declares.
std::vector<std::string> undeclared_flows(const IterationPlan& plan, const CostModel& cost) {
  const std::set<LinkUse> declared = declared_uses(plan, cost);
  const program::IterationProgram program = program::build_program(plan, cost, {});
  std::vector<std::string> missing;
  const auto check = [&](const std::vector<int>& gpus, WorkKind kind) {
    for (const LinkUse& use : sim::link_uses(cost.cluster(), gpus, kind))
      if (!declared.contains(use))
        missing.push_back(std::string(program::to_string(kind)) + " GPU " + std::to_string(use.gpus.front()));
  };
  for (const auto& spec : program.collectives)
    if (spec.time.transfer_s > 0) check(spec.gpus, spec.kind);
  for (const auto& transfer : program.transfers) check({transfer.from, transfer.to}, transfer.kind);
  return missing;
}

/// Two simulations of the same plans that must agree: iteration times, busy times and every span. The closed form
/// and SimGrid's flows add the same terms in another order, so they may differ in the last bits (1e-17 s seen), never
/// more: 1e-12 relative.
void expect_same_timelines(const std::vector<program::IterationOutcome>& a,
                           const std::vector<program::IterationOutcome>& b) {
  const auto same = [](double x, double y) { return std::abs(x - y) <= 1e-12 * std::max(std::abs(x), std::abs(y)); };
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_GT(a[i].seconds, 0.0);
    EXPECT_TRUE(same(a[i].seconds, b[i].seconds)) << "iteration " << i << ": " << a[i].seconds - b[i].seconds;
    ASSERT_EQ(a[i].busy_seconds.size(), b[i].busy_seconds.size());
    for (std::size_t g = 0; g < a[i].busy_seconds.size(); ++g)
      EXPECT_TRUE(same(a[i].busy_seconds[g], b[i].busy_seconds[g])) << "iteration " << i << " GPU " << g;
    ASSERT_EQ(a[i].spans.size(), b[i].spans.size());
    for (std::size_t s = 0; s < a[i].spans.size(); ++s) {
      EXPECT_EQ(a[i].spans[s].gpu, b[i].spans[s].gpu);
      EXPECT_TRUE(same(a[i].spans[s].start_s, b[i].spans[s].start_s)) << "span " << s;
      EXPECT_TRUE(same(a[i].spans[s].end_s, b[i].spans[s].end_s)) << "span " << s;
    }
  }
}

TEST(SimFlowGroups, NameTheCpTpSliceGroupsAndPipelineNeighbours) {
  const CostModel cost = testing::tiny_cost(1, 8);
  IterationPlan plan;
  // tp 2, pp 2, cp 2: index (stage * cp + j) * tp + t.
  plan.replicas = {replica(scheme(2, 2, 2), range(0, 8), {micro_batch({sharded(1, 20)})})};
  std::vector<std::pair<std::vector<int>, WorkKind>> groups;
  for (const auto& g : program::flow_groups(plan, cost)) groups.emplace_back(g.gpus, g.kind);
  std::sort(groups.begin(), groups.end());
  const std::vector<std::pair<std::vector<int>, WorkKind>> expected = {
      {{0, 1}, WorkKind::TpCollective},  {{0, 2}, WorkKind::CpAllToAll},   {{0, 2}, WorkKind::GradAllReduce},
      {{0, 4}, WorkKind::PpActivation},  {{1, 3}, WorkKind::CpAllToAll},   {{1, 3}, WorkKind::GradAllReduce},
      {{1, 5}, WorkKind::PpActivation},  {{2, 3}, WorkKind::TpCollective}, {{2, 6}, WorkKind::PpActivation},
      {{3, 7}, WorkKind::PpActivation},  {{4, 5}, WorkKind::TpCollective}, {{4, 6}, WorkKind::CpAllToAll},
      {{4, 6}, WorkKind::GradAllReduce}, {{5, 7}, WorkKind::CpAllToAll},   {{5, 7}, WorkKind::GradAllReduce},
      {{6, 7}, WorkKind::TpCollective}};
  EXPECT_EQ(groups, expected);
}

TEST(SimFlowGroups, DeclareEveryFlowTheProgramStarts) {
  // Pipelines across nodes, TP and CP within, several replicas; and ring attention spanning nodes (its hops use
  // the GPUs' own links).
  const CostModel cost = h100_qwen_cost(2);
  IterationPlan pipeline;
  pipeline.replicas = {replica(scheme(2, 2, 2), {0, 1, 2, 3, 8, 9, 10, 11},
                               {micro_batch({sharded(1, 4096)}), micro_batch({on_rank(2, 512, 1)})}),
                       replica(scheme(1, 1, 4), {4, 5, 6, 7}, {micro_batch({sharded(3, 8192)})}),
                       replica(scheme(1, 1, 4), {12, 13, 14, 15}, {micro_batch({sharded(4, 8192)})})};
  EXPECT_EQ(undeclared_flows(pipeline, cost), std::vector<std::string>{});

  CostModelOptions ring_options;
  ring_options.cp_attention = CpAttention::Zigzag;
  const CostModel ring_cost = h100_qwen_cost(2, ring_options);
  IterationPlan ring;
  ring.replicas = {replica(scheme(1, 1, 16), range(0, 16), {micro_batch({sharded(1, 65536)})})};
  EXPECT_EQ(undeclared_flows(ring, ring_cost), std::vector<std::string>{});
  // The check can fail: declared as an all-to-all group, the ring's hops would be missing (the GPUs' own links).
  const auto as_set = [](const std::vector<LinkUse>& uses) { return std::set<LinkUse>(uses.begin(), uses.end()); };
  const auto all_to_all = as_set(sim::link_uses(ring_cost.cluster(), range(0, 16), WorkKind::CpAllToAll));
  const auto hops = as_set(sim::link_uses(ring_cost.cluster(), range(0, 16), WorkKind::CpRing));
  EXPECT_FALSE(std::includes(all_to_all.begin(), all_to_all.end(), hops.begin(), hops.end()));
}

TEST(SimFlowGroups, ExclusiveGroupsHaveTheirLinksToThemselves) {
  const ClusterSpec c = testing::sim_tiny_cost(2, 4).cluster();  // two nodes of four
  using G = program::FlowGroup;
  const std::vector<G> groups = {
      {{0, 1, 2, 3}, WorkKind::CpAllToAll},  // node 0, NVLink ...
      {{3, 2}, WorkKind::TpCollective},      // ... sharing GPUs 2-3's links with a smaller group: neither
      {{5, 4}, WorkKind::CpAllToAll},        // node 1, alone: yes, as a sorted set
      {{6, 7}, WorkKind::CpAllToAll},        // node 1, with a pipeline pair over the same GPUs: yes
      {{6, 7}, WorkKind::PpActivation},      //
      {{0, 4}, WorkKind::GradAllReduce},     // InfiniBand, NICs 0 and 4 alone (leaf links do not count): yes
      {{1, 5}, WorkKind::GradAllReduce},     // InfiniBand, sharing NIC 1 with a pipeline pair: neither
      {{1, 6}, WorkKind::PpActivation},      //
      {{3}, WorkKind::CpAllToAll},           // one GPU: no flows
  };
  EXPECT_EQ(sim::exclusive_groups(c, groups), (std::set<std::vector<int>>{{0, 4}, {4, 5}, {6, 7}}));
}

TEST(SimPlatform, GpusCrossedByTheSameUsesShareOneLink) {
  const std::string text = testing::in_child_process([] {
    const auto engine = testing::make_sim_engine();
    const ClusterSpec c = testing::sim_tiny_cost(2, 4).cluster();  // the toy cluster, with link bandwidths
    // NVLink: an aggregate over node 0, and GPU 0 on its own (a pipeline neighbour, say). InfiniBand: one
    // aggregate per node (a group over all 8 GPUs). GPU 7's NVLink link: no use.
    std::vector<LinkUse> uses = sim::link_uses(c, range(0, 8), WorkKind::GradAllReduce);
    uses.push_back({LinkClass::NvLink, {0, 1, 2, 3}});
    uses.push_back({LinkClass::NvLink, {0}});
    uses.push_back({LinkClass::NvLink, {4, 5, 6}});
    std::ostringstream out;
    const sim::Platform merged(c, uses);
    for (int g : {0, 1, 4, 7}) out << merged.link_sharers(g, LinkClass::NvLink) << ' ';
    out << merged.link_sharers(5, LinkClass::InfiniBand) << ' ';
    out << (merged.endpoint(0, LinkClass::NvLink) == merged.gpu(0)) << ' ';
    out << (merged.endpoint(7, LinkClass::NvLink) == merged.gpu(7)) << ' ';
    for (const auto& [gpu, link] : {std::pair{1, LinkClass::NvLink}, std::pair{5, LinkClass::InfiniBand}}) {
      try {
        merged.endpoint(gpu, link);
        out << "alone ";
      } catch (const std::logic_error&) {
        out << "refused ";
      }
    }
    return out.str();
  });
  EXPECT_EQ(text, "1 3 3 1 4 1 1 refused refused ");
}

TEST(SimPlatform, WithoutMergingEveryGpuKeepsItsLinks) {
  const std::string text = testing::in_child_process([] {
    const auto engine = testing::make_sim_engine();
    const ClusterSpec c = testing::sim_tiny_cost(1, 4).cluster();  // the toy cluster, with link bandwidths
    const sim::Platform platform(c, sim::link_uses(c, range(0, 4), WorkKind::CpAllToAll), false);
    std::ostringstream out;
    for (int g = 0; g < 4; ++g) out << platform.link_sharers(g, LinkClass::NvLink) << ' ';
    out << (platform.aggregate(range(0, 4), LinkClass::NvLink).first != nullptr);
    return out.str();
  });
  EXPECT_EQ(text, "1 1 1 1 1");
}

TEST(SimPlatform, ClosedFormForExclusiveGroupsChangesNoSimulatedTime) {
  // Two nodes of 8, uneven micro-batches so that the groups do not move in step. First: node 0 holds a CP group
  // alone on its NVLink links (closed form), node 1 CP 4 x TP 2, whose CP and TP groups share GPUs (flows), ZeRO
  // within each node. Second: a CP group per node and ZeRO across both, alone on the NICs (closed form, over
  // InfiniBand).
  const CostModel cost = h100_qwen_cost(2);
  std::vector<std::vector<IterationPlan>> cases(2, std::vector<IterationPlan>(2));
  for (int k = 0; k < 2; ++k) {
    const ParallelScheme second = k == 0 ? scheme(2, 1, 4) : scheme(1, 1, 8);
    cases[k][0].replicas = {
        replica(scheme(1, 1, 8), range(0, 8), {micro_batch({sharded(1, 32768)}), micro_batch({on_rank(2, 4096, 3)})}),
        replica(second, range(8, 8), {micro_batch({sharded(3, 8192), on_rank(4, 2048, 0)})})};
    cases[k][1].index = 1;
    cases[k][1].replicas = {replica(scheme(1, 1, 8), range(0, 8), {micro_batch({sharded(5, 16384)})}),
                            replica(second, range(8, 8), {micro_batch({sharded(6, 65536)})})};
  }
  sim::SimulationOptions closed_form;
  closed_form.record_spans = true;
  sim::SimulationOptions flows = closed_form;
  flows.exclusive_closed_form = false;
  for (const auto& plans : cases) {
    const auto a = simulate_in_child(plans, cost, closed_form);
    ASSERT_EQ(a.size(), 2u);
    expect_same_timelines(a, simulate_in_child(plans, cost, flows));
  }
}

TEST(SimPlatform, MergedLinksChangeNoSimulatedTime) {
  // Two nodes of 8: a CP group filling each node (its 8 NVLink links merge into one) and ZeRO over all 16 GPUs
  // (each node's NICs merge); uneven micro-batches, so the groups do not move in step.
  const CostModel cost = h100_qwen_cost(2);
  std::vector<IterationPlan> plans(2);
  plans[0].replicas = {
      replica(scheme(1, 1, 8), range(0, 8), {micro_batch({sharded(1, 32768)}), micro_batch({on_rank(2, 4096, 3)})}),
      replica(scheme(1, 1, 8), range(8, 8), {micro_batch({sharded(3, 8192), on_rank(4, 2048, 0)})})};
  plans[1].index = 1;
  plans[1].replicas = {replica(scheme(1, 1, 8), range(0, 8), {micro_batch({sharded(5, 16384)})}),
                       replica(scheme(1, 1, 8), range(8, 8), {micro_batch({sharded(6, 65536)})})};
  sim::SimulationOptions merged;
  merged.record_spans = true;
  merged.exclusive_closed_form = false;  // the CP groups' flows are simulated: over merged links or not
  sim::SimulationOptions separate = merged;
  separate.merge_links = false;
  const auto a = simulate_in_child(plans, cost, merged);
  ASSERT_EQ(a.size(), 2u);
  expect_same_timelines(a, simulate_in_child(plans, cost, separate));
}

}  // namespace sim_platform_test
}  // namespace lcsim
