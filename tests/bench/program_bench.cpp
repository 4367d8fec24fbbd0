// How the cost of turning a plan into per-GPU programs (program/iteration_program.hpp), and of `lcsim plan`'s
// estimate (the program replayed without contention), grows with the cluster: the scale scenarios' plans
// (scenarios/scale, 64 / 256 / 1024 GPUs, Skrull's default setting weak-scaled), built over and over into recycled
// storage as the executor and the evaluation loop do. Counters: GPUs, steps, and time per GPU (flat when the cost
// is linear in the cluster). Synthetic data, uncalibrated default profile: for timing only.
//   build/tests/lcsim_bench --benchmark_filter='BM_BuildProgram|BM_EstimateIteration'
#include <benchmark/benchmark.h>

#include <string>

#include "formats/scenario_loader.hpp"
#include "program/estimate.hpp"
#include "program/iteration_program.hpp"
#include "studies/evaluation.hpp"

namespace lcsim::program {
namespace {

struct ScalePlans {
  LoadedScenario loaded;
  PolicyPlans planned;
};
ScalePlans scale_plans(int gpus, const std::string& policy_label) {
  LoadedScenario loaded =
      load_and_prepare(std::string(LCSIM_SOURCE_DIR) + "/scenarios/scale/sim-" + std::to_string(gpus) + "gpu.json");
  PolicyPlans planned = plan_policy(loaded, *select_policies(loaded.scenario, {policy_label}).back());
  return {std::move(loaded), std::move(planned)};
}

void set_counters(benchmark::State& state, int gpus, std::size_t steps, const std::string& label) {
  state.counters["gpus"] = gpus;
  if (steps > 0) state.counters["steps/iter"] = static_cast<double>(steps) / static_cast<double>(state.iterations());
  state.counters["per_gpu"] = benchmark::Counter(static_cast<double>(state.iterations()) * gpus,
                                                 benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetLabel(label);
}

void BM_BuildProgram(benchmark::State& state, const std::string& policy_label) {
  const int gpus = static_cast<int>(state.range(0));
  const auto [loaded, planned] = scale_plans(gpus, policy_label);
  ProgramOptions options;
  options.describe_work = false;  // as the simulator builds them
  IterationProgram program;
  std::size_t next = 0;
  std::size_t steps = 0;
  for (auto _ : state) {
    program = build_program(planned.plans[next], *loaded.cost, options, std::move(program));
    benchmark::DoNotOptimize(program.gpus.lane_steps(0).data());
    for (const auto& gpu : program.gpus) steps += gpu.size();
    next = (next + 1) % planned.plans.size();
  }
  set_counters(state, gpus, steps, policy_label + ", one iteration's plan");
}

/// `lcsim plan`'s estimate of one iteration: build (into recycled storage) and replay.
void BM_EstimateIteration(benchmark::State& state, const std::string& policy_label) {
  const int gpus = static_cast<int>(state.range(0));
  const auto [loaded, planned] = scale_plans(gpus, policy_label);
  Estimator estimator(*loaded.cost);
  std::size_t next = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(estimator.estimate(planned.plans[next]).seconds);
    next = (next + 1) % planned.plans.size();
  }
  set_counters(state, gpus, 0, policy_label + ", one iteration's plan");
}

BENCHMARK_CAPTURE(BM_BuildProgram, deepspeed, std::string("deepspeed"))
    ->Arg(64)
    ->Arg(256)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_BuildProgram, skrull, std::string("skrull"))
    ->Arg(64)
    ->Arg(256)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EstimateIteration, deepspeed, std::string("deepspeed"))
    ->Arg(64)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EstimateIteration, skrull, std::string("skrull"))
    ->Arg(64)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace lcsim::program
