#include "live/live_compose.hpp"

#include <algorithm>
#include <limits>

#include "program/replay.hpp"

namespace lcsim {
namespace {

/// The measured seconds of one step.
double step_seconds(const StepJob& mapped, const program::Step& step, const std::vector<JobResult>& results) {
  switch (mapped.part) {
    case StepJob::Part::Whole:
      return results.at(static_cast<std::size_t>(mapped.job)).total_s;
    case StepJob::Part::Forward:
      return results.at(static_cast<std::size_t>(mapped.job)).forward_s;
    case StepJob::Part::Backward:
      return results.at(static_cast<std::size_t>(mapped.job)).backward_s;
    case StepJob::Part::Model:
    case StepJob::Part::None:
      break;
  }
  return step.seconds;
}

}  // namespace

MeasuredIteration compose_rank_serial(const program::IterationProgram& program, const ProgramJobs& mapped,
                                      const std::vector<DeviceJob>& jobs, const std::vector<JobResult>& results,
                                      bool record_spans) {
  MeasuredIteration m;
  const std::size_t world = program.gpus.size();
  m.peak_bytes.assign(world, 0.0);
  for (std::size_t g = 0; g < world; ++g) {
    std::vector<int> used = mapped.memory[g];
    double activations = 0;
    for (int j : mapped.memory[g])
      activations = std::max(activations, results.at(static_cast<std::size_t>(j)).activation_peak_bytes);
    for (const StepJob& s : mapped.steps[g]) {
      if (s.job < 0) continue;
      used.push_back(s.job);
      // An optimizer step's own scratch, when the static block cannot hold its states.
      if (jobs.at(static_cast<std::size_t>(s.job)).kind == DeviceJob::Kind::Optimizer)
        activations = std::max(activations, results.at(static_cast<std::size_t>(s.job)).activation_peak_bytes);
    }
    m.peak_bytes[g] = mapped.static_bytes[g] + activations;
    for (int j : used) {
      const JobResult& r = results.at(static_cast<std::size_t>(j));
      if (!r.oom) continue;
      if (m.oom_error.empty()) m.oom_error = "GPU " + std::to_string(g) + ": " + r.oom_error;
      if (m.oom_gpus.empty() || m.oom_gpus.back() != static_cast<int>(g)) m.oom_gpus.push_back(static_cast<int>(g));
    }
  }
  if (!m.oom_gpus.empty()) {
    m.seconds = std::numeric_limits<double>::quiet_NaN();
    m.busy_seconds.assign(world, 0.0);
    return m;
  }
  const program::IterationProgram measured =
      program::retime_compute(program, [&](int g, std::size_t i, const program::Step& step) {
        return step_seconds(mapped.steps.at(static_cast<std::size_t>(g)).at(i), step, results);
      });
  program::IterationOutcome outcome = program::replay_program(measured, 0, record_spans);
  m.seconds = outcome.seconds;
  m.busy_seconds = std::move(outcome.busy_seconds);
  m.propagation_end_s = std::move(outcome.propagation_end_s);
  m.spans = std::move(outcome.spans);
  return m;
}

}  // namespace lcsim
