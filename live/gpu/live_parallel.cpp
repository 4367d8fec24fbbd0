#include "live/gpu/live_parallel.hpp"

#include <algorithm>
#include <barrier>
#include <cmath>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>

#include "kernels/cuda_check.hpp"
#include "kernels/kernel_timer.hpp"
#include "kernels/nccl_library.hpp"
#include "live/gpu/live_device.hpp"
#include "live/live_work.hpp"

namespace lcsim::gpu {
namespace {

using kernels::check_cuda;
using program::Step;

constexpr std::uint64_t kSeed = 20250101;

/// One NCCL communicator per GPU of every group the programs use, created once (ncclCommInitAll: this process
/// drives every GPU of the node).
class Communicators {
 public:
  explicit Communicators(const NcclLibrary& nccl) : nccl_(nccl) {}
  ~Communicators() {
    if (aborted_) return;  // ncclCommAbort freed them
    for (auto& [group, comms] : groups_)
      for (ncclComm_t c : comms) nccl_.comm_destroy(c);
  }
  Communicators(const Communicators&) = delete;
  Communicators& operator=(const Communicators&) = delete;

  void add(const std::vector<int>& gpus) {
    if (gpus.size() < 2 || groups_.count(gpus)) return;
    std::vector<ncclComm_t> comms(gpus.size());
    nccl_.check(nccl_.comm_init_all(comms.data(), static_cast<int>(gpus.size()), gpus.data()), "ncclCommInitAll");
    groups_.emplace(gpus, std::move(comms));
  }
  /// Aborts every communicator, so that GPUs waiting in a collective for a peer that failed return (with an
  /// error) instead of hanging. Safe from any thread, once; the communicators are unusable afterwards.
  void abort_all() {
    std::call_once(abort_once_, [this] {
      for (auto& [group, comms] : groups_)
        for (ncclComm_t c : comms) nccl_.comm_abort(c);
      aborted_ = true;
    });
  }
  ncclComm_t get(const std::vector<int>& gpus, int gpu) const {
    const auto& comms = groups_.at(gpus);
    return comms[static_cast<std::size_t>(std::find(gpus.begin(), gpus.end(), gpu) - gpus.begin())];
  }

 private:
  const NcclLibrary& nccl_;
  std::map<std::vector<int>, std::vector<ncclComm_t>> groups_;
  std::once_flag abort_once_;
  bool aborted_ = false;
};

/// One GPU: its device, a communication stream and the collectives' buffers.
struct Rig {
  std::unique_ptr<LiveDevice> device;
  cudaStream_t comm = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  bool own_buffers = false;
  std::vector<cudaEvent_t> events;

  void free_buffers() {
    if (own_buffers) {
      cudaFree(send);
      cudaFree(recv);
    }
    send = recv = nullptr;
    own_buffers = false;
  }
  cudaEvent_t event(std::size_t k) {
    while (events.size() <= k) {
      cudaEvent_t e = nullptr;
      check_cuda(cudaEventCreate(&e), "live: event");
      events.push_back(e);
    }
    return events[k];
  }
};

/// The largest send and receive buffers GPU g needs for the collectives of `program`.
std::pair<std::size_t, std::size_t> buffer_sizes(const program::IterationProgram& program, int g) {
  std::size_t send = 0, recv = 0;
  for (const program::CollectiveSpec& spec : program.collectives) {
    if (std::find(spec.gpus.begin(), spec.gpus.end(), g) == spec.gpus.end()) continue;
    for (const CollectiveCall& call : spec.calls) {
      const NcclArgs a = nccl_args(call.op, call.bytes, static_cast<int>(spec.gpus.size()));
      send = std::max(send, a.send_bytes);
      recv = std::max(recv, a.recv_bytes);
    }
  }
  return {send, recv};
}

void issue(const NcclLibrary& nccl, const program::CollectiveSpec& spec, ncclComm_t comm, const Rig& rig) {
  const int n = static_cast<int>(spec.gpus.size());
  for (const CollectiveCall& call : spec.calls) {
    const NcclArgs a = nccl_args(call.op, call.bytes, n);
    if (a.count == 0) continue;
    const long calls = std::lround(call.count);
    for (long k = 0; k < calls; ++k) {
      switch (call.op) {
        case CollectiveOp::AllToAll:
          nccl.check(nccl.alltoall(rig.send, rig.recv, a.count, ncclBfloat16, comm, rig.comm), "AlltoAll");
          break;
        case CollectiveOp::AllGather:
          nccl.check(nccl.all_gather(rig.send, rig.recv, a.count, ncclBfloat16, comm, rig.comm), "AllGather");
          break;
        case CollectiveOp::ReduceScatter:
          nccl.check(nccl.reduce_scatter(rig.send, rig.recv, a.count, ncclBfloat16, ncclSum, comm, rig.comm),
                     "ReduceScatter");
          break;
        case CollectiveOp::AllReduce:
          nccl.check(nccl.all_reduce(rig.send, rig.recv, a.count, ncclBfloat16, ncclSum, comm, rig.comm), "AllReduce");
          break;
        case CollectiveOp::SendRecv:
          throw std::logic_error("live: a send/recv inside a collective step");
      }
    }
  }
}

double elapsed(cudaEvent_t from, cudaEvent_t to) {
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, from, to), "live: event time");
  return static_cast<double>(ms) * 1e-3;
}

/// Union length of intervals (busy time: overlapped work counts once, as in the simulator).
double union_length(std::vector<std::pair<double, double>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  double total = 0, cursor = -std::numeric_limits<double>::infinity();
  for (const auto& [from, to] : intervals) {
    const double start = std::max(from, cursor);
    if (to > start) total += to - start;
    cursor = std::max(cursor, to);
  }
  return total;
}

/// One timed run of GPU g's steps: (seconds from its start to its end, spans).
struct GpuRun {
  double seconds = 0;
  std::vector<program::GpuSpan> spans;
};

class ParallelRun {
 public:
  ParallelRun(const LivePlans& live, const LiveOptions& options, std::ostream& progress)
      : live_(live), options_(options), progress_(progress), nccl_(NcclLibrary::get()), comms_(nccl_) {
    if (!nccl_.available())
      throw std::runtime_error("NCCL unavailable (" + nccl_.reason() + "); --mode rank-serial runs without it");
    world_ = live.loaded.scenario.cluster.world_size();
    for (const LivePolicyPlans& policy : live.policies) {
      jobs_.emplace_back();
      for (const auto& program : policy.programs) {
        jobs_.back().push_back(table_.add(program, live.loaded.scenario.model));
        for (const program::CollectiveSpec& spec : program.collectives)
          if (!spec.calls.empty()) comms_.add(spec.gpus);
      }
    }
    rigs_.resize(static_cast<std::size_t>(world_));
    for (int g = 0; g < world_; ++g) {
      Rig& rig = rigs_[static_cast<std::size_t>(g)];
      rig.device =
          std::make_unique<LiveDevice>(g, live.loaded.cost->capacity_bytes(), kSeed + static_cast<unsigned>(g));
      check_cuda(cudaStreamCreateWithFlags(&rig.comm, cudaStreamNonBlocking), "live: communication stream");
    }
  }
  ~ParallelRun() {
    for (std::size_t g = 0; g < rigs_.size(); ++g) {
      cudaSetDevice(static_cast<int>(g));
      rigs_[g].free_buffers();
      for (cudaEvent_t e : rigs_[g].events) cudaEventDestroy(e);
      if (rigs_[g].comm != nullptr) cudaStreamDestroy(rigs_[g].comm);
      rigs_[g].device.reset();
    }
  }
  ParallelRun(const ParallelRun&) = delete;
  ParallelRun& operator=(const ParallelRun&) = delete;

  LiveExecution run() {
    LiveExecution exec;
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, 0), "live: device properties");
    exec.execution = "parallel: one thread per GPU on " + std::to_string(world_) + " GPUs";
    exec.device = std::to_string(world_) + " x " + prop.name;
    exec.collectives = "NCCL " + nccl_.version() + " on this node (the cost model's sizes and counts)";
    exec.notes.push_back(std::to_string(options_.warmup) + " warm-up and " + std::to_string(options_.repetitions) +
                         " timed runs of every iteration (median; iteration time: the slowest GPU's CUDA events)");
    exec.notes.push_back(
        "each compute step uploads its batch layout first (a host synchronisation inside the "
        "iteration); Ulysses shards attend on local copies, the all-to-alls move buffers of their "
        "size");
    for (std::size_t p = 0; p < live_.policies.size(); ++p) {
      exec.iterations.emplace_back();
      for (std::size_t i = 0; i < live_.policies[p].programs.size(); ++i) {
        progress_ << "[" << live_.policies[p].label << " " << i + 1 << "/" << live_.policies[p].programs.size() << "] ";
        exec.iterations.back().push_back(iteration(live_.policies[p].programs[i], jobs_[p][i]));
        const MeasuredIteration& m = exec.iterations.back().back();
        if (std::isfinite(m.seconds))
          progress_ << m.seconds << " s\n";
        else
          progress_ << "out of memory (" << m.oom_error << ")\n";
        progress_.flush();
      }
    }
    return exec;
  }

 private:
  /// Runs body(g) on one thread per GPU (device g current) and rethrows the first exception.
  void on_every_gpu(const std::function<void(int)>& body) {
    std::vector<std::thread> threads;
    std::exception_ptr error;
    std::mutex lock;
    for (int g = 0; g < world_; ++g)
      threads.emplace_back([&, g] {
        try {
          check_cuda(cudaSetDevice(g), "live: cudaSetDevice");
          body(g);
        } catch (...) {
          const std::lock_guard<std::mutex> guard(lock);
          if (!error) error = std::current_exception();
        }
      });
    for (auto& t : threads) t.join();
    if (error) std::rethrow_exception(error);
  }

  MeasuredIteration iteration(const program::IterationProgram& program, const ProgramJobs& mapped) {
    const std::vector<DeviceJob>& jobs = table_.jobs();
    MeasuredIteration m;
    m.peak_bytes.assign(static_cast<std::size_t>(world_), 0.0);
    m.busy_seconds.assign(static_cast<std::size_t>(world_), 0.0);
    std::vector<std::string> oom(static_cast<std::size_t>(world_));
    // Static block, buffers and a memory probe of every micro-batch, each GPU alone.
    on_every_gpu([&](int g) {
      const auto gi = static_cast<std::size_t>(g);
      Rig& rig = rigs_[gi];
      rig.free_buffers();  // the previous program's: they must not count against this one's static block
      if (!rig.device->reserve_static(mapped.static_bytes[gi])) {
        oom[gi] = "the plan's static bytes do not fit";
        return;
      }
      const auto [send, recv] = buffer_sizes(program, g);
      if (send + recv <= rig.device->static_size()) {  // gradients and parameters live in the static block
        rig.send = rig.device->static_block();
        rig.recv = static_cast<char*>(rig.device->static_block()) + send;
      } else {
        const cudaError_t a = cudaMalloc(&rig.send, std::max<std::size_t>(send, 1));
        const cudaError_t b = cudaMalloc(&rig.recv, std::max<std::size_t>(recv, 1));
        rig.own_buffers = true;
        if (a == cudaErrorMemoryAllocation || b == cudaErrorMemoryAllocation) {
          cudaGetLastError();
          oom[gi] = "the collectives' buffers do not fit";
          return;
        }
        check_cuda(a, "live: collective buffer");
        check_cuda(b, "live: collective buffer");
      }
      double activations = 0;
      try {
        for (int j : mapped.memory[gi]) {
          activations = std::max(activations, rig.device->enqueue(jobs[static_cast<std::size_t>(j)], {}));
          check_cuda(cudaStreamSynchronize(rig.device->stream()), "live: memory probe");
        }
      } catch (const kernels::CudaOutOfMemory& e) {
        oom[gi] = e.what();
        rig.device->release_cached();
      }
      m.peak_bytes[gi] = mapped.static_bytes[gi] + activations;
    });
    for (int g = 0; g < world_; ++g)
      if (!oom[static_cast<std::size_t>(g)].empty()) {
        m.oom_gpus.push_back(g);
        if (m.oom_error.empty()) m.oom_error = "GPU " + std::to_string(g) + ": " + oom[static_cast<std::size_t>(g)];
      }
    if (!m.oom_gpus.empty()) {
      m.seconds = std::numeric_limits<double>::quiet_NaN();
      return m;
    }

    std::vector<double> seconds;
    std::vector<std::vector<GpuRun>> runs;
    for (int r = 0; r < options_.warmup + options_.repetitions; ++r) {
      std::vector<GpuRun> per_gpu(static_cast<std::size_t>(world_));
      std::barrier start(world_);
      on_every_gpu([&](int g) {
        try {
          per_gpu[static_cast<std::size_t>(g)] = run_steps(program, mapped, g, start);
        } catch (...) {
          // The other GPUs may wait in a collective for this one forever: abort NCCL so that they fail too.
          comms_.abort_all();
          throw;
        }
      });
      if (r < options_.warmup) continue;
      double slowest = 0;
      for (const GpuRun& run : per_gpu) slowest = std::max(slowest, run.seconds);
      seconds.push_back(slowest);
      runs.push_back(std::move(per_gpu));
    }
    // The median run's figures.
    std::vector<std::size_t> order(seconds.size());
    for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return seconds[a] < seconds[b]; });
    const std::size_t chosen = order[(order.size() - 1) / 2];
    m.seconds = seconds[chosen];
    for (int g = 0; g < world_; ++g) {
      const GpuRun& run = runs[chosen][static_cast<std::size_t>(g)];
      std::vector<std::pair<double, double>> intervals;
      for (const program::GpuSpan& span : run.spans) intervals.emplace_back(span.start_s, span.end_s);
      m.busy_seconds[static_cast<std::size_t>(g)] = union_length(std::move(intervals));
      m.spans.insert(m.spans.end(), run.spans.begin(), run.spans.end());
    }
    return m;
  }

  GpuRun run_steps(const program::IterationProgram& program, const ProgramJobs& mapped, int g, std::barrier<>& start) {
    const auto gi = static_cast<std::size_t>(g);
    Rig& rig = rigs_[gi];
    const cudaStream_t compute = rig.device->stream();
    const auto& steps = program.gpus[gi];
    const std::vector<DeviceJob>& jobs = table_.jobs();
    // Events: 0 start, 1 end, then 5 per step: communication start and end, the GPU ready for the collective,
    // compute start and end. All created before any is used (the list must not grow meanwhile).
    constexpr std::size_t kPerStep = 5;
    try {
      rig.event(1 + kPerStep * steps.size());
    } catch (...) {
      start.arrive_and_drop();  // the others must not wait for this GPU at the start
      throw;
    }
    struct Recorded {
      std::size_t step;
      cudaEvent_t from, to;
      program::WorkKind kind;
    };
    std::vector<Recorded> recorded;
    const auto wait = [](cudaStream_t stream, cudaEvent_t event) {
      check_cuda(cudaStreamWaitEvent(stream, event, 0), "live: stream wait");
    };
    const auto rec = [](cudaEvent_t event, cudaStream_t stream) {
      check_cuda(cudaEventRecord(event, stream), "live: event record");
    };
    start.arrive_and_wait();
    rec(rig.event(0), compute);
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const Step& step = steps[i];
      const cudaEvent_t* e = &rig.events[2 + kPerStep * i];
      const bool with_collective =
          step.type == Step::Type::Collective || step.type == Step::Type::ComputeWithCollective;
      if (with_collective) {
        const program::CollectiveSpec& spec = program.collectives[static_cast<std::size_t>(step.index)];
        rec(e[2], compute);  // the GPU is ready: the collective may start
        wait(rig.comm, e[2]);
        rec(e[0], rig.comm);
        // A spec without calls moves nothing (and has no communicator): it only orders the streams.
        if (spec.gpus.size() > 1 && !spec.calls.empty()) issue(nccl_, spec, comms_.get(spec.gpus, g), rig);
        rec(e[1], rig.comm);
        recorded.push_back({i, e[0], e[1], spec.kind});
      }
      if (step.type == Step::Type::Compute || step.type == Step::Type::ComputeWithCollective) {
        const StepJob& job = mapped.steps[gi][i];
        if (job.job < 0 || job.part != StepJob::Part::Whole)
          throw std::logic_error("live: parallel mode runs whole forward + backward steps only");
        rig.device->enqueue(jobs[static_cast<std::size_t>(job.job)], {e[3], nullptr, e[4]});
        recorded.push_back({i, e[3], e[4], step.kind});
      }
      if (with_collective) wait(compute, e[1]);  // the step ends when both have
      if (step.type == Step::Type::Send || step.type == Step::Type::Recv)
        throw std::logic_error("live: parallel mode runs no pipeline transfers");
    }
    rec(rig.event(1), compute);
    check_cuda(cudaStreamSynchronize(compute), "live: iteration");
    check_cuda(cudaStreamSynchronize(rig.comm), "live: iteration");
    GpuRun run;
    const cudaEvent_t origin = rig.event(0);
    run.seconds = elapsed(origin, rig.event(1));
    for (const Recorded& r : recorded) {
      const Step& step = steps[r.step];
      run.spans.push_back({g, elapsed(origin, r.from), elapsed(origin, r.to), r.kind, step.replica, step.micro_batch});
    }
    return run;
  }

  const LivePlans& live_;
  const LiveOptions& options_;
  std::ostream& progress_;
  const NcclLibrary& nccl_;
  Communicators comms_;
  int world_ = 0;
  JobTable table_;
  std::vector<std::vector<ProgramJobs>> jobs_;
  std::vector<Rig> rigs_;
};

}  // namespace

LiveExecution run_parallel(const LivePlans& live, const LiveOptions& options, std::ostream& progress) {
  check_parallel_plans(live);
  ParallelRun run(live, options, progress);
  return run.run();
}

}  // namespace lcsim::gpu
