#include "live/gpu/live_rank_serial.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <string>

#include <cuda_runtime_api.h>

#include "kernels/cuda_check.hpp"
#include "live/gpu/live_device.hpp"
#include "live/live_compose.hpp"
#include "live/live_work.hpp"

namespace lcsim::gpu {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr std::uint64_t kSeed = 20250101;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// The cost model's milliseconds for a job's steps: whole, or forward + backward for a pipeline's parts.
double predicted_ms(const JobUse& use) {
  return 1e3 * (std::isnan(use.predicted_whole_s) ? use.predicted_forward_s + use.predicted_backward_s
                                                  : use.predicted_whole_s);
}

std::string describe(const DeviceJob& job) {
  char text[200];
  if (job.kind == DeviceJob::Kind::Optimizer) {
    std::snprintf(text, sizeof text, "optimizer step, %.1f M parameters", job.parameters / 1e6);
    return text;
  }
  const ProxyShape& s = job.shape;
  std::snprintf(text, sizeof text, "%zu whole + %zu sharded (cp %d) sequences, %lld rows, %d layers%s%s",
                s.local.size(), s.sharded.size(), s.cp, static_cast<long long>(s.rows()), s.layers,
                s.lm_head ? " + LM head" : "", job.timed ? "" : " (memory probe)");
  return text;
}

std::string device_name() {
  cudaDeviceProp prop{};
  kernels::check_cuda(cudaGetDeviceProperties(&prop, 0), "live: device properties");
  return prop.name;
}

}  // namespace

LiveExecution run_rank_serial(const LivePlans& live, const LiveOptions& options, std::ostream& progress) {
  const ModelConfig& model = live.loaded.scenario.model;
  JobTable table;
  std::vector<std::vector<ProgramJobs>> mapped;
  for (const LivePolicyPlans& policy : live.policies) {
    mapped.emplace_back();
    const int tag = static_cast<int>(mapped.size() - 1);
    for (const auto& program : policy.programs) mapped.back().push_back(table.add(program, model, tag));
  }
  const std::vector<DeviceJob>& jobs = table.jobs();

  const double usable = live.loaded.cost->capacity_bytes();
  LiveDevice device(0, usable, kSeed);
  LiveExecution exec;
  const int world = live.loaded.scenario.cluster.world_size();
  exec.execution = "rank-serial: the compute of all " + std::to_string(world) + " GPUs in turn on GPU 0";
  exec.device = device_name();
  exec.collectives = "from the profile (rank-serial: collectives, pipeline transfers and strategy switches not run)";
  exec.notes.push_back("compute: " + std::to_string(jobs.size()) + " distinct jobs, " + std::to_string(options.warmup) +
                       " warm-up and " + std::to_string(options.repetitions) +
                       " timed runs each (median); Ulysses shards run their post-all-to-all attention on local copies");
  char text[200];
  std::snprintf(text, sizeof text,
                "memory: %.2f GiB free at start, %.2f GiB held back so that the plan's usable %.2f GiB remain",
                device.free_bytes_at_start() / kGiB, device.held_back_bytes() / kGiB, usable / kGiB);
  exec.notes.push_back(text);
  if (device.free_bytes_at_start() < usable)
    exec.notes.push_back("the device has less free memory than the plan's usable capacity: it may run out earlier");

  // Jobs grouped by static bytes so the static block is resized rarely.
  std::vector<std::size_t> order(jobs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return jobs[a].static_bytes < jobs[b].static_bytes; });
  std::vector<JobResult> results(jobs.size());
  const auto started = std::chrono::steady_clock::now();
  for (std::size_t k = 0; k < order.size(); ++k) {
    const DeviceJob& job = jobs[order[k]];
    results[order[k]] = device.measure(job, options.warmup, options.repetitions);
    const JobResult& r = results[order[k]];
    progress << "[" << k + 1 << "/" << order.size() << "] " << describe(job) << ": ";
    if (r.oom) {
      progress << "out of memory (" << r.oom_error << ")\n";
    } else {
      std::snprintf(text, sizeof text, "%.3f ms (forward %.3f), predicted %.3f ms, activations %.2f GiB\n",
                    r.total_s * 1e3, r.forward_s * 1e3, predicted_ms(table.uses()[order[k]]),
                    r.activation_peak_bytes / kGiB);
      progress << text;
    }
    progress.flush();
  }
  std::snprintf(text, sizeof text, "%.1f s on the device for %zu jobs",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), jobs.size());
  exec.notes.push_back(text);

  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const JobResult& r = results[j];
    const bool measured = jobs[j].timed && !r.oom;
    exec.jobs.push_back({jobs[j], table.uses()[j], measured ? r.forward_s : kNaN, measured ? r.backward_s : kNaN,
                         measured ? r.total_s : kNaN, r.activation_peak_bytes, r.oom});
  }

  const bool spans = !options.trace_file.empty();
  for (std::size_t p = 0; p < live.policies.size(); ++p) {
    exec.iterations.emplace_back();
    for (std::size_t i = 0; i < live.policies[p].programs.size(); ++i)
      exec.iterations.back().push_back(
          compose_rank_serial(live.policies[p].programs[i], mapped[p][i], jobs, results, spans));
  }
  return exec;
}

}  // namespace lcsim::gpu
