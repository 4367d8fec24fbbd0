#include "engine/executor.hpp"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <exception>
#include <set>
#include <stdexcept>
#include <string>

#include "base/check.hpp"
#include "engine/platform.hpp"
#include "engine/simgrid_collectives.hpp"
#include "engine/simgrid_compat.hpp"
#include "program/replay.hpp"

namespace lcsim::sim {
namespace {

double process_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

/// Where a GPU's steps stop being bookkeeping: its actor must act (or, parked, wait to be told).
enum class Halt : std::uint8_t {
  Parked,         ///< arrived at a collective that others have not all reached: nothing to do until it ran
  RunCollective,  ///< arrived last at a collective: its actor runs it
  Transfer,       ///< a pipeline send or receive: its actor does it
  End,            ///< no steps left this iteration
  Stop,           ///< no iterations left: the actor returns
};

/// One cache line per lane (program::GpuSteps: GPUs that run the same steps, one state for all of them): a runner
/// touches the state of every member of its collective.
struct alignas(64) GpuState {
  double busy = 0;
  double static_bytes = 0;
  double in_flight = 0;
  double peak = 0;
  std::size_t pc = 0;     ///< next step
  double ready = 0;       ///< when its queued compute ends
  Halt halt = Halt::End;  ///< what a parked GPU's actor does when woken
};
static_assert(sizeof(GpuState) == 64);

class Simulation {
 public:
  /// `actors`: the most lanes of any plan's program (program::gpu_lanes), one actor each.
  Simulation(std::span<const IterationPlan* const> plans, const CostModel& cost, const SimulationOptions& options,
             const IterationCallback& on_iteration, const Platform& platform, std::set<std::vector<int>> exclusive,
             std::size_t actors)
      : plans_(plans),
        cost_(cost),
        options_(options),
        on_iteration_(on_iteration),
        platform_(platform),
        flows_(platform, std::move(exclusive)),
        lanes_(actors),
        propagation_end_(actors, 0.0),
        spans_(options.record_spans ? static_cast<std::size_t>(platform.world_size()) : 0),
        wake_(actors) {}

  /// A lane's actor: the actor of lane k (program::GpuSteps) runs the steps its GPUs run alike, for all of them.
  /// Compute is not simulated step by step: `ready` is when the GPU's queued compute ends (it never
  /// shares anything, so only its end matters), and the GPU only waits for the clock where it meets others --
  /// collectives take `ready` as its arrival, transfers and the end of the iteration wait until it. Same times as
  /// waiting after every compute.
  ///
  /// Nor does every GPU wake up for every collective: when a collective has run, its runner does the bookkeeping of
  /// every member (its compute up to its next collective, and its arrival there), which is all a member would do at
  /// that instant of simulated time. An actor stays parked on its semaphore until woken to act: to run a collective
  /// it arrived at last that waits on flows, or for a pipeline transfer. A collective whose time is known at once
  /// (an exclusive group's, engine/simgrid_collectives.cpp) is run by whichever actor completed it, and so on down the
  /// chain. Between iterations too: the actor whose GPU ends last turns the iteration over and wakes only the GPUs that
  /// must act first. A group that moves in lockstep then costs one actor switch per collective that waits on flows
  /// instead of one per member, none per collective in closed form, and an iteration none per idle GPU.
  void gpu_actor(int lane) {
    const auto g = static_cast<std::size_t>(lane);
    wake_[g] = sg4::Semaphore::create(0);
    try {
      Halt halt = ++started_ == lanes_.size() ? turn_over(lane) : Halt::Parked;  // the last actor to start begins
      for (;;) {
        switch (halt) {
          case Halt::Parked:
            wake_[g]->acquire();  // whoever wakes it has set `halt`
            halt = lanes_[g].halt;
            break;
          case Halt::RunCollective:
            halt = run_collective(lane);
            break;
          case Halt::Transfer:
            transfer(lane);
            halt = advance(lane);
            break;
          case Halt::End:
            halt = end(lane);
            break;
          case Halt::Stop:
            return;
        }
      }
    } catch (...) {
      // The others then wait forever and SimGrid ends the run as a deadlock; the error is rethrown after it.
      if (!error_) error_ = std::current_exception();
    }
  }

  std::exception_ptr error() const { return error_; }

 private:
  /// `lane` has no steps left (noted by whichever actor advanced it; its own actor stays parked).
  void note_end(int lane) {
    ++ended_;
    end_ready_ = std::max(end_ready_, lanes_[static_cast<std::size_t>(lane)].ready);
  }

  /// `lane`'s own actor found it at its end: park, or turn the iteration over when it is the last GPU to end. The
  /// last end is always found by the GPU's own actor: a runner advancing its members is itself still running.
  Halt end(int lane) {
    note_end(lane);
    return ended_ == lane_count_ ? turn_over(lane) : Halt::Parked;
  }

  /// Ends the iteration once the clock reaches the last GPU's ready time, builds the next and moves every GPU to
  /// its first step that needs an actor, waking those actors; returns what `lane` (the caller's) does. With no
  /// iteration left, wakes every actor to return.
  Halt turn_over(int lane) {
    for (;;) {
      catch_up(end_ready_);
      if (running_) finish_iteration();
      if (next_ >= plans_.size()) {
        for (std::size_t g = 0; g < lanes_.size(); ++g) {
          if (static_cast<int>(g) == lane) continue;
          lanes_[g].halt = Halt::Stop;
          wake_[g]->release();
        }
        return Halt::Stop;
      }
      start_iteration(next_++);
      Halt own = Halt::Parked;
      Moves moves;
      for (int g = 0; g < static_cast<int>(lane_count_); ++g) {  // an actor past them stays parked
        const Halt halt = advance(g);
        if (g != lane) {
          file_move(g, halt, moves);
        } else if (halt == Halt::End) {
          note_end(g);
        } else {
          own = halt;
        }
      }
      run_here(moves);
      if (ended_ == lane_count_) continue;  // every GPU has ended already (idle, or all in closed form)
      wake(moves.woken);
      return own;
    }
  }

  /// Releases the actors of `gpus`, whose `halt` is set, once the caller's bookkeeping is over: releasing yields,
  /// and a woken actor may then run through collectives timed in closed form to the end of the iteration, and
  /// turn it over, before the caller resumes. So the caller reads no shared state after this.
  void wake(const std::vector<int>& gpus) {
    for (int g : gpus) wake_[static_cast<std::size_t>(g)]->release();
  }

  void start_iteration(std::size_t index) {
    // Simulating an iteration is building its program from the plan and running it: both are timed.
    wall_start_ = std::chrono::steady_clock::now();
    cpu_start_ = process_cpu_seconds();
    program::ProgramOptions program_options = options_.program;
    program_options.describe_work = false;  // work descriptors are for live replay; simulating reads seconds only
    program_ = program::build_program(*plans_[index], cost_, program_options, std::move(program_));
    build_cpu_s_ = process_cpu_seconds() - cpu_start_;
    lane_count_ = program_.gpus.lane_count();
    LCSIM_CHECK(lane_count_ <= lanes_.size(), "an actor for every lane");
    collectives_.resize(program_.collectives.size());
    for (CollectiveRun& run : collectives_) run.clear();
    transfers_ = std::vector<TransferRun>(program_.transfers.size());
    for (auto& lane : lanes_) {
      lane = GpuState{};
      lane.ready = sg4::Engine::get_clock();
    }
    std::fill(propagation_end_.begin(), propagation_end_.end(), 0.0);
    ended_ = 0;
    end_ready_ = sg4::Engine::get_clock();
    current_ = index;
    start_ = sg4::Engine::get_clock();
    running_ = true;
  }

  void finish_iteration() {
    program::IterationOutcome outcome;
    outcome.index = current_;
    outcome.start_s = start_;
    outcome.seconds = sg4::Engine::get_clock() - start_;
    outcome.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count();
    outcome.cpu_s = process_cpu_seconds() - cpu_start_;
    outcome.build_cpu_s = build_cpu_s_;
    for (std::size_t g = 0; g < program_.gpus.size(); ++g) {
      const std::size_t lane = program_.gpus.lane(g);
      outcome.busy_seconds.push_back(lanes_[lane].busy);
      outcome.peak_bytes.push_back(lanes_[lane].peak);
      outcome.propagation_end_s.push_back(propagation_end_[lane]);
    }
    if (options_.estimate) {
      program::IterationOutcome alone = program::replay_program(program_, 0.0, false);
      program::check_finite(alone);
      outcome.estimate_s = alone.seconds;
    }
    for (auto& spans : spans_) {
      outcome.spans.insert(outcome.spans.end(), spans.begin(), spans.end());
      spans.clear();
    }
    running_ = false;
    on_iteration_(std::move(outcome));
  }

  void record(int lane, double start, double end, program::WorkKind kind, const program::Step& step) {
    if (step.micro_batch >= 0 && end > start) {
      double& propagation = propagation_end_[static_cast<std::size_t>(lane)];
      propagation = std::max(propagation, end - start_);
    }
    if (options_.record_spans && end > start)
      for (int gpu : program_.gpus.lane_gpus(static_cast<std::size_t>(lane)))
        spans_[static_cast<std::size_t>(gpu)].push_back({gpu, start, end, kind, step.replica, step.micro_batch});
  }

  std::size_t lane_size(int lane) const { return program_.gpus.lane_gpus(static_cast<std::size_t>(lane)).size(); }

  static void catch_up(double ready) {
    LCSIM_CHECK(std::isfinite(ready), "a GPU's ready time is not finite");  // SimGrid would abort
    if (ready > sg4::Engine::get_clock()) sg4::this_actor::sleep_until(ready);
  }

  static void allocate(GpuState& state, const program::Step& step) {
    state.in_flight += step.alloc_bytes;
    state.peak = std::max(state.peak, state.static_bytes + state.in_flight);
  }

  /// Bookkeeping of `lane`'s steps from its next one, up to (and including its arrival at) the first step its actor
  /// must act on. Needs no actor of its own: it neither waits nor uses the network.
  Halt advance(int lane) {
    GpuState& state = lanes_[static_cast<std::size_t>(lane)];
    const std::vector<program::Step>& steps = program_.gpus.lane_steps(static_cast<std::size_t>(lane));
    for (; state.pc < steps.size(); ++state.pc) {
      const program::Step& step = steps[state.pc];
      switch (step.type) {
        case program::Step::Type::SetStatic:
          state.static_bytes = step.bytes;
          state.peak = std::max(state.peak, state.static_bytes + state.in_flight);
          break;
        case program::Step::Type::Compute:
          allocate(state, step);
          record(lane, state.ready, state.ready + step.seconds, step.kind, step);
          state.ready += step.seconds;
          state.busy += step.seconds;
          state.in_flight -= step.free_bytes;
          break;
        case program::Step::Type::Collective:
        case program::Step::Type::ComputeWithCollective: {
          allocate(state, step);
          const auto c = static_cast<std::size_t>(step.index);
          return collectives_[c].arrive(program_.collectives[c], lane, state.ready, lane_size(lane))
                     ? Halt::RunCollective
                     : Halt::Parked;
        }
        case program::Step::Type::Send:
        case program::Step::Type::Recv:
          return Halt::Transfer;
      }
    }
    return Halt::End;
  }

  /// GPUs whose next move was found by an actor not their own: the collectives it runs for them itself, and the
  /// actors it wakes once its bookkeeping is over.
  struct Moves {
    std::vector<int> run_here;  ///< arrived last at a collective whose time is known at once
    std::vector<int> woken;     ///< must act: a transfer, or a collective that waits on flows
  };

  /// Files `lane`'s next move, found by another GPU's actor: a parked GPU waits, an ended one is counted, one that
  /// arrived last at a collective timed without waiting (one GPU, no bytes, or an exclusive group) has it run by
  /// the same actor -- the time is known, so waking its own actor would only cost a switch -- and any other is
  /// woken.
  void file_move(int lane, Halt next, Moves& moves) {
    const auto g = static_cast<std::size_t>(lane);
    if (next == Halt::Parked) return;
    if (next == Halt::End) {  // nothing left to act on: it stays parked
      note_end(lane);
      return;
    }
    if (next == Halt::RunCollective) {
      const auto c = static_cast<std::size_t>(program_.gpus.lane_steps(g)[lanes_[g].pc].index);
      if (collectives_[c].immediate(flows_, program_.collectives[c])) {
        moves.run_here.push_back(lane);
        return;
      }
    }
    lanes_[g].halt = next;
    moves.woken.push_back(lane);
  }

  /// Runs the collectives filed to be run here, and those they lead to, until none is left.
  void run_here(Moves& moves) {
    while (!moves.run_here.empty()) {
      const int lane = moves.run_here.back();
      moves.run_here.pop_back();
      file_move(lane, run_one(lane, moves), moves);
    }
  }

  /// Runs the collective `lane` arrived at last, closes that step for every member, and files the other members'
  /// next moves; returns `lane`'s own, found last, so that in a lockstep group it arrives last at the next
  /// collective and runs it too.
  Halt run_one(int lane, Moves& moves) {
    const program::Step& step =
        program_.gpus.lane_steps(static_cast<std::size_t>(lane))[lanes_[static_cast<std::size_t>(lane)].pc];
    const auto c = static_cast<std::size_t>(step.index);
    CollectiveRun& run = collectives_[c];
    const CommInterval comm = run.run(flows_, program_.collectives[c]);
    for (int member : run.members()) close_collective(member, comm);
    for (int member : run.members())
      if (member != lane) file_move(member, advance(member), moves);
    return advance(lane);
  }

  /// `lane`'s actor runs the collective it arrived at last, and every collective whose time is known at once that
  /// this leads to, then wakes the actors that must act. When that ends the iteration (`lane` included, moved on by
  /// one of those collectives), it turns the iteration over.
  Halt run_collective(int lane) {
    Moves moves;
    const Halt own = run_one(lane, moves);
    run_here(moves);
    if (ended_ == lane_count_) return turn_over(lane);  // nobody is left to wake
    wake(moves.woken);
    return own;
  }

  /// The end of a collective step for one member.
  void close_collective(int lane, const CommInterval& comm) {
    GpuState& state = lanes_[static_cast<std::size_t>(lane)];
    const program::Step& step = program_.gpus.lane_steps(static_cast<std::size_t>(lane))[state.pc];
    const auto& spec = program_.collectives[static_cast<std::size_t>(step.index)];
    if (step.type == program::Step::Type::Collective) {
      state.busy += comm.end - comm.start;
      record(lane, comm.start, comm.end, spec.kind, step);
      state.ready = std::max(state.ready, comm.end);
    } else {
      // The compute runs beside the collective, which does not wait for it (different engines of the GPU); it
      // starts when the GPU is ready but at most `lead_s` before the collective does. The step ends when both have.
      const double compute_start = std::max(state.ready, comm.start - step.lead_s);
      const double compute_end = compute_start + step.seconds;
      const double overlap = std::max(0.0, std::min(compute_end, comm.end) - std::max(compute_start, comm.start));
      state.busy += step.seconds + (comm.end - comm.start) - overlap;
      record(lane, compute_start, compute_end, step.kind, step);
      record(lane, comm.start, comm.end, spec.kind, step);
      state.ready = std::max(compute_end, comm.end);
    }
    state.in_flight -= step.free_bytes;
    ++state.pc;
  }

  /// A pipeline send (the sender never waits) or receive (waits for the data), at the GPU's ready time.
  void transfer(int lane) {
    GpuState& state = lanes_[static_cast<std::size_t>(lane)];
    const program::Step& step = program_.gpus.lane_steps(static_cast<std::size_t>(lane))[state.pc];
    const auto t = static_cast<std::size_t>(step.index);
    allocate(state, step);
    catch_up(state.ready);
    if (step.type == program::Step::Type::Send) {
      transfers_[t].send(platform_, program_.transfers[t]);
    } else {
      const CommInterval comm = transfers_[t].receive(platform_, program_.transfers[t]);
      record(lane, comm.start, comm.end, program_.transfers[t].kind, step);
      state.ready = sg4::Engine::get_clock();
    }
    state.in_flight -= step.free_bytes;
    ++state.pc;
  }

  std::span<const IterationPlan* const> plans_;
  const CostModel& cost_;
  const SimulationOptions& options_;
  const IterationCallback& on_iteration_;
  const Platform& platform_;
  FlowCache flows_;

  program::IterationProgram program_;
  std::vector<CollectiveRun> collectives_;
  std::vector<TransferRun> transfers_;
  std::vector<GpuState> lanes_;          // per actor: the state of the lane it runs
  std::size_t lane_count_ = 0;           // lanes of this iteration's program (actors past them idle)
  std::vector<double> propagation_end_;  // per lane, this iteration's (IterationOutcome::propagation_end_s)
  std::vector<std::vector<program::GpuSpan>> spans_;  // per GPU, this iteration's (SimulationOptions::record_spans)
  std::vector<sg4::SemaphorePtr> wake_;               // per actor: a parked actor waits here

  std::size_t started_ = 0;  // actors that have started (the last one begins the first iteration)
  std::size_t ended_ = 0;    // lanes at their end of this iteration
  double end_ready_ = 0;     // the latest ready time of those
  std::size_t next_ = 0;
  std::size_t current_ = 0;
  double start_ = 0;
  std::chrono::steady_clock::time_point wall_start_;
  double cpu_start_ = 0;
  double build_cpu_s_ = 0;
  bool running_ = false;
  std::exception_ptr error_;
};

}  // namespace

// Measured: every shipped scenario, traces included, runs with 8 KiB stacks and crashes with 4 KiB; 128 KiB leaves
// 16x. SimGrid callocs each stack: below glibc's mmap threshold it comes from the heap and is zeroed whole (64 KiB
// stacks wrote 1 GiB at 16,384 GPUs); at the threshold, which simulate() pins to 128 KiB (glibc raises it after
// large frees), it is a fresh mapping whose untouched pages cost nothing: 16,384 GPUs 3.24 -> 3.0 s, peak RSS 1.27
// -> 0.92 GB (docs/simulation.md, "Scale").
// Under AddressSanitizer, actors are threads: ASan does not know SimGrid's swapped stacks (Debian's SimGrid has no
// fiber annotations), and a `throw` inside an actor then makes GCC's ASan runtime report a stack-buffer-overflow
// in __asan_handle_no_return at any stack size (docs/robustness.md). Threads have stacks it knows; their frames
// carry redzones, hence 8x more stack.
#if defined(__SANITIZE_ADDRESS__)
#define LCSIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LCSIM_ASAN 1
#endif
#endif
#ifdef LCSIM_ASAN
constexpr int kActorStackKiB = 512;
constexpr bool kThreadActors = true;
#else
constexpr int kActorStackKiB = 128;
constexpr bool kThreadActors = false;
#endif

void simulate(std::span<const IterationPlan* const> plans, const CostModel& cost, const SimulationOptions& options,
              const IterationCallback& on_iteration) {
  static bool engine_used = false;
  if (engine_used) throw std::logic_error("simulate: SimGrid runs one simulation per process");
  engine_used = true;

  quiet_simgrid_logs();
  std::string program_name = "lcsim";
  std::string thread_actors = "--cfg=contexts/factory:thread";  // read when the engine starts, so passed here
  int argc = kThreadActors ? 2 : 1;
  char* argv[] = {program_name.data(), kThreadActors ? thread_actors.data() : nullptr, nullptr};
  sg4::Engine engine(&argc, argv);
  set_network_model();
  if (!kThreadActors) mallopt(M_MMAP_THRESHOLD, kActorStackKiB * 1024);
  set_actor_stacks(kActorStackKiB);

  // Every flow the run may start, for the platform to build its links and find the groups that have theirs alone.
  // Each group once: the same groups recur in every iteration's plan.
  std::set<program::FlowGroup> distinct;
  for (const IterationPlan* plan : plans)
    for (program::FlowGroup& group : program::flow_groups(*plan, cost)) distinct.insert(std::move(group));
  const std::vector<program::FlowGroup> groups(distinct.begin(), distinct.end());
  std::set<LinkUse> uses;
  for (const program::FlowGroup& group : groups)
    for (LinkUse& use : link_uses(cost.cluster(), group.gpus, group.kind)) uses.insert(std::move(use));
  const Platform platform(cost.cluster(), {uses.begin(), uses.end()}, options.merge_links);
  // One actor per lane (GPUs that run the same steps), as many as the plan with the most lanes needs: a Ulysses
  // group is one actor, not eight, and so are its eight stacks.
  std::size_t actors = 1;
  for (const IterationPlan* plan : plans) {
    const std::vector<int> lanes = program::gpu_lanes(*plan, platform.world_size());
    actors = std::max(actors, static_cast<std::size_t>(*std::max_element(lanes.begin(), lanes.end())) + 1);
  }
  Simulation simulation(
      plans, cost, options, on_iteration, platform,
      options.exclusive_closed_form ? exclusive_groups(cost.cluster(), groups) : std::set<std::vector<int>>{}, actors);
  for (int lane = 0; lane < static_cast<int>(actors); ++lane)
    sg4::Actor::create("lane-" + std::to_string(lane), platform.gpu(lane),
                       [&simulation, lane] { simulation.gpu_actor(lane); });
  engine.run();
  if (simulation.error()) std::rethrow_exception(simulation.error());
}

}  // namespace lcsim::sim
