// Interleaved 1F1B (parallel.virtual_pp): the schedule's order, bubble and memory worked by hand on the toy cost
// model of policy_test_fixtures.hpp, and the scenario key's errors.
//
// The toy here: 8 layers, no vocabulary (so no LM head and every chunk costs the same), transfers of no cost. A
// layer over one 10-token sequence: forward 3 (1280 10) / 1000 / 3 + 3.5 (16 100) / 1000 / 3.5 = 12.8 + 1.6 =
// 14.4 s, backward 44.0 - 14.4 = 29.6 s; it holds 8 bytes a token (1 byte per hidden unit, hidden 8).
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "formats/scenario.hpp"
#include "model/plan_demand.hpp"
#include "model/validator.hpp"
#include "program/estimate.hpp"
#include "program/iteration_program.hpp"
#include "studies/evaluation.hpp"
#include "tests/policy_test_fixtures.hpp"
#include "tests/scenario_test_support.hpp"

namespace lcsim {
namespace interleaved_test {

using testing::micro_batch;
using testing::on_rank;
using testing::replica;

constexpr double kLayerForward = 14.4, kLayerBackward = 29.6;

/// On `gpus` GPUs: one pipeline fills them, so no GPU shares its slice of the model and no gradient sync runs.
CostModel toy(int layers, int gpus = 4) {
  ModelConfig model = testing::tiny_model(layers);
  model.vocab = 0;
  Profile profile = testing::tiny_profile();
  for (CollectiveFit& fit : profile.collectives)
    if (fit.op == CollectiveOp::SendRecv) fit.segments = {CollectiveSegment{0, 0, 1e12}};
  return CostModel(model, testing::tiny_cluster(1, gpus, 1e9), profile);
}

/// One replica of pp x 1 x 1 on GPUs 0..pp-1 with `m` micro-batches of one 10-token sequence each.
IterationPlan pipeline(int pp, int vpp, int m) {
  ParallelScheme s = testing::scheme(1, pp, 1);
  s.virtual_pp = vpp;
  std::vector<int> gpus;
  for (int g = 0; g < pp; ++g) gpus.push_back(g);
  std::vector<MicroBatch> mbs;
  for (int i = 0; i < m; ++i) mbs.push_back(micro_batch({on_rank(i, 10, 0)}));
  IterationPlan plan;
  plan.replicas = {replica(s, gpus, mbs)};
  return plan;
}

// Megatron-LM's bubble (Narayanan et al. 2021): with v chunks a stage computes m v (t_f + t_b) / v and idles
// (p - 1) (t_f + t_b) / v, t_f and t_b a whole stage's forward and backward. p 4, 8 layers: a stage's two layers
// take t_f + t_b = 2 x 44 = 88 s.
TEST(Interleaved, BubbleShrinksByTheVirtualDegree) {
  const CostModel cost = toy(8);
  const double stage = 2 * (kLayerForward + kLayerBackward);
  // v = 1: (m + p - 1) (t_f + t_b) = 11 x 88 = 968 s; v = 2: (m + (p - 1) / 2) (t_f + t_b) = 9.5 x 88 = 836 s.
  EXPECT_NEAR(program::estimate_iteration(pipeline(4, 1, 8), cost).seconds, (8 + 3) * stage, 1e-6);
  EXPECT_NEAR(program::estimate_iteration(pipeline(4, 2, 8), cost).seconds, (8 + 3.0 / 2) * stage, 1e-6);
  // v = 4 (one layer a chunk, 16 layers): (8 + 3 / 4) x 4 x 44 = 1540 s against 11 x 176 = 1936 s.
  const CostModel deep = toy(16);
  EXPECT_NEAR(program::estimate_iteration(pipeline(4, 4, 8), deep).seconds, (8 + 3.0 / 4) * 4 * 44, 1e-6);
  EXPECT_NEAR(program::estimate_iteration(pipeline(4, 1, 8), deep).seconds, (8 + 3) * 4 * 44, 1e-6);
}

/// A stage's passes in order, "F<micro-batch>.<chunk>" or "B<micro-batch>.<chunk>". A pass's chunk follows from
/// the transfer it waits for (transfers are numbered micro-batch by micro-batch, boundary by boundary, activations
/// before gradients, with tp = cp = 1); a pass that waits for none is the first forward or the last backward chunk.
std::vector<std::string> stage_order(const IterationPlan& plan, const CostModel& cost, int stage) {
  const ParallelScheme& s = plan.replicas[0].scheme;
  const int boundaries = s.pp * s.virtual_pp - 1;
  const program::IterationProgram prog = program::build_program(plan, cost, {});
  std::vector<std::string> out;
  int waited = -1;  // the virtual stage whose transfer the next pass waited for
  for (const program::Step& step : prog.gpus[static_cast<std::size_t>(stage)]) {
    if (step.type == program::Step::Type::Recv) {
      const program::TransferSpec& t = prog.transfers[static_cast<std::size_t>(step.index)];
      const bool activations = t.kind == program::WorkKind::PpActivation;
      EXPECT_EQ(step.index % 2, activations ? 0 : 1);
      const int boundary = (step.index / 2) % boundaries;
      waited = activations ? boundary + 1 : boundary;  // the pass's own virtual stage
      continue;
    }
    if (step.type != program::Step::Type::Compute) continue;
    const bool forward = step.kind == program::WorkKind::Forward;
    const int vstage = waited >= 0 ? waited : (forward ? stage : (s.virtual_pp - 1) * s.pp + stage);
    EXPECT_EQ(vstage % s.pp, stage);
    out.push_back((forward ? "F" : "B") + std::to_string(step.micro_batch) + "." + std::to_string(vstage / s.pp));
    waited = -1;
  }
  return out;
}

// Megatron's interleaved order written out by hand for p 2, v 2, m 4: the forwards run micro-batches in groups of
// p through chunk 0 then chunk 1 (F0.0 F1.0 F0.1 F1.1 F2.0 F3.0 F2.1 F3.1), the k-th backward mirrors the k-th
// forward's chunk; stage s warms up with 2 (p - 1 - s) + (v - 1) p forwards: 4 on stage 0, 2 on stage 1.
TEST(Interleaved, StagesRunMegatronsOrder) {
  const CostModel cost = toy(4, 2);
  const IterationPlan plan = pipeline(2, 2, 4);
  EXPECT_EQ(stage_order(plan, cost, 0),
            (std::vector<std::string>{"F0.0", "F1.0", "F0.1", "F1.1", "F2.0", "B0.1", "F3.0", "B1.1", "F2.1", "B0.0",
                                      "F3.1", "B1.0", "B2.1", "B3.1", "B2.0", "B3.0"}));
  EXPECT_EQ(stage_order(plan, cost, 1),
            (std::vector<std::string>{"F0.0", "F1.0", "F0.1", "B0.1", "F1.1", "B1.1", "F2.0", "B0.0", "F3.0", "B1.0",
                                      "F2.1", "B2.1", "F3.1", "B3.1", "B2.0", "B3.0"}));
  // Plain 1F1B on the same stages (two layers each, one pass per micro-batch): one warm-up forward on stage 0.
  EXPECT_EQ(stage_order(pipeline(2, 1, 4), cost, 0),
            (std::vector<std::string>{"F0.0", "F1.0", "B0.0", "F2.0", "B1.0", "F3.0", "B2.0", "B3.0"}));
}

// A count that is not a multiple of pp runs as if rounded up, the absent micro-batches' passes skipped: p 2, v 2,
// m 3 is the order above without micro-batch 3; every pipeline shape finishes (none waits forever).
TEST(Interleaved, ACountNotAMultipleOfPpSkipsTheAbsentPasses) {
  const CostModel cost = toy(4, 2);
  EXPECT_EQ(stage_order(pipeline(2, 2, 3), cost, 0),
            (std::vector<std::string>{"F0.0", "F1.0", "F0.1", "F1.1", "F2.0", "B0.1", "B1.1", "F2.1", "B0.0", "B1.0",
                                      "B2.1", "B2.0"}));
  for (int pp : {2, 3, 4, 6})
    for (int vpp : {2, 4})
      for (int m : {1, 2, 5, 7, 9, 13}) {
        if (24 % (pp * vpp) != 0) continue;
        const auto e = program::estimate_iteration(pipeline(pp, vpp, m), toy(24, pp));
        // Every pass runs once: the busiest stage computes m x (its layers' forward + backward).
        EXPECT_NEAR(e.busy_seconds[0], m * (24 / pp) * (kLayerForward + kLayerBackward), 1e-6)
            << pp << " " << vpp << " " << m;
      }
}

// Memory: stage s holds 2 (p - 1 - s) + (v - 1) p + 1 chunk activations at once against p - s whole stages' with
// plain 1F1B. p 4, 8 layers, 10 tokens: a chunk of one layer holds 80 bytes, a stage of two 160.
//   stage 0: v = 1 4 x 160 = 640 bytes, v = 2 11 x 80 = 880;  stage 3: v = 1 1 x 160 = 160, v = 2 5 x 80 = 400.
TEST(Interleaved, MemoryChargesWhatTheScheduleHolds) {
  const CostModel cost = toy(8);
  const auto plain = program::estimate_iteration(pipeline(4, 1, 8), cost).peak_bytes;
  const auto interleaved = program::estimate_iteration(pipeline(4, 2, 8), cost).peak_bytes;
  EXPECT_NEAR(plain[0], 640, 1e-9);
  EXPECT_NEAR(interleaved[0], 880, 1e-9);
  EXPECT_NEAR(plain[3], 160, 1e-9);
  EXPECT_NEAR(interleaved[3], 400, 1e-9);
  // The planning bound (the validator's) counts the same passes in flight.
  const auto bound = estimate_peak_bytes(pipeline(4, 2, 8), cost);
  for (int g = 0; g < 4; ++g)
    EXPECT_NEAR(bound[static_cast<std::size_t>(g)], interleaved[static_cast<std::size_t>(g)], 1e-9);
}

// The planning bound holds every peak an interleaved program reaches on a shipped scenario's plans (WLB-LLM's
// variable micro-batch counts included).
TEST(Interleaved, ProgramPeaksStayWithinThePlanningBound) {
  const LoadedScenario loaded =
      load_and_prepare(std::string(LCSIM_SOURCE_DIR) + "/scenarios/wlbllm/7b-64k-32gpu.json", 2);
  ASSERT_EQ(loaded.scenario.layout.virtual_pp, 2);
  for (const PolicySpec& spec : loaded.scenario.policies)
    for (const IterationPlan& plan : plan_policy(loaded, spec).plans) {
      const auto bound = estimate_peak_bytes(plan, *loaded.cost);
      const auto peaks = program::estimate_iteration(plan, *loaded.cost).peak_bytes;
      ASSERT_EQ(bound.size(), peaks.size());
      for (std::size_t g = 0; g < peaks.size(); ++g) EXPECT_LE(peaks[g], bound[g] * (1 + 1e-12)) << spec.label;
    }
}

// v times as many stage-boundary transfers: p v - 1 boundaries a micro-batch, each way.
TEST(Interleaved, TransfersCrossEveryChunkBoundary) {
  const CostModel cost = toy(8);
  EXPECT_EQ(program::build_program(pipeline(4, 1, 8), cost, {}).transfers.size(), 8u * 3 * 2);
  const program::IterationProgram prog = program::build_program(pipeline(4, 2, 8), cost, {});
  ASSERT_EQ(prog.transfers.size(), 8u * 7 * 2);
  // Boundary 3 joins the last stage's chunk 0 to the first stage's chunk 1.
  EXPECT_EQ(prog.transfers[2 * 3].from, 3);
  EXPECT_EQ(prog.transfers[2 * 3].to, 0);
}

TEST(Interleaved, ValidatorRefusesChunksThatDoNotDivide) {
  const CostModel cost = toy(8);
  IterationPlan plan = pipeline(4, 2, 2);
  plan.replicas[0].scheme.virtual_pp = 3;
  const ValidationReport report = validate_plan(plan, plan_sequences(plan), cost);
  EXPECT_FALSE(report.structurally_valid());
  EXPECT_NE(report.summary().find("virtual_pp 3 needs pp >= 2 and 4 x 3 model chunks dividing"), std::string::npos)
      << report.summary();
}

std::string error_of(const nlohmann::json& doc) {
  return testing::scenario_error(doc);
}

// Qwen2.5-0.5B: 24 layers.
TEST(Interleaved, ScenarioKeyNamesFileAndField) {
  nlohmann::json doc = testing::minimal_scenario();
  doc["parallel"] = {{"cp", 4}, {"pp", 4}, {"virtual_pp", 2}};
  EXPECT_EQ(scenario_from_json(doc, testing::kScenarioFile).layout.virtual_pp, 2);
  EXPECT_EQ(describe_layout(scenario_from_json(doc, testing::kScenarioFile).layout), "dp=1 cp=4 tp=1 pp=4 vpp=2");
  doc["parallel"]["virtual_pp"] = 4;  // 6 layers a stage
  EXPECT_EQ(error_of(doc), testing::kScenarioFile +
                               ": parallel.virtual_pp: every model chunk holds the same number of layers, but 4 does "
                               "not divide the 6 layers of a stage (24 layers of Qwen2.5-0.5B over pp 4)");
  doc["parallel"]["virtual_pp"] = 0;
  EXPECT_NE(error_of(doc).find(testing::kScenarioFile + ": parallel.virtual_pp: "), std::string::npos);
  doc["parallel"] = {{"cp", 16}, {"virtual_pp", 2}};
  EXPECT_EQ(error_of(doc), testing::kScenarioFile +
                               ": parallel.virtual_pp: interleaved 1F1B splits each pipeline stage into model "
                               "chunks, so it needs pp >= 2 (pp is 1)");
  doc["parallel"] = {{"cp", 16}, {"virtual_pp", 1}};
  EXPECT_EQ(scenario_from_json(doc, testing::kScenarioFile).layout.virtual_pp, 1);
  doc["parallel"]["virtual_pipeline"] = 2;  // unknown keys stay errors
  EXPECT_NE(error_of(doc).find("virtual_pipeline"), std::string::npos);
}

// The command line exits 2 on the bad key.
TEST(Interleaved, PlanExitsTwoOnABadVirtualDegree) {
  const testing::ScratchDir dir;
  nlohmann::json doc = testing::minimal_scenario();
  doc["profile"] = std::string(LCSIM_SOURCE_DIR) + "/calibrate/profiles/h100-sxm-default.json";
  doc["parallel"] = {{"cp", 4}, {"pp", 4}, {"virtual_pp", 5}};
  const std::string file = (dir.path / "s.json").string();
  std::ofstream(file) << doc.dump();
  const auto run = testing::run_lcsim("plan " + file);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.output.find(file + ": parallel.virtual_pp: "), std::string::npos) << run.output;
}

}  // namespace interleaved_test
}  // namespace lcsim
