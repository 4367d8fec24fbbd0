#pragma once
// Row-major BF16 GEMMs with FP32 accumulation through cuBLASLt, the way a training framework's linear layers run
// them. C[m][n] = op(A)[m][k] op(B)[k][n] + beta C, where op(A) = A stored [m][k], or A stored [k][m] transposed
// when trans_a (likewise B: [k][n], or [n][k] when trans_b). A linear layer y = x W^T with W [out][in] is
// gemm(tokens, out, in, x, false, W, true, y).
#include <cstddef>
#include <map>
#include <tuple>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace lcsim::kernels {

using bf16 = __nv_bfloat16;

class GemmRunner {
 public:
  static constexpr std::size_t kWorkspaceBytes = 32u << 20;  // what cuBLAS recommends for Hopper

  explicit GemmRunner(cudaStream_t stream);
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  /// Throws CudaError when cuBLASLt has no algorithm or the call fails, std::invalid_argument on bad sizes.
  void gemm(int m, int n, int k, const bf16* a, bool trans_a, const bf16* b, bool trans_b, bf16* c, float beta = 0.f);

  cudaStream_t stream() const { return stream_; }

 private:
  using Key = std::tuple<int, int, int, bool, bool, bool>;
  struct Plan;
  const Plan& plan_for(int m, int n, int k, bool trans_a, bool trans_b, bool accumulate);

  cudaStream_t stream_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::map<Key, Plan*> plans_;
};

}  // namespace lcsim::kernels
