#pragma once
// NCCL, loaded at run time (dlopen) rather than linked: a one-GPU node needs no NCCL at all, and the library is
// found wherever the machine keeps it (the CUDA toolkit, a Python wheel) through the loader's search path or
// $LCSIM_NCCL_LIBRARY.
#include <cstddef>
#include <string>

#include <nccl.h>

namespace lcsim::gpu {

class NcclLibrary {
 public:
  /// The process-wide instance, loaded on first use.
  static const NcclLibrary& get();

  bool available() const { return handle_ != nullptr; }
  /// Why it is not available (empty when it is).
  const std::string& reason() const { return reason_; }
  /// "2.28.9", or "not loaded (reason)".
  std::string version() const;
  /// Throws std::runtime_error naming `what` and NCCL's message when `result` is not ncclSuccess.
  void check(ncclResult_t result, const std::string& what) const;
  /// All-to-all of `count` elements per peer: ncclAlltoAll where the library has it (NCCL 2.28+), else one grouped
  /// ncclSend / ncclRecv per peer (what older NCCL's own all-to-all did), so older libraries still work.
  ncclResult_t alltoall(const void* send_buffer, void* recv_buffer, std::size_t count, ncclDataType_t type,
                        ncclComm_t comm, cudaStream_t stream) const;
  bool native_alltoall() const { return all_to_all != nullptr; }

  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  decltype(&ncclCommInitAll) comm_init_all = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclAlltoAll) all_to_all = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclCommCount) comm_count = nullptr;

 private:
  NcclLibrary();
  void* handle_ = nullptr;
  std::string reason_;
};

}  // namespace lcsim::gpu
