// The work list's compute descriptors (program/iteration_program.hpp ComputeWork, collective calls, transfer bytes):
// what `lcsim-gpu live` executes must be exactly what the plan placed on each GPU. Toy cost model of
// policy_test_fixtures.hpp, and real Skrull / DeepSpeed plans of scenarios/live.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <unistd.h>

#include "base/errors.hpp"
#include "base/json_reader.hpp"
#include "live/live_plan.hpp"
#include "model/plan_demand.hpp"
#include "program/iteration_program.hpp"
#include "tests/policy_test_fixtures.hpp"

namespace lcsim {
namespace live_program_test {

using program::ComputeWork;
using program::Step;
using testing::micro_batch;
using testing::on_rank;
using testing::replica;
using testing::scheme;
using testing::sharded;
using testing::tiny_cost;

constexpr double kTol = 1e-9;

std::vector<const ComputeWork*> works_of(const program::IterationProgram& program, int gpu) {
  std::vector<const ComputeWork*> out;
  for (const Step& s : program.gpus[static_cast<std::size_t>(gpu)])
    if (s.type == Step::Type::Compute || s.type == Step::Type::ComputeWithCollective) {
      EXPECT_GE(s.work, 0);
      out.push_back(&program.works.at(static_cast<std::size_t>(s.work)));
    }
  return out;
}

IterationPlan dacp_plan(bool overlap) {
  IterationPlan plan;
  plan.replicas = {
      replica(scheme(1, 1, 2), {0, 1}, {micro_batch({on_rank(1, 10, 0), on_rank(3, 6, 1), sharded(2, 20)})}, overlap)};
  return plan;
}

TEST(LiveProgram, ComputeWorkNamesEachRanksSequencesAndShards) {
  const CostModel cost = tiny_cost(1, 2);
  const auto program = program::build_program(dacp_plan(false), cost, {});
  for (int g : {0, 1}) {
    const auto works = works_of(program, g);
    ASSERT_EQ(works.size(), 1u) << "GPU " << g;
    const ComputeWork& w = *works[0];
    EXPECT_EQ(w.pass, ComputeWork::Pass::ForwardBackward);
    EXPECT_EQ(w.layers, 2);
    EXPECT_EQ(w.tp, 1);
    EXPECT_TRUE(w.lm_head);
    EXPECT_EQ(w.recompute, Recompute::Selective);
    // Rank 0: its own sequence 1 whole, then the shard of sequence 2; rank 1: sequence 3, the shard.
    const std::int64_t own = g == 0 ? 1 : 3;
    const Tokens own_tokens = g == 0 ? 10 : 6;
    EXPECT_EQ(w.sequence_ids, (std::vector<std::int64_t>{own, 2}));
    ASSERT_EQ(w.shares.size(), 2u);
    EXPECT_EQ(w.shares[0].sequence_tokens, own_tokens);
    EXPECT_EQ(w.shares[0].cp, 1);
    EXPECT_EQ(w.shares[1].sequence_tokens, 20);
    EXPECT_EQ(w.shares[1].cp, 2);
  }
  // The step's seconds are the cost model's for exactly those shares.
  const Step& step = program.gpus[0][1];
  EXPECT_NEAR(step.seconds,
              cost.compute_seconds(program.works[static_cast<std::size_t>(step.work)].shares, scheme(1, 1, 2), 2, true),
              kTol);
}

TEST(LiveProgram, OverlapSplitsLocalAndDistributedWork) {
  const CostModel cost = tiny_cost(1, 2);
  const auto program = program::build_program(dacp_plan(true), cost, {});
  const auto works = works_of(program, 0);
  ASSERT_EQ(works.size(), 2u);
  EXPECT_EQ(works[0]->sequence_ids, (std::vector<std::int64_t>{1}));  // beside the all-to-all
  EXPECT_EQ(works[0]->shares[0].cp, 1);
  EXPECT_EQ(works[1]->sequence_ids, (std::vector<std::int64_t>{2}));  // after it
  EXPECT_EQ(works[1]->shares[0].cp, 2);
  EXPECT_EQ(program.gpus[0][1].type, Step::Type::ComputeWithCollective);
}

TEST(LiveProgram, PipelineStagesSplitForwardAndBackwardAndOnlyTheLastHasTheHead) {
  const CostModel cost = tiny_cost(1, 2);
  IterationPlan plan;
  plan.replicas = {
      replica(scheme(1, 2, 1), {0, 1}, {micro_batch({on_rank(1, 10, 0)}), micro_batch({on_rank(2, 7, 0)})})};
  const auto program = program::build_program(plan, cost, {});
  for (int g : {0, 1}) {
    std::map<int, std::vector<ComputeWork::Pass>> passes;  // per micro-batch
    for (const Step& s : program.gpus[static_cast<std::size_t>(g)]) {
      if (s.type != Step::Type::Compute) continue;
      const ComputeWork& w = program.works[static_cast<std::size_t>(s.work)];
      passes[s.micro_batch].push_back(w.pass);
      EXPECT_EQ(w.layers, 1);  // 2 layers over 2 stages
      EXPECT_EQ(w.lm_head, g == 1);
      EXPECT_EQ(w.sequence_ids, (std::vector<std::int64_t>{s.micro_batch == 0 ? 1 : 2}));
    }
    for (const auto& [m, p] : passes)
      EXPECT_EQ(p, (std::vector<ComputeWork::Pass>{ComputeWork::Pass::Forward, ComputeWork::Pass::Backward}));
  }
  // Transfers carry a rank's activations: tokens x hidden x 2 bytes / tp.
  ASSERT_FALSE(program.transfers.empty());
  EXPECT_NEAR(program.transfers[0].bytes, 10 * 8 * 2.0, kTol);
}

TEST(LiveProgram, OptimizerWorkUpdatesTheGpusShardAndCollectivesCarryTheirCalls) {
  Profile profile = testing::tiny_profile();
  profile.compute.optimizer_us_per_mparam = 1e6;
  const CostModel cost = tiny_cost(1, 2, profile);
  const auto program = program::build_program(dacp_plan(false), cost, {});
  const ParallelScheme s = scheme(1, 1, 2);
  bool optimizer = false;
  for (const Step& step : program.gpus[1])
    if (step.kind == program::WorkKind::Optimizer) {
      const ComputeWork& w = program.works[static_cast<std::size_t>(step.work)];
      EXPECT_EQ(w.pass, ComputeWork::Pass::Optimizer);
      EXPECT_NEAR(w.parameters, cost.parameters_per_gpu(s) / 2, kTol);  // ZeRO-2 over the 2 GPUs
      optimizer = true;
    }
  EXPECT_TRUE(optimizer);
  // Every collective's calls are what its time is made of.
  for (const auto& spec : program.collectives) {
    ASSERT_FALSE(spec.calls.empty());
    const CollectiveTime t = cost.collective_time(spec.calls, spec.link);
    EXPECT_NEAR(t.latency_s, spec.time.latency_s, kTol);
    EXPECT_NEAR(t.transfer_s, spec.time.transfer_s, kTol);
  }
}

// Real plans: every placement's tokens appear on the GPUs of its CP rank (or, sharded, on every GPU of the group
// with that replica's cp), once per micro-batch, and nowhere else.
TEST(LiveProgram, EverySequenceRunsOnTheGpusItsPlanPlacesItOn) {
  LoadedScenario loaded = load_and_prepare(LCSIM_SOURCE_DIR "/scenarios/live/qwen2.5-0.5b-chatqa2-dp1-cp8.json", 1);
  const LivePlans live = plan_live(std::move(loaded), {});
  ASSERT_EQ(live.policies.size(), 2u);
  for (const LivePolicyPlans& policy : live.policies) {
    const IterationPlan& plan = policy.plans.at(0);
    const program::IterationProgram& program = policy.programs.at(0);
    // (gpu, replica, micro-batch) -> sequence id -> (tokens, cp), from the program's works.
    std::map<std::tuple<int, int, int>, std::map<std::int64_t, SequenceShare>> seen;
    for (std::size_t g = 0; g < program.gpus.size(); ++g)
      for (const Step& s : program.gpus[g]) {
        if (s.type != Step::Type::Compute && s.type != Step::Type::ComputeWithCollective) continue;
        const ComputeWork& w = program.works[static_cast<std::size_t>(s.work)];
        if (w.pass == ComputeWork::Pass::Optimizer) continue;
        ASSERT_EQ(w.shares.size(), w.sequence_ids.size());
        auto& ids = seen[{static_cast<int>(g), s.replica, s.micro_batch}];
        for (std::size_t k = 0; k < w.shares.size(); ++k)
          EXPECT_TRUE(ids.emplace(w.sequence_ids[k], w.shares[k]).second) << policy.label << ": twice on GPU " << g;
      }
    std::size_t expected_entries = 0;
    for (std::size_t r = 0; r < plan.replicas.size(); ++r) {
      const Replica& rep = plan.replicas[r];
      for (std::size_t m = 0; m < rep.micro_batches.size(); ++m)
        for (int j = 0; j < rep.scheme.cp; ++j) {
          std::map<std::int64_t, SequenceShare> want;
          for (const Placement& p : rep.micro_batches[m].placements)
            if (p.sharded() || p.cp_rank == j) want[p.sequence_id] = {p.tokens, p.sharded() ? rep.scheme.cp : 1};
          if (want.empty()) continue;
          const int g = rep.gpu(0, j, 0);
          const auto& got = seen[{g, static_cast<int>(r), static_cast<int>(m)}];
          ASSERT_EQ(got.size(), want.size()) << policy.label << " micro-batch " << m << " GPU " << g;
          for (const auto& [id, share] : want) {
            ASSERT_TRUE(got.count(id)) << policy.label << ": sequence " << id << " missing on GPU " << g;
            EXPECT_EQ(got.at(id).sequence_tokens, share.sequence_tokens);
            EXPECT_EQ(got.at(id).cp, share.cp);
          }
          ++expected_entries;
        }
    }
    std::size_t non_empty = 0;
    for (const auto& [key, ids] : seen) non_empty += ids.empty() ? 0 : 1;
    EXPECT_EQ(non_empty, expected_entries) << policy.label << ": work on GPUs the plan does not place it on";
  }
}

TEST(LiveProgram, RingAttentionIsRefusedNotMismeasured) {
  for (const char* mode : {"ring", "zigzag", "all-gather"}) {
    nlohmann::json scenario = parse_json_file(LCSIM_SOURCE_DIR "/scenarios/live/qwen2.5-0.5b-wikipedia-dp1-cp8.json");
    scenario["parallel"]["cp_attention"] = mode;
    scenario["profile"] = LCSIM_SOURCE_DIR "/calibrate/profiles/h100-sxm-default.json";
    const auto file = std::filesystem::temp_directory_path() / ("live-ring-" + std::to_string(::getpid()) + ".json");
    std::ofstream(file) << scenario.dump();
    try {
      plan_live(load_and_prepare(file.string(), 1), {});
      ADD_FAILURE() << "a " << mode << " scenario was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("parallel.cp_attention: live runs Ulysses context parallelism only"),
                std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("\"" + std::string(mode) + "\" is not executed live"), std::string::npos)
          << e.what();
    }
    std::filesystem::remove(file);
  }
}

TEST(LiveProgram, LoraIsRefusedNotMismeasured) {
  nlohmann::json scenario = parse_json_file(LCSIM_SOURCE_DIR "/scenarios/live/qwen2.5-0.5b-wikipedia-dp1-cp8.json");
  scenario["training"]["finetuning"] = {{"method", "lora"}, {"rank", 16}};
  try {
    plan_live(load_and_prepare(scenario, LCSIM_SOURCE_DIR "/scenarios/live/qwen2.5-0.5b-wikipedia-dp1-cp8.json", 1),
              {});
    ADD_FAILURE() << "a LoRA scenario was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("training.finetuning.method: live runs full fine-tuning only"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace live_program_test
}  // namespace lcsim
