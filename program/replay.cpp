#include "program/replay.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "base/check.hpp"

namespace lcsim::program {

// The replay runs lanes (GpuSteps), not GPUs: the GPUs of a lane run the same steps from the same start, so one
// state stands for all of them, arrives at a collective for all of them, and gives each the same figures.
class Replay {
  // Per collective, transfer and lane: how far the replay has got.
  struct CollectiveState {
    std::size_t arrived = 0;  // lanes
    std::size_t lanes = 0;    // its members' lanes, counted at the first arrival
    double latest = 0;        // latest arrival (ready time) so far
    bool done = false;
    double start = 0;
    double end = 0;
  };

  struct TransferState {
    bool sent = false;
    double sent_at = 0;
  };

  struct GpuState {
    std::size_t pc = 0;
    bool arrived = false;  // joined the collective of the current step
    double ready = 0;
    double busy = 0;
    double static_bytes = 0;
    double in_flight = 0;
    double peak = 0;
    double propagation_end = 0;  // end of its last micro-batch step
  };

 public:
  Replay(std::size_t gpus, double start_s, bool record_spans) : record_spans_(record_spans), world_(gpus) {
    outcome_.start_s = start_s;
  }

  IterationOutcome run(const IterationProgram& program) {
    bind(program);
    // Each lane runs until it blocks; a lane is run again only when what it waits for may have come (the last
    // member of its collective arrived, or its transfer was sent), so the replay costs its steps, not lanes x rounds.
    for (std::size_t l = lane_count(); l-- > 0;) runnable_.push_back(static_cast<int>(l));
    drain();
    for (std::size_t l = 0; l < lane_count(); ++l)
      if (lanes_[l].pc < program_->gpus.lane_steps(l).size())
        throw std::logic_error("replay_program: the program cannot finish (" + blocked() + ")");
    double end = outcome_.start_s;
    for (std::size_t g = 0; g < world_; ++g) {
      const GpuState& gpu = lanes_[program.gpus.lane(g)];
      end = std::max(end, gpu.ready);
      outcome_.busy_seconds.push_back(gpu.busy);
      outcome_.peak_bytes.push_back(gpu.peak);
      outcome_.propagation_end_s.push_back(std::max(0.0, gpu.propagation_end - outcome_.start_s));
    }
    outcome_.seconds = end - outcome_.start_s;
    // Spans in the executor's order: grouped by GPU.
    std::stable_sort(outcome_.spans.begin(), outcome_.spans.end(),
                     [](const GpuSpan& a, const GpuSpan& b) { return a.gpu < b.gpu; });
    return std::move(outcome_);
  }

  /// Runs `gpus` as far as their steps go; then, since each ran all of its steps, drops them (the GPUs' next steps
  /// start at 0), and drops every collective when all are complete (the builder indexes new ones from 0).
  void run_and_drop(IterationProgram& program, std::span<const int> gpus) {
    bind(program);
    for (auto g = gpus.rbegin(); g != gpus.rend(); ++g)
      if (program.gpus.leads(static_cast<std::size_t>(*g))) runnable_.push_back(lane_of(*g));
    drain();
    for (const int g : gpus) {
      if (!program.gpus.leads(static_cast<std::size_t>(g))) continue;
      const std::size_t lane = program.gpus.lane(static_cast<std::size_t>(g));
      auto& steps = program.gpus.lane_steps(lane);
      LCSIM_CHECK(lanes_[lane].pc == steps.size(), "a streamed GPU ran all its steps");
      steps.clear();
      lanes_[lane].pc = 0;
    }
    if (std::all_of(collectives_.begin(), collectives_.end(), [](const CollectiveState& c) { return c.done; }) &&
        collectives_.size() == program.collectives.size() && program.transfers.empty()) {
      program.collectives.clear();
      collectives_.clear();
    }
  }

 private:
  void bind(const IterationProgram& program) {
    LCSIM_CHECK(program.gpus.size() == world_, "a replay's program covers its GPUs");
    // A replay runs one plan, whose lanes a streamed program keeps while it is fed.
    if (lanes_.empty()) {
      lanes_.assign(program.gpus.lane_count(), GpuState{});
      for (auto& lane : lanes_) lane.ready = outcome_.start_s;
      lane_stamp_.assign(lanes_.size(), 0);
    }
    LCSIM_CHECK(lanes_.size() == program.gpus.lane_count(), "a replay's program keeps its lanes");
    program_ = &program;
    collectives_.resize(program.collectives.size());
    transfers_.resize(program.transfers.size());
  }

  void drain() {
    while (!runnable_.empty()) {
      const int g = runnable_.back();
      runnable_.pop_back();
      advance(g);
    }
  }

  int lane_of(int gpu) const { return static_cast<int>(program_->gpus.lane(static_cast<std::size_t>(gpu))); }
  std::size_t lane_count() const { return lanes_.size(); }

  /// Runs lane g's steps until it blocks or ends.
  void advance(int g) {
    GpuState& gpu = lanes_[static_cast<std::size_t>(g)];
    const auto& steps = program_->gpus.lane_steps(static_cast<std::size_t>(g));
    while (gpu.pc < steps.size()) {
      const Step& step = steps[gpu.pc];
      if (step.type == Step::Type::SetStatic) {
        gpu.static_bytes = step.bytes;
        gpu.peak = std::max(gpu.peak, gpu.static_bytes + gpu.in_flight);
        ++gpu.pc;
        continue;
      }
      if (!gpu.arrived) {  // the step starts: its activations are allocated once, even if it then blocks
        gpu.in_flight += step.alloc_bytes;
        gpu.peak = std::max(gpu.peak, gpu.static_bytes + gpu.in_flight);
      }
      if (!execute(g, gpu, step)) {
        gpu.arrived = true;
        return;
      }
      gpu.arrived = false;
      gpu.in_flight -= step.free_bytes;
      ++gpu.pc;
    }
  }

  /// One step of GPU g; false when it must wait for other GPUs.
  bool execute(int g, GpuState& gpu, const Step& step) {
    switch (step.type) {
      case Step::Type::Compute:
        record(g, gpu.ready, gpu.ready + step.seconds, step.kind, step);
        gpu.ready += step.seconds;
        gpu.busy += step.seconds;
        return true;
      case Step::Type::Collective: {
        const CollectiveState* c = join(gpu, step);
        if (c == nullptr) return false;
        const auto& spec = program_->collectives[static_cast<std::size_t>(step.index)];
        gpu.busy += c->end - c->start;
        record(g, c->start, c->end, spec.kind, step);
        gpu.ready = std::max(gpu.ready, c->end);
        return true;
      }
      case Step::Type::ComputeWithCollective: {
        const CollectiveState* c = join(gpu, step);
        if (c == nullptr) return false;
        const auto& spec = program_->collectives[static_cast<std::size_t>(step.index)];
        const double compute_start = std::max(gpu.ready, c->start - step.lead_s);
        const double compute_end = compute_start + step.seconds;
        const double overlap = std::max(0.0, std::min(compute_end, c->end) - std::max(compute_start, c->start));
        gpu.busy += step.seconds + (c->end - c->start) - overlap;
        record(g, compute_start, compute_end, step.kind, step);
        record(g, c->start, c->end, spec.kind, step);
        gpu.ready = std::max(compute_end, c->end);
        return true;
      }
      case Step::Type::Send: {
        TransferState& t = transfers_.at(static_cast<std::size_t>(step.index));
        t.sent = true;
        t.sent_at = gpu.ready;
        runnable_.push_back(lane_of(program_->transfers[static_cast<std::size_t>(step.index)].to));
        return true;
      }
      case Step::Type::Recv: {
        const TransferState& t = transfers_.at(static_cast<std::size_t>(step.index));
        if (!t.sent) return false;
        const auto& spec = program_->transfers[static_cast<std::size_t>(step.index)];
        const double start = std::max(t.sent_at, gpu.ready);
        const double end = start + spec.time.seconds();
        record(g, start, end, spec.kind, step);
        gpu.ready = end;
        return true;
      }
      case Step::Type::SetStatic:
        return true;
    }
    return true;
  }

  /// The collective of `step` once every member has arrived (nullptr before); a lane arrives for all its GPUs. A
  /// group of one GPU does not wait.
  const CollectiveState* join(const GpuState& gpu, const Step& step) {
    CollectiveState& c = collectives_.at(static_cast<std::size_t>(step.index));
    const auto& spec = program_->collectives[static_cast<std::size_t>(step.index)];
    if (spec.gpus.size() <= 1) {
      c = {1, 1, gpu.ready, true, gpu.ready, gpu.ready + spec.time.seconds()};
      return &c;
    }
    if (!gpu.arrived) {
      if (c.arrived == 0) c.lanes = for_each_lane(spec.gpus, [](int) {});
      c.latest = c.arrived == 0 ? gpu.ready : std::max(c.latest, gpu.ready);
      ++c.arrived;
    }
    if (c.arrived < c.lanes) return nullptr;
    if (!c.done) {  // the last member: the others wait for it
      c.done = true;
      c.start = c.latest;
      c.end = c.start + spec.time.seconds();
      for_each_lane(spec.gpus, [this](int lane) { runnable_.push_back(lane); });
    }
    return &c;
  }

  /// Calls `f` once for each lane of `gpus` and returns how many there are. A lane may hold GPUs of several groups
  /// (replicas folded onto one, ProgramOptions::fold_replicas), so a collective waits for lanes, not GPUs.
  template <class F>
  std::size_t for_each_lane(const std::vector<int>& gpus, F f) {
    ++stamp_;
    std::size_t count = 0;
    for (const int member : gpus) {
      const int lane = lane_of(member);
      std::uint64_t& seen = lane_stamp_[static_cast<std::size_t>(lane)];
      if (seen == stamp_) continue;
      seen = stamp_;
      ++count;
      f(lane);
    }
    return count;
  }

  void record(int g, double start, double end, WorkKind kind, const Step& step) {
    if (step.micro_batch >= 0 && end > start) {
      double& propagation = lanes_[static_cast<std::size_t>(g)].propagation_end;
      propagation = std::max(propagation, end);
    }
    if (record_spans_ && end > start)
      for (int gpu : program_->gpus.lane_gpus(static_cast<std::size_t>(g)))
        outcome_.spans.push_back({gpu, start, end, kind, step.replica, step.micro_batch});
  }

  std::string blocked() const {
    for (std::size_t g = 0; g < world_; ++g) {
      const std::size_t pc = lanes_[program_->gpus.lane(g)].pc;
      if (pc < program_->gpus[g].size())
        return "GPU " + std::to_string(g) + " waits at step " + std::to_string(pc) + ", " +
               to_string(program_->gpus[g][pc].kind);
    }
    return "no GPU waits";
  }

  const IterationProgram* program_ = nullptr;
  bool record_spans_;
  std::size_t world_;            // GPUs
  std::vector<GpuState> lanes_;  // per lane of the program: its GPUs' state
  std::vector<CollectiveState> collectives_;
  std::vector<TransferState> transfers_;
  std::vector<std::uint64_t> lane_stamp_;  ///< for_each_lane's marks
  std::uint64_t stamp_ = 0;
  std::vector<int> runnable_;  ///< GPUs to run again: waiting for nothing, or for something that may have come
  IterationOutcome outcome_;
};

void check_finite(const IterationOutcome& outcome) {
  const auto all_finite = [](const std::vector<double>& values) {
    return std::all_of(values.begin(), values.end(), [](double v) { return std::isfinite(v); });
  };
  LCSIM_CHECK(std::isfinite(outcome.seconds) && std::isfinite(outcome.start_s), "an iteration's time");
  LCSIM_CHECK(all_finite(outcome.busy_seconds) && all_finite(outcome.propagation_end_s), "a GPU's busy time");
  LCSIM_CHECK(all_finite(outcome.peak_bytes), "a GPU's peak bytes");
}

IterationOutcome replay_program(const IterationProgram& program, double start_s, bool record_spans) {
  return Replay(program.gpus.size(), start_s, record_spans).run(program);
}

PartialReplay::PartialReplay(std::size_t gpus, double start_s)
    : replay_(std::make_unique<Replay>(gpus, start_s, false)) {}
PartialReplay::~PartialReplay() = default;

void PartialReplay::run(IterationProgram& program, std::span<const int> gpus) {
  // build_program checks the times of what it returns; these steps are run and dropped before that.
  for (const int g : gpus)
    for (const Step& step : program.gpus[static_cast<std::size_t>(g)])
      LCSIM_CHECK(std::isfinite(step.seconds) && step.seconds >= 0, "a step's seconds");
  for (const auto& c : program.collectives)
    LCSIM_CHECK(std::isfinite(c.time.latency_s) && std::isfinite(c.time.transfer_s), "a collective's time");
  replay_->run_and_drop(program, gpus);
}

IterationOutcome PartialReplay::finish(const IterationProgram& program) {
  return replay_->run(program);
}

IterationProgram retime_compute(IterationProgram program,
                                const std::function<double(int gpu, std::size_t index, const Step& step)>& seconds) {
  program.gpus.unshare();  // the GPUs of a lane may be measured apart
  for (std::size_t g = 0; g < program.gpus.size(); ++g)
    for (std::size_t i = 0; i < program.gpus[g].size(); ++i) {
      Step& step = program.gpus.lane_steps(g)[i];  // unshared: lane g is GPU g
      if (step.type != Step::Type::Compute && step.type != Step::Type::ComputeWithCollective) continue;
      const double retimed = seconds(static_cast<int>(g), i, step);
      if (step.type == Step::Type::ComputeWithCollective)
        step.lead_s = step.seconds > 0 ? step.lead_s * retimed / step.seconds : 0.0;
      step.seconds = retimed;
    }
  return program;
}

}  // namespace lcsim::program
