#pragma once
// Simulated iterations as a Chrome trace timeline (formats/chrome_trace.hpp), for Perfetto or chrome://tracing:
//   - one track group (process) per GPU, "GPU g (node n)", with two tracks: "compute" (compute spans, and the
//     idle gaps where the GPU neither computes nor communicates) and "communication" (collectives and pipeline
//     transfers; with Skrull's overlap they run beside compute, hence their own track);
//   - a first group "iterations" with one span per simulated iteration, "<policy> iteration i".
// Spans are named by what they are and the micro-batch, e.g. "forward mb 3 [seq 12, 45 +6]"; their args give
// iteration, replica, micro-batch, token count and the sequence ids the GPU works on. Times are the simulated
// clock: policies follow each other on one time axis.
#include <string>

#include "formats/chrome_trace.hpp"
#include "model/cluster.hpp"
#include "model/plan.hpp"
#include "program/outcome.hpp"

namespace lcsim {

class TimelineWriter {
 public:
  /// `metadata`: what the trace is of (scenario, profile, dataset labels), ChromeTraceWriter's "metadata".
  TimelineWriter(const std::string& file, const ClusterSpec& cluster, const nlohmann::ordered_json& metadata = {});
  /// Needs the outcome's spans (SimulationOptions::record_spans, or replay_program).
  void add_iteration(const std::string& policy, std::size_t iteration, const IterationPlan& plan,
                     const program::IterationOutcome& outcome);
  void close() { writer_.close(); }

 private:
  ChromeTraceWriter writer_;
};

}  // namespace lcsim
