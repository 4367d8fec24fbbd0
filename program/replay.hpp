#pragma once
// An IterationProgram replayed on the host without contention: the SimGrid executor's semantics (engine/executor.hpp)
// with every collective and transfer taking exactly its cost-model time. A collective starts when its last member
// is ready and ends latency + transfer later; a ComputeWithCollective's compute starts when its GPU is ready but at
// most lead_s before the collective; a transfer starts when both sides have arrived and the receiver waits for it;
// sends never block. Busy time, peak memory and spans are counted as the executor counts them, so on a platform
// where nothing shares a link the two agree.
//
// `lcsim-gpu live` uses it twice: with the cost model's compute seconds (the predicted side when no simulator
// results are given) and, in rank-serial mode, with each compute step's measured seconds in place of the model's
// (collectives stay the profile's), which composes the iteration a cluster would have run.
#include <functional>
#include <memory>
#include <span>

#include "program/iteration_program.hpp"
#include "program/outcome.hpp"

namespace lcsim::program {

/// Replays `program` from time `start_s`. Throws std::logic_error when the program cannot finish (a collective some
/// member never joins, a transfer never sent): a malformed program, not a slow one.
IterationOutcome replay_program(const IterationProgram& program, double start_s, bool record_spans);

class Replay;

/// The same replay fed in parts, for a program built and run a micro-batch at a time (the streaming estimate):
/// `run` runs `gpus` as far as their steps go -- they must reach their last step -- and drops those steps, and every
/// collective once all are complete; `finish` runs the rest and gives what replay_program gives for the whole.
/// Without spans.
class PartialReplay {
 public:
  PartialReplay(std::size_t gpus, double start_s);
  ~PartialReplay();
  PartialReplay(const PartialReplay&) = delete;
  PartialReplay& operator=(const PartialReplay&) = delete;
  void run(IterationProgram& program, std::span<const int> gpus);
  IterationOutcome finish(const IterationProgram& program);

 private:
  std::unique_ptr<Replay> replay_;
};

/// A copy of `program` whose compute steps (Compute and ComputeWithCollective) last `seconds(gpu, index, step)`
/// instead (`index`: the step's position in the GPU's list); each ComputeWithCollective's lead_s keeps its share
/// of the step's compute (one layer's worth).
IterationProgram retime_compute(IterationProgram program,
                                const std::function<double(int gpu, std::size_t index, const Step& step)>& seconds);

}  // namespace lcsim::program
