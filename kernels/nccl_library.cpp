#include "kernels/nccl_library.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <stdexcept>

namespace lcsim::gpu {
namespace {

template <class Fn>
bool bind(void* handle, const char* name, Fn& fn, std::string& reason) {
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    reason = std::string("symbol ") + name + " missing";
    return false;
  }
  fn = reinterpret_cast<Fn>(symbol);
  return true;
}

}  // namespace

NcclLibrary::NcclLibrary() {
  const char* configured = std::getenv("LCSIM_NCCL_LIBRARY");
  const std::string file = configured != nullptr && *configured != '\0' ? configured : "libnccl.so.2";
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    reason_ = "cannot load " + file + (error != nullptr ? std::string(": ") + error : std::string());
    return;
  }
  const bool ok =
      bind(handle, "ncclGetVersion", get_version, reason_) &&
      bind(handle, "ncclGetErrorString", error_string, reason_) &&
      bind(handle, "ncclCommInitAll", comm_init_all, reason_) &&
      bind(handle, "ncclCommDestroy", comm_destroy, reason_) && bind(handle, "ncclCommAbort", comm_abort, reason_) &&
      bind(handle, "ncclGroupStart", group_start, reason_) && bind(handle, "ncclGroupEnd", group_end, reason_) &&
      bind(handle, "ncclAllGather", all_gather, reason_) &&
      bind(handle, "ncclReduceScatter", reduce_scatter, reason_) &&
      bind(handle, "ncclAllReduce", all_reduce, reason_) && bind(handle, "ncclSend", send, reason_) &&
      bind(handle, "ncclRecv", recv, reason_) && bind(handle, "ncclCommCount", comm_count, reason_);
  // ncclAlltoAll came with NCCL 2.28; without it alltoall() groups sends and receives.
  all_to_all = reinterpret_cast<decltype(all_to_all)>(dlsym(handle, "ncclAlltoAll"));
  if (!ok) {
    reason_ = file + ": " + reason_ + " (NCCL 2.7 or newer is needed)";
    dlclose(handle);
    return;
  }
  handle_ = handle;
}

ncclResult_t NcclLibrary::alltoall(const void* send_buffer, void* recv_buffer, std::size_t count, ncclDataType_t type,
                                   ncclComm_t comm, cudaStream_t stream) const {
  if (all_to_all != nullptr) return all_to_all(send_buffer, recv_buffer, count, type, comm, stream);
  int peers = 0;
  if (const ncclResult_t r = comm_count(comm, &peers); r != ncclSuccess) return r;
  std::size_t element = 0;
  switch (type) {
    case ncclFloat32:
      element = 4;
      break;
    case ncclBfloat16:
    case ncclFloat16:
      element = 2;
      break;
    default:
      return ncclInvalidArgument;  // lcsim moves only float and bf16
  }
  const std::size_t block = count * element;
  const auto* from = static_cast<const char*>(send_buffer);
  auto* to = static_cast<char*>(recv_buffer);
  if (const ncclResult_t r = group_start(); r != ncclSuccess) return r;
  ncclResult_t result = ncclSuccess;
  for (int p = 0; p < peers && result == ncclSuccess; ++p) {
    const std::size_t offset = static_cast<std::size_t>(p) * block;
    result = send(from + offset, count, type, p, comm, stream);
    if (result == ncclSuccess) result = recv(to + offset, count, type, p, comm, stream);
  }
  const ncclResult_t ended = group_end();
  return result != ncclSuccess ? result : ended;
}

const NcclLibrary& NcclLibrary::get() {
  static const NcclLibrary library;
  return library;
}

std::string NcclLibrary::version() const {
  if (!available()) return "not loaded (" + reason_ + ")";
  int code = 0;
  if (get_version(&code) != ncclSuccess) return "unknown";
  // NCCL_VERSION(X, Y, Z) = X * 10000 + Y * 100 + Z since 2.9.
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
}

void NcclLibrary::check(ncclResult_t result, const std::string& what) const {
  if (result != ncclSuccess) throw std::runtime_error("NCCL " + what + ": " + error_string(result));
}

}  // namespace lcsim::gpu
