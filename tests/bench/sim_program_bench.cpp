// How the cost of turning a plan into per-GPU programs (sim/iteration_program.hpp) grows with the cluster: the
// scale scenarios' plans (scenarios/scale, 64 / 256 / 1024 GPUs, Skrull's default setting weak-scaled), built
// over and over into recycled storage as the executor does. Counters: GPUs, steps, and time per GPU (flat when the
// build is linear in the cluster). Synthetic data, uncalibrated default profile: for timing only.
//   build/tests/lcsim_bench --benchmark_filter=BM_BuildProgram
#include <benchmark/benchmark.h>

#include <string>

#include "program/iteration_program.hpp"
#include "traces/evaluation.hpp"
#include "traces/scenario_loader.hpp"

namespace lcsim::sim {
namespace {

void BM_BuildProgram(benchmark::State& state, const std::string& policy_label) {
  const int gpus = static_cast<int>(state.range(0));
  const LoadedScenario loaded =
      load_and_prepare(std::string(LCSIM_SOURCE_DIR) + "/scenarios/scale/sim-" + std::to_string(gpus) + "gpu.json");
  const PolicyPlans planned = plan_policy(loaded, *select_policies(loaded.scenario, {policy_label}).back());
  program::ProgramOptions options;
  options.describe_work = false;  // as the simulator builds them
  program::IterationProgram program;
  std::size_t next = 0;
  std::size_t steps = 0;
  for (auto _ : state) {
    program = program::build_program(planned.plans[next], *loaded.cost, options, std::move(program));
    benchmark::DoNotOptimize(program.gpus.data());
    for (const auto& gpu : program.gpus) steps += gpu.size();
    next = (next + 1) % planned.plans.size();
  }
  state.counters["gpus"] = gpus;
  state.counters["steps/iter"] = static_cast<double>(steps) / static_cast<double>(state.iterations());
  state.counters["per_gpu"] = benchmark::Counter(static_cast<double>(state.iterations()) * gpus,
                                                 benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetLabel(policy_label + ", one iteration's plan");
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

}  // namespace
}  // namespace lcsim::sim
