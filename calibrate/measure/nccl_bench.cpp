#include "calibrate/measure/nccl_bench.hpp"

#include <algorithm>
#include <functional>
#include <iomanip>
#include <map>
#include <ostream>
#include <stdexcept>

#include <cuda_runtime_api.h>

#include "kernels/cuda_check.hpp"
#include "kernels/kernel_timer.hpp"
#include "kernels/layer_ops.hpp"
#include "kernels/nccl_library.hpp"

namespace lcsim::gpu {
namespace {

using kernels::check_cuda;

/// Communicator, stream, events and two buffers per GPU of a group of the first `n` devices.
class Group {
 public:
  Group(int n, std::size_t buffer_bytes) : nccl_(NcclLibrary::get()), n_(n), bytes_(buffer_bytes) {
    if (!nccl_.available()) throw std::runtime_error("NCCL unavailable: " + nccl_.reason());
    std::vector<int> devices(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) devices[static_cast<std::size_t>(i)] = i;
    comms_.resize(devices.size());
    nccl_.check(nccl_.comm_init_all(comms_.data(), n, devices.data()), "ncclCommInitAll");
    for (int r = 0; r < n; ++r) {
      check_cuda(cudaSetDevice(r), "cudaSetDevice");
      Rank rank;
      check_cuda(cudaStreamCreateWithFlags(&rank.stream, cudaStreamNonBlocking), "stream");
      check_cuda(cudaEventCreate(&rank.start), "event");
      check_cuda(cudaEventCreate(&rank.stop), "event");
      check_cuda(cudaMalloc(&rank.send, bytes_), "collective send buffer");
      check_cuda(cudaMalloc(&rank.recv, bytes_), "collective receive buffer");
      // Random data: never time on zeros.
      kernels::fill_uniform(static_cast<float*>(rank.send), static_cast<std::int64_t>(bytes_ / 4),
                            static_cast<std::uint64_t>(r + 1), 1.f, rank.stream);
      ranks_.push_back(rank);
    }
    synchronize();
  }
  ~Group() {
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      cudaSetDevice(static_cast<int>(r));
      cudaFree(ranks_[r].recv);
      cudaFree(ranks_[r].send);
      cudaEventDestroy(ranks_[r].stop);
      cudaEventDestroy(ranks_[r].start);
      cudaStreamDestroy(ranks_[r].stream);
      nccl_.comm_destroy(comms_[r]);
    }
    cudaSetDevice(0);
  }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  /// Median over `repetitions` of the slowest rank's event time of launch(rank) issued for every rank in one
  /// NCCL group.
  double time(const std::function<void(int)>& launch, int warmup, int repetitions) {
    for (int i = 0; i < warmup; ++i) issue(launch, false);
    synchronize();
    std::vector<double> times;
    for (int i = 0; i < repetitions; ++i) {
      issue(launch, true);
      synchronize();
      double slowest = 0;
      for (auto& rank : ranks_) {
        float ms = 0;
        check_cuda(cudaEventElapsedTime(&ms, rank.start, rank.stop), "collective elapsed time");
        slowest = std::max(slowest, ms * 1e-3);
      }
      times.push_back(slowest);
    }
    return median(times);
  }

  const NcclLibrary& nccl() const { return nccl_; }
  int size() const { return n_; }
  void* send(int r) const { return ranks_[static_cast<std::size_t>(r)].send; }
  void* recv(int r) const { return ranks_[static_cast<std::size_t>(r)].recv; }
  ncclComm_t comm(int r) const { return comms_[static_cast<std::size_t>(r)]; }
  cudaStream_t stream(int r) const { return ranks_[static_cast<std::size_t>(r)].stream; }

 private:
  struct Rank {
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    void* send = nullptr;
    void* recv = nullptr;
  };
  void issue(const std::function<void(int)>& launch, bool timed) {
    if (timed) {
      for (int r = 0; r < n_; ++r) {
        check_cuda(cudaSetDevice(r), "cudaSetDevice");
        check_cuda(cudaEventRecord(ranks_[static_cast<std::size_t>(r)].start, stream(r)), "event record");
      }
    }
    nccl_.check(nccl_.group_start(), "ncclGroupStart");
    for (int r = 0; r < n_; ++r) launch(r);
    nccl_.check(nccl_.group_end(), "ncclGroupEnd");
    if (timed) {
      for (int r = 0; r < n_; ++r) {
        check_cuda(cudaSetDevice(r), "cudaSetDevice");
        check_cuda(cudaEventRecord(ranks_[static_cast<std::size_t>(r)].stop, stream(r)), "event record");
      }
    }
  }
  void synchronize() {
    for (int r = 0; r < n_; ++r) {
      check_cuda(cudaSetDevice(r), "cudaSetDevice");
      check_cuda(cudaStreamSynchronize(stream(r)), "collective");
    }
    check_cuda(cudaSetDevice(0), "cudaSetDevice");
  }

  const NcclLibrary& nccl_;
  int n_;
  std::size_t bytes_;
  std::vector<ncclComm_t> comms_;
  std::vector<Rank> ranks_;
};

/// Elements per rank argument and the nccl-tests size actually moved, for a requested size of float elements.
struct Counts {
  std::size_t count;  // the count argument NCCL gets
  double bytes;       // nccl-tests "size"
};
Counts counts_for(CollectiveOp op, double requested_bytes, int n) {
  const auto elements = static_cast<std::size_t>(requested_bytes / sizeof(float));
  const auto ranks = static_cast<std::size_t>(n);
  switch (op) {
    case CollectiveOp::AllReduce:
    case CollectiveOp::SendRecv:
      return {elements, static_cast<double>(elements * sizeof(float))};
    case CollectiveOp::AllGather:      // count = per-rank input; size = gathered output
    case CollectiveOp::ReduceScatter:  // count = per-rank output; size = input
    case CollectiveOp::AllToAll:       // count = per peer; size = one rank's buffer
      return {elements / ranks, static_cast<double>(elements / ranks * ranks * sizeof(float))};
  }
  return {0, 0};
}

void launch(Group& g, CollectiveOp op, std::size_t count, int r) {
  const auto& nccl = g.nccl();
  const int n = g.size();
  switch (op) {
    case CollectiveOp::AllReduce:
      nccl.check(nccl.all_reduce(g.send(r), g.recv(r), count, ncclFloat, ncclSum, g.comm(r), g.stream(r)), "AllReduce");
      break;
    case CollectiveOp::AllGather:
      nccl.check(nccl.all_gather(g.send(r), g.recv(r), count, ncclFloat, g.comm(r), g.stream(r)), "AllGather");
      break;
    case CollectiveOp::ReduceScatter:
      nccl.check(nccl.reduce_scatter(g.send(r), g.recv(r), count, ncclFloat, ncclSum, g.comm(r), g.stream(r)),
                 "ReduceScatter");
      break;
    case CollectiveOp::AllToAll:
      nccl.check(nccl.alltoall(g.send(r), g.recv(r), count, ncclFloat, g.comm(r), g.stream(r)), "AlltoAll");
      break;
    case CollectiveOp::SendRecv:  // nccl-tests sendrecv: send to the next rank, receive from the previous
      nccl.check(nccl.send(g.send(r), count, ncclFloat, (r + 1) % n, g.comm(r), g.stream(r)), "Send");
      nccl.check(nccl.recv(g.recv(r), count, ncclFloat, (r + n - 1) % n, g.comm(r), g.stream(r)), "Recv");
      break;
  }
}

void table_header(std::ostream& out, CollectiveOp op, int n) {
  out << "# " << to_string(op) << ", " << n << " GPUs (nccl-tests conventions: out-of-place, float, sum)\n"
      << "#" << std::setw(13) << "size" << std::setw(13) << "count" << std::setw(7) << "type" << std::setw(11)
      << "time(us)" << std::setw(12) << "algbw(GB/s)" << std::setw(12) << "busbw(GB/s)"
      << "\n";
}

void table_row(std::ostream& out, double bytes, std::size_t count, double seconds, double factor) {
  const double algbw = bytes / seconds / 1e9;
  out << std::setw(14) << static_cast<long long>(bytes) << std::setw(13) << count << std::setw(7) << "float"
      << std::setw(11) << std::fixed << std::setprecision(1) << seconds * 1e6 << std::setw(12) << std::setprecision(2)
      << algbw << std::setw(12) << algbw * factor << "\n"
      << std::defaultfloat;
}

}  // namespace

std::vector<CollectiveMeasurement> measure_collectives(const std::vector<CollectivePlan>& plans, int warmup,
                                                       int repetitions, std::ostream& table) {
  std::map<int, std::vector<const CollectivePlan*>> by_group;
  for (const auto& p : plans) by_group[p.group_size].push_back(&p);
  std::vector<CollectiveMeasurement> out;
  for (const auto& [n, group_plans] : by_group) {
    double largest = 0;
    for (const auto* p : group_plans) largest = std::max(largest, *std::max_element(p->bytes.begin(), p->bytes.end()));
    Group group(n, static_cast<std::size_t>(largest));
    for (const auto* p : group_plans) {
      CollectiveMeasurement m{p->op, n, {}};
      table_header(table, p->op, n);
      for (double requested : p->bytes) {
        const Counts c = counts_for(p->op, requested, n);
        if (c.count == 0) continue;  // fewer elements than ranks: nothing to move
        const double seconds = group.time([&](int r) { launch(group, p->op, c.count, r); }, warmup, repetitions);
        table_row(table, c.bytes, c.count, seconds, bus_factor(p->op, n));
        m.samples.push_back({c.bytes, seconds});
      }
      out.push_back(m);
    }
  }
  return out;
}

std::vector<UlyssesMeasurement> measure_ulysses(const ModelConfig& model, const std::vector<UlyssesPoint>& points,
                                                int warmup, int repetitions, std::ostream& table) {
  std::map<int, std::vector<const UlyssesPoint*>> by_group;
  for (const auto& p : points) by_group[p.cp].push_back(&p);
  std::vector<UlyssesMeasurement> out;
  const int widest = std::max(model.q_hidden(), model.kv_hidden());
  for (const auto& [n, group_points] : by_group) {
    int most = 0;
    for (const auto* p : group_points) most = std::max(most, p->tokens_per_gpu);
    Group group(n, static_cast<std::size_t>(most) * static_cast<std::size_t>(widest) * 2);
    table << "# Ulysses all-to-all, CP group of " << n << " GPUs, " << model.name
          << ": Q, K, V and output of one layer forward (BF16)\n"
          << "#" << std::setw(15) << "tokens/GPU" << std::setw(12) << "time(us)"
          << "\n";
    for (const auto* p : group_points) {
      // Per peer: the rows of this GPU times the heads that peer will own.
      const std::size_t q_count = static_cast<std::size_t>(p->tokens_per_gpu) * model.q_hidden() / n;
      const std::size_t kv_count = static_cast<std::size_t>(p->tokens_per_gpu) * model.kv_hidden() / n;
      const double seconds = group.time(
          [&](int r) {
            const auto& nccl = group.nccl();
            for (std::size_t count : {q_count, kv_count, kv_count, q_count}) {
              nccl.check(
                  nccl.alltoall(group.send(r), group.recv(r), count, ncclBfloat16, group.comm(r), group.stream(r)),
                  "AlltoAll (Ulysses)");
            }
          },
          warmup, repetitions);
      table << std::setw(16) << p->tokens_per_gpu << std::setw(12) << std::fixed << std::setprecision(1)
            << seconds * 1e6 << "\n"
            << std::defaultfloat;
      out.push_back({n, p->tokens_per_gpu, seconds});
    }
  }
  return out;
}

}  // namespace lcsim::gpu
