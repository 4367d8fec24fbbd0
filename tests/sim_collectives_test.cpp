// Collectives as flows on the platform: alone they take the cost model's time, sharing links they stretch.
// Each test starts its own SimGrid engine in a child process (sim_test_support.hpp).
#include "engine/simgrid_collectives.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <stdexcept>

#include "engine/platform.hpp"
#include "tests/sim_test_support.hpp"

namespace lcsim {
namespace sim_collectives_test {

using program::CollectiveSpec;
using sim::CollectiveRun;
using sim::Platform;
namespace sg4 = simgrid::s4u;

ClusterSpec cluster(int nodes, int gpus_per_node) {
  ClusterSpec c;
  c.gpu.name = "toy";
  c.nodes = nodes;
  c.gpus_per_node = gpus_per_node;
  c.nvlink_GBps = 400;
  c.ib_GBps = 50;
  return c;
}

CollectiveSpec spec(std::vector<int> gpus, LinkClass link, double latency_s, double transfer_s) {
  CollectiveSpec s;
  s.gpus = std::move(gpus);
  s.link = link;
  s.time = {latency_s, transfer_s};
  return s;
}

/// Every collective of `specs` started at time 0, each by its own actor with every member arrived ready at 0 (as the
/// executor's runner does); returns each one's end time.
std::vector<double> run_concurrently(const ClusterSpec& c, const std::vector<CollectiveSpec>& specs, bool aggregates) {
  const std::string text = testing::in_child_process([&] {
    const auto engine = testing::make_sim_engine();
    std::vector<sim::LinkUse> uses;
    if (aggregates)
      for (const auto& s : specs)
        for (auto& use : sim::link_uses(c, s.gpus, s.kind)) uses.push_back(std::move(use));
    const Platform platform(c, uses);
    sim::FlowCache flows(platform);  // one for all runners, as in the executor
    std::vector<CollectiveRun> runs(specs.size());
    std::vector<double> ends(specs.size(), -1);
    for (std::size_t i = 0; i < specs.size(); ++i)
      sg4::Actor::create("runner", platform.gpu(specs[i].gpus.front()), [&, i] {
        for (int g : specs[i].gpus) runs[i].arrive(specs[i], g, 0.0);
        const sim::CommInterval interval = runs[i].run(flows, specs[i]);
        // The runner returns when the collective is over: its clock is the end.
        ends[i] = std::max(interval.end, sg4::Engine::get_clock());
      });
    engine->run();
    std::ostringstream out;
    out.precision(17);
    for (double e : ends) out << e << ' ';
    return out.str();
  });
  std::vector<double> ends;
  std::istringstream in(text);
  for (double e = 0; in >> e;) ends.push_back(e);
  return ends;
}

TEST(SimCollectives, AloneACollectiveTakesItsLatencyPlusTransfer) {
  for (bool aggregates : {false, true}) {
    const auto ends = run_concurrently(cluster(1, 4), {spec({0, 1, 2, 3}, LinkClass::NvLink, 1e-3, 2e-3)}, aggregates);
    ASSERT_EQ(ends.size(), 1u);
    EXPECT_NEAR(ends[0], 3e-3, 1e-9) << "aggregates " << aggregates;
  }
}

TEST(SimCollectives, CollectivesSharingGpusShareTheirLinks) {
  // Two collectives on GPUs {0, 1} at once: every NVLink link carries two flows, each at half the bandwidth.
  // A third on {2, 3} uses other links and is not slowed.
  for (bool aggregates : {false, true}) {
    const auto ends =
        run_concurrently(cluster(1, 4),
                         {spec({0, 1}, LinkClass::NvLink, 1e-3, 2e-3), spec({0, 1}, LinkClass::NvLink, 1e-3, 2e-3),
                          spec({2, 3}, LinkClass::NvLink, 1e-3, 2e-3)},
                         aggregates);
    ASSERT_EQ(ends.size(), 3u);
    EXPECT_NEAR(ends[0], 1e-3 + 4e-3, 1e-9) << "aggregates " << aggregates;
    EXPECT_NEAR(ends[1], 1e-3 + 4e-3, 1e-9) << "aggregates " << aggregates;
    EXPECT_NEAR(ends[2], 3e-3, 1e-9) << "aggregates " << aggregates;
  }
}

TEST(SimCollectives, InfiniBandCollectivesContendOnTheNics) {
  // Two nodes of two GPUs. A group over all four GPUs and one over GPUs 0 and 2 share the NICs of GPUs 0 and 2;
  // a group over 1 and 3 started beside the first shares the NICs of 1 and 3.
  for (bool aggregates : {false, true}) {
    const auto alone =
        run_concurrently(cluster(2, 2), {spec({0, 1, 2, 3}, LinkClass::InfiniBand, 1e-3, 2e-3)}, aggregates);
    ASSERT_EQ(alone.size(), 1u);
    EXPECT_NEAR(alone[0], 3e-3, 1e-9);
    const auto shared = run_concurrently(
        cluster(2, 2),
        {spec({0, 1, 2, 3}, LinkClass::InfiniBand, 1e-3, 2e-3), spec({0, 2}, LinkClass::InfiniBand, 1e-3, 2e-3)},
        aggregates);
    ASSERT_EQ(shared.size(), 2u);
    EXPECT_NEAR(shared[1], 1e-3 + 4e-3, 1e-9) << "aggregates " << aggregates;
    // The four-GPU collective ends with its slowest flow, which shared a NIC.
    EXPECT_NEAR(shared[0], 1e-3 + 4e-3, 1e-9) << "aggregates " << aggregates;
  }
}

TEST(SimCollectives, AnOversubscribedFabricIsSharedByTheGroupsCrossingIt) {
  // Two nodes of 4 GPUs under a 2:1 fabric: a node's uplink carries 2 NICs' worth. A group of all 8 GPUs is priced
  // at half a NIC per GPU (Topology::collective_path) and alone takes its priced time; two groups of 2 per node
  // each fit alone, but together they fill the uplinks twice over and take twice as long -- on a non-blocking
  // fabric they would not slow each other at all (separate NICs).
  ClusterSpec over = cluster(2, 4);
  over.topology_kind = std::make_shared<const FatTree>(2.0);
  const std::vector<int> all{0, 1, 2, 3, 4, 5, 6, 7};
  const CollectivePath path = over.topology().collective_path(CollectiveOp::AllToAll, all);
  EXPECT_EQ(path.bandwidth_scale, 0.5);
  CollectiveSpec whole = spec(all, LinkClass::InfiniBand, 1e-3, 4e-3);  // transfer already at the priced rate
  whole.flow_scale = path.bandwidth_scale;
  for (bool aggregates : {false, true}) {
    const auto alone = run_concurrently(over, {whole}, aggregates);
    ASSERT_EQ(alone.size(), 1u);
    EXPECT_NEAR(alone[0], 5e-3, 1e-9) << "aggregates " << aggregates;
    const std::vector<CollectiveSpec> pair{spec({0, 1, 4, 5}, LinkClass::InfiniBand, 1e-3, 2e-3),
                                           spec({2, 3, 6, 7}, LinkClass::InfiniBand, 1e-3, 2e-3)};
    EXPECT_EQ(over.topology().collective_path(CollectiveOp::AllToAll, pair[0].gpus).bandwidth_scale, 1.0);
    const auto shared = run_concurrently(over, pair, aggregates);
    ASSERT_EQ(shared.size(), 2u);
    EXPECT_NEAR(shared[0], 1e-3 + 4e-3, 1e-9) << "aggregates " << aggregates;
    EXPECT_NEAR(shared[1], 1e-3 + 4e-3, 1e-9) << "aggregates " << aggregates;
    const auto free = run_concurrently(cluster(2, 4), pair, aggregates);
    EXPECT_NEAR(free[0], 3e-3, 1e-9) << "aggregates " << aggregates;
  }
  // Exclusivity sees the uplinks: the two groups share none of their NICs but do share both nodes' uplinks.
  std::vector<program::FlowGroup> groups{{{0, 1, 4, 5}, program::WorkKind::CpAllToAll},
                                         {{2, 3, 6, 7}, program::WorkKind::CpAllToAll}};
  EXPECT_TRUE(sim::exclusive_groups(over, groups).empty());
  EXPECT_EQ(sim::exclusive_groups(cluster(2, 4), groups).size(), 2u);
}

TEST(SimCollectives, FlowPlansUseOneFlowPerNodeWhereTheyCan) {
  const std::string text = testing::in_child_process([] {
    const auto engine = testing::make_sim_engine();
    const ClusterSpec c = cluster(2, 4);
    std::vector<sim::LinkUse> uses = sim::link_uses(c, {0, 1, 2, 3}, program::WorkKind::CpAllToAll);
    for (auto& use : sim::link_uses(c, {0, 1, 4, 5}, program::WorkKind::GradAllReduce)) uses.push_back(std::move(use));
    const Platform platform(c, uses);
    std::ostringstream out;
    // Registered, one node: one flow from the up aggregate to the down aggregate.
    const auto within = sim::plan_flows(platform, spec({0, 1, 2, 3}, LinkClass::NvLink, 1e-3, 1e-3));
    out << within.flows.size() << ' ' << within.bytes << ' ';
    // Registered, two nodes of two: one flow per node, node 0 -> node 1 and back.
    const auto across = sim::plan_flows(platform, spec({0, 1, 4, 5}, LinkClass::InfiniBand, 1e-3, 1e-3));
    out << across.flows.size() << ' ' << (across.flows[0].from != across.flows[1].from) << ' ';
    // Not registered, on links no use merged: one flow per member, each to a member on the other node.
    const auto plain = sim::plan_flows(platform, spec({2, 3, 6, 7}, LinkClass::InfiniBand, 1e-3, 1e-3));
    out << plain.flows.size() << ' ' << (plain.flows[0].to == platform.nic(6)) << ' ';
    // No transfer: no flow, the latency only.
    const auto empty = sim::plan_flows(platform, spec({0, 1}, LinkClass::NvLink, 1e-3, 0));
    out << empty.flows.size() << ' ' << empty.delay_s << ' ';
    // Not registered, over NICs merged for {0, 1, 4, 5}: refused rather than simulated on the wrong links.
    try {
      sim::plan_flows(platform, spec({0, 2, 4, 6}, LinkClass::InfiniBand, 1e-3, 1e-3));
      out << "planned";
    } catch (const std::logic_error&) {
      out << "refused";
    }
    return out.str();
  });
  // 1 ms at 400 GB/s: 4e8 bytes.
  EXPECT_EQ(text, "1 400000000 2 1 4 1 0 0.001 refused");
}

TEST(SimCollectives, ExclusiveCollectivesTakeTheirTimeAloneAndNeverOverlap) {
  // GPUs {0, 1} have their links to themselves: a collective there ends at start + latency + transfer, computed.
  // Two over the same GPUs at once would share those links: the second is refused, not timed as if alone.
  const std::string text = testing::in_child_process([] {
    const auto engine = testing::make_sim_engine();
    const ClusterSpec c = cluster(1, 4);
    const Platform platform(c, sim::link_uses(c, {0, 1}, program::WorkKind::CpAllToAll));
    sim::FlowCache flows(platform, {{0, 1}});
    const CollectiveSpec s = spec({0, 1}, LinkClass::NvLink, 1e-3, 2e-3);
    std::ostringstream out;
    out.precision(17);
    const auto run_at = [&](double ready) {
      CollectiveRun run;
      for (int g : s.gpus) run.arrive(s, g, ready);
      try {
        const sim::CommInterval interval = run.run(flows, s);
        out << interval.start << ' ' << interval.end << ' ';
      } catch (const std::logic_error&) {
        out << "refused ";
      }
    };
    out << CollectiveRun().immediate(flows, s) << ' ';
    run_at(1.0);    // alone: 1 + 1e-3 + 2e-3
    run_at(1.002);  // starts before the first ends
    run_at(1.003);  // starts as it ends
    return out.str();
  });
  EXPECT_EQ(text, "1 1 1.0029999999999999 refused 1.0029999999999999 1.0059999999999998 ");
}

TEST(SimCollectives, FlowCacheGivesThePlannedEndsOfEachGroupAndKind) {
  // Ring attention and the all-to-all over the same GPUs across nodes have different flows (hops vs one flow per
  // node): the cache must tell them apart, and a group it has seen must come back as planned, from the cache.
  const std::string text = testing::in_child_process([] {
    const auto engine = testing::make_sim_engine();
    const ClusterSpec c = cluster(2, 4);
    std::vector<sim::LinkUse> uses;
    for (auto kind : {program::WorkKind::CpAllToAll, program::WorkKind::CpRing})
      for (auto& use : sim::link_uses(c, {0, 1, 4, 5}, kind)) uses.push_back(std::move(use));
    for (auto& use : sim::link_uses(c, {0, 1, 2, 3}, program::WorkKind::CpAllToAll)) uses.push_back(std::move(use));
    const Platform platform(c, uses);
    sim::FlowCache cache(platform);
    CollectiveSpec all_to_all = spec({0, 1, 4, 5}, LinkClass::InfiniBand, 1e-3, 1e-3);
    CollectiveSpec ring = all_to_all;
    ring.kind = program::WorkKind::CpRing;
    const CollectiveSpec node = spec({0, 1, 2, 3}, LinkClass::NvLink, 1e-3, 5e-4);
    const auto same = [&](const CollectiveSpec& s) {
      const auto& cached = cache.flows(s);
      const auto planned = sim::plan_flows(platform, s).flows;
      bool equal = cached.size() == planned.size();
      for (std::size_t i = 0; equal && i < planned.size(); ++i)
        equal = cached[i].from == planned[i].from && cached[i].to == planned[i].to;
      return std::to_string(cached.size()) + (equal ? "=" : "!");
    };
    std::ostringstream out;
    for (int pass = 0; pass < 2; ++pass) out << same(all_to_all) << ' ' << same(ring) << ' ' << same(node) << ' ';
    out << (&cache.flows(ring) == &cache.flows(ring));
    return out.str();
  });
  EXPECT_EQ(text, "2= 4= 1= 2= 4= 1= 1");
}

TEST(SimCollectiveRun, ArrivalsCompleteWithTheLastMemberAndKeepTheirOrder) {
  const CollectiveSpec s = spec({4, 5, 6}, LinkClass::NvLink, 1e-6, 1e-3);
  CollectiveRun run;
  EXPECT_FALSE(run.arrive(s, 6, 2.0));
  EXPECT_FALSE(run.arrive(s, 4, 3.5));
  EXPECT_TRUE(run.arrive(s, 5, 1.0));
  EXPECT_EQ(run.members(), (std::vector<int>{6, 4, 5}));
}

TEST(SimCollectiveRun, RunStartsWhenTheLastMemberIsReadyAndTakesTheCostModelTime) {
  // Arrivals recorded without blocking (as the executor does), then one actor runs it: it starts at the latest
  // ready time (2.5 s), waits the latency and moves the flows: ends at 2.5 + 1e-3 + 2e-3. A one-GPU group is a
  // local delay from its member's ready time.
  const std::string text = testing::in_child_process([] {
    const auto engine = testing::make_sim_engine();
    const Platform platform(cluster(1, 4));
    const CollectiveSpec four = spec({0, 1, 2, 3}, LinkClass::NvLink, 1e-3, 2e-3);
    const CollectiveSpec one = spec({2}, LinkClass::NvLink, 0.25, 0.5);
    sim::CommInterval a;
    sim::CommInterval b;
    sim::FlowCache flows(platform);
    sg4::Actor::create("runner", platform.gpu(0), [&] {
      CollectiveRun run;
      for (int g = 0; g < 4; ++g) run.arrive(four, g, g == 2 ? 2.5 : 0.5);
      a = run.run(flows, four);
      CollectiveRun alone;
      alone.arrive(one, 2, 7.0);
      b = alone.run(flows, one);
    });
    engine->run();
    std::ostringstream out;
    out.precision(17);
    out << a.start << ' ' << a.end << ' ' << b.start << ' ' << b.end;
    return out.str();
  });
  std::istringstream in(text);
  double a_start = 0, a_end = 0, b_start = 0, b_end = 0;
  in >> a_start >> a_end >> b_start >> b_end;
  EXPECT_NEAR(a_start, 2.5, 1e-12);
  EXPECT_NEAR(a_end, 2.503, 1e-9);
  EXPECT_DOUBLE_EQ(b_start, 7.0);
  EXPECT_DOUBLE_EQ(b_end, 7.75);
}

}  // namespace sim_collectives_test
}  // namespace lcsim
