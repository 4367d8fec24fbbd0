#include "sim/executor.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <exception>
#include <set>
#include <stdexcept>
#include <string>

#include "sim/collectives.hpp"
#include "sim/platform.hpp"
#include "sim/simgrid_compat.hpp"

namespace lcsim::sim {
namespace {

double process_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

struct GpuState {
  double busy = 0;
  double static_bytes = 0;
  double in_flight = 0;
  double peak = 0;
  std::vector<GpuSpan> spans;
};

class Simulation {
 public:
  Simulation(std::span<const IterationPlan* const> plans, const CostModel& cost, const SimulationOptions& options,
             const IterationCallback& on_iteration, const Platform& platform)
      : plans_(plans),
        cost_(cost),
        options_(options),
        on_iteration_(on_iteration),
        platform_(platform),
        gpus_(static_cast<std::size_t>(platform.world_size())),
        meeting_(gpus_.size()) {}

  void gpu_actor(int gpu) {
    try {
      for (;;) {
        meet();
        if (stop_) return;
        run_steps(gpu);
      }
    } catch (...) {
      // The others then wait forever and SimGrid ends the run as a deadlock; the error is rethrown after it.
      if (!error_) error_ = std::current_exception();
    }
  }

  std::exception_ptr error() const { return error_; }

 private:
  /// Every GPU arrives; the last one closes the iteration that just ended and prepares the next before they are
  /// all released.
  void meet() {
    meeting_.arrive([this] {
      try {
        if (running_) finish_iteration();
        if (next_ < plans_.size())
          start_iteration(next_++);
        else
          stop_ = true;
      } catch (...) {
        error_ = std::current_exception();
        stop_ = true;
      }
    });
  }

  void start_iteration(std::size_t index) {
    ProgramOptions program_options = options_.program;
    program_options.describe_work = false;  // work descriptors are for live replay; simulating reads seconds only
    program_ = build_program(*plans_[index], cost_, program_options);
    collectives_ = std::vector<CollectiveRun>(program_.collectives.size());
    transfers_ = std::vector<TransferRun>(program_.transfers.size());
    for (auto& gpu : gpus_) gpu = GpuState{};
    current_ = index;
    start_ = sg4::Engine::get_clock();
    wall_start_ = std::chrono::steady_clock::now();
    cpu_start_ = process_cpu_seconds();
    running_ = true;
  }

  void finish_iteration() {
    IterationOutcome outcome;
    outcome.index = current_;
    outcome.start_s = start_;
    outcome.seconds = sg4::Engine::get_clock() - start_;
    outcome.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count();
    outcome.cpu_s = process_cpu_seconds() - cpu_start_;
    for (auto& gpu : gpus_) {
      outcome.busy_seconds.push_back(gpu.busy);
      outcome.peak_bytes.push_back(gpu.peak);
      outcome.spans.insert(outcome.spans.end(), gpu.spans.begin(), gpu.spans.end());
    }
    running_ = false;
    on_iteration_(std::move(outcome));
  }

  void record(int gpu, double start, double end, WorkKind kind, const Step& step) {
    if (options_.record_spans && end > start)
      gpus_[static_cast<std::size_t>(gpu)].spans.push_back({gpu, start, end, kind, step.replica, step.micro_batch});
  }

  /// Runs a GPU's steps. Compute is not simulated step by step: `ready` is when the GPU's queued compute ends
  /// (it never shares anything, so only its end matters), and the GPU only waits for the clock where it meets
  /// others -- collectives take `ready` as its arrival, transfers and the end of the iteration wait until it.
  /// Same times as waiting after every compute, with one context switch per collective instead of two.
  void run_steps(int gpu) {
    GpuState& state = gpus_[static_cast<std::size_t>(gpu)];
    double ready = sg4::Engine::get_clock();
    const auto catch_up = [&ready] {
      if (ready > sg4::Engine::get_clock()) sg4::this_actor::sleep_until(ready);
    };
    for (const Step& step : program_.gpus[static_cast<std::size_t>(gpu)]) {
      if (step.type == Step::Type::SetStatic) {
        state.static_bytes = step.bytes;
        state.peak = std::max(state.peak, state.static_bytes + state.in_flight);
        continue;
      }
      state.in_flight += step.alloc_bytes;
      state.peak = std::max(state.peak, state.static_bytes + state.in_flight);
      switch (step.type) {
        case Step::Type::Compute:
          record(gpu, ready, ready + step.seconds, step.kind, step);
          ready += step.seconds;
          state.busy += step.seconds;
          break;
        case Step::Type::Collective: {
          const auto& spec = program_.collectives[static_cast<std::size_t>(step.index)];
          const CommInterval comm = collectives_[static_cast<std::size_t>(step.index)].join(platform_, spec, ready);
          state.busy += comm.end - comm.start;
          record(gpu, comm.start, comm.end, spec.kind, step);
          ready = std::max(ready, comm.end);
          break;
        }
        case Step::Type::ComputeWithCollective: {
          // The compute runs beside the collective, which does not wait for it (different engines of the GPU); it
          // starts when the GPU is ready but at most `lead_s` before the collective does. The step ends when both
          // have.
          const auto& spec = program_.collectives[static_cast<std::size_t>(step.index)];
          const CommInterval comm = collectives_[static_cast<std::size_t>(step.index)].join(platform_, spec, ready);
          const double compute_start = std::max(ready, comm.start - step.lead_s);
          const double compute_end = compute_start + step.seconds;
          const double overlap = std::max(0.0, std::min(compute_end, comm.end) - std::max(compute_start, comm.start));
          state.busy += step.seconds + (comm.end - comm.start) - overlap;
          record(gpu, compute_start, compute_end, step.kind, step);
          record(gpu, comm.start, comm.end, spec.kind, step);
          ready = std::max(compute_end, comm.end);
          break;
        }
        case Step::Type::Send:
          catch_up();
          transfers_[static_cast<std::size_t>(step.index)].send(
              platform_, program_.transfers[static_cast<std::size_t>(step.index)]);
          break;
        case Step::Type::Recv: {
          catch_up();
          const auto& spec = program_.transfers[static_cast<std::size_t>(step.index)];
          const CommInterval comm = transfers_[static_cast<std::size_t>(step.index)].receive(platform_, spec);
          record(gpu, comm.start, comm.end, spec.kind, step);
          ready = sg4::Engine::get_clock();
          break;
        }
        case Step::Type::SetStatic:
          break;
      }
      state.in_flight -= step.free_bytes;
    }
    catch_up();
  }

  std::span<const IterationPlan* const> plans_;
  const CostModel& cost_;
  const SimulationOptions& options_;
  const IterationCallback& on_iteration_;
  const Platform& platform_;

  IterationProgram program_;
  std::vector<CollectiveRun> collectives_;
  std::vector<TransferRun> transfers_;
  std::vector<GpuState> gpus_;

  TreeBarrier meeting_;
  std::size_t next_ = 0;
  std::size_t current_ = 0;
  double start_ = 0;
  std::chrono::steady_clock::time_point wall_start_;
  double cpu_start_ = 0;
  bool running_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace

void simulate(std::span<const IterationPlan* const> plans, const CostModel& cost, const SimulationOptions& options,
              const IterationCallback& on_iteration) {
  static bool engine_used = false;
  if (engine_used) throw std::logic_error("simulate: SimGrid runs one simulation per process");
  engine_used = true;

  quiet_simgrid_logs();
  std::string program_name = "lcsim";
  int argc = 1;
  char* argv[] = {program_name.data(), nullptr};
  sg4::Engine engine(&argc, argv);
  set_network_model();
  set_actor_stacks(512);

  std::set<std::vector<int>> groups;
  for (const IterationPlan* plan : plans)
    for (auto& group : collective_groups(*plan, cost)) groups.insert(std::move(group));
  const Platform platform(cost.cluster(), {groups.begin(), groups.end()});
  Simulation simulation(plans, cost, options, on_iteration, platform);
  for (int gpu = 0; gpu < platform.world_size(); ++gpu)
    sg4::Actor::create("gpu-" + std::to_string(gpu), platform.gpu(gpu),
                       [&simulation, gpu] { simulation.gpu_actor(gpu); });
  engine.run();
  if (simulation.error()) std::rethrow_exception(simulation.error());
}

}  // namespace lcsim::sim
