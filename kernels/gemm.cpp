#include "kernels/gemm.hpp"

#include <stdexcept>
#include <string>

#include "kernels/cuda_check.hpp"

namespace lcsim::kernels {
namespace {

void check_lt(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw CudaError(std::string("cuBLASLt ") + what + ": " + cublasLtGetStatusName(status) + " (" +
                    cublasLtGetStatusString(status) + ")");
  }
}

}  // namespace

// cuBLASLt is column-major: the row-major C[m][n] is the column-major C^T[n][m] = op(B)^T op(A)^T, so the call
// passes B as cuBLASLt's A and A as its B. A row-major X[r][c] is a column-major [c][r] matrix with leading
// dimension c.
struct GemmRunner::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};

  ~Plan() {
    if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  }
};

GemmRunner::GemmRunner(cudaStream_t stream) : stream_(stream) {
  check_lt(cublasLtCreate(&handle_), "create");
  check_cuda(cudaMalloc(&workspace_, kWorkspaceBytes), "GemmRunner workspace");
}

GemmRunner::~GemmRunner() {
  for (auto& [key, plan] : plans_) delete plan;
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

const GemmRunner::Plan& GemmRunner::plan_for(int m, int n, int k, bool trans_a, bool trans_b, bool accumulate) {
  const Key key{m, n, k, trans_a, trans_b, accumulate};
  if (auto it = plans_.find(key); it != plans_.end()) return *it->second;
  auto* plan = new Plan;
  try {
    check_lt(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc");
    const cublasOperation_t op_lt_a = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's A is our B
    const cublasOperation_t op_lt_b = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    check_lt(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_lt_a, sizeof(op_lt_a)),
             "transa");
    check_lt(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_lt_b, sizeof(op_lt_b)),
             "transb");
    // Our B as stored: [k][n] row-major = column-major n x k (ld n); [n][k] = column-major k x n (ld k).
    if (trans_b) {
      check_lt(cublasLtMatrixLayoutCreate(&plan->a, CUDA_R_16BF, k, n, k), "layout A");
    } else {
      check_lt(cublasLtMatrixLayoutCreate(&plan->a, CUDA_R_16BF, n, k, n), "layout A");
    }
    // Our A as stored: [m][k] = column-major k x m (ld k); [k][m] = column-major m x k (ld m).
    if (trans_a) {
      check_lt(cublasLtMatrixLayoutCreate(&plan->b, CUDA_R_16BF, m, k, m), "layout B");
    } else {
      check_lt(cublasLtMatrixLayoutCreate(&plan->b, CUDA_R_16BF, k, m, k), "layout B");
    }
    check_lt(cublasLtMatrixLayoutCreate(&plan->c, CUDA_R_16BF, n, m, n), "layout C");

    cublasLtMatmulPreference_t preference = nullptr;
    check_lt(cublasLtMatmulPreferenceCreate(&preference), "preference");
    const std::size_t workspace = kWorkspaceBytes;
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                 &workspace, sizeof(workspace));
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasLtMatmulAlgoGetHeuristic(handle_, plan->op, plan->a, plan->b, plan->c, plan->c, preference, 1,
                                              &result, &found);
    }
    cublasLtMatmulPreferenceDestroy(preference);
    check_lt(status, "heuristic");
    if (found == 0) {
      throw CudaError("cuBLASLt: no algorithm for a " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                      std::to_string(k) + " BF16 GEMM");
    }
    plan->algo = result.algo;
  } catch (...) {
    delete plan;
    throw;
  }
  plans_.emplace(key, plan);
  return *plan;
}

void GemmRunner::gemm(int m, int n, int k, const bf16* a, bool trans_a, const bf16* b, bool trans_b, bf16* c,
                      float beta) {
  if (m < 0 || n < 0 || k < 0) throw std::invalid_argument("gemm: negative size");
  if (m == 0 || n == 0 || k == 0) return;
  const Plan& plan = plan_for(m, n, k, trans_a, trans_b, beta != 0.f);
  const float alpha = 1.f;
  check_lt(cublasLtMatmul(handle_, plan.op, &alpha, b, plan.a, a, plan.b, &beta, c, plan.c, c, plan.c, &plan.algo,
                          workspace_, kWorkspaceBytes, stream_),
           "matmul");
}

}  // namespace lcsim::kernels
