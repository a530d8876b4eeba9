// The CUDA GEMMs on cuBLASLt. Row-major c = alpha * op(a) op(b) + beta * c (the CPU reference's
// cblas_sgemm call) is column-major c^T = alpha * op(b)^T op(a)^T + beta * c^T, and a row-major
// matrix in memory is its own transpose read column-major: so cuBLASLt's A is our b, its B our a,
// with the transpose flags and the memory as they are. gemm sums in fp32 (CUBLAS_COMPUTE_32F,
// never TF32); gemm_bf16 first rounds a and b to bf16 (__float2bfloat16_rn, as the CPU reference
// rounds) and sums the products in fp32 into fp32 c.
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "cuda/cuda_check.h"
#include "cuda/device_scratch.h"
#include "cuda/kernel_common.cuh"
#include "cuda/ops_cuda.h"

namespace trainctl::cuda_kernels {

namespace {

// cuBLASLt's workspace: room for the split-K and stream-K algorithms the heuristic may choose.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// Everything the algorithm choice depends on, pointers' alignments included: the heuristic
// assumes 256-byte aligned matrices unless told otherwise, and the runtime multiplies into
// gradients at any float offset of one buffer.
struct GemmKey {
  cudaDataType_t input_type;
  bool transpose_a, transpose_b;
  int64_t m, n, k;
  uint32_t alignment_a, alignment_b, alignment_c;

  auto as_tuple() const {
    return std::tie(input_type, transpose_a, transpose_b, m, n, k, alignment_a, alignment_b, alignment_c);
  }
  bool operator<(const GemmKey& other) const { return as_tuple() < other.as_tuple(); }
};

// The descriptors and the algorithm of one GEMM, made once and kept for the process: a training
// step makes the same few GEMMs again and again, and a map lookup costs far less than a heuristic
// query. Named from cuBLASLt's side: `first` is its A (our b), `second` its B (our a).
struct GemmPlan {
  cublasLtMatmulDesc_t operation;
  cublasLtMatrixLayout_t layout_first, layout_second, layout_c;
  cublasLtMatmulAlgo_t algorithm;
};

uint32_t alignment_of(const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (address % alignment != 0) alignment /= 2;
  return alignment;
}

cublasLtHandle_t cublaslt_handle() {
  static const cublasLtHandle_t handle = [] {
    cublasLtHandle_t created = nullptr;
    CUBLAS_CHECK(cublasLtCreate(&created));
    return created;
  }();
  return handle;
}

template <typename Value>
void set_preference(cublasLtMatmulPreference_t preference, cublasLtMatmulPreferenceAttributes_t attribute,
                    const Value& value) {
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof(value)));
}

GemmPlan make_plan(const GemmKey& key) {
  GemmPlan plan{};
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.operation, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t first_op = key.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t second_op = key.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSA, &first_op,
                                              sizeof(first_op)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSB, &second_op,
                                              sizeof(second_op)));

  // Column-major shapes of the matrices as stored: b is [k,n] row-major ([n,k] if transposed).
  const auto m = static_cast<uint64_t>(key.m), n = static_cast<uint64_t>(key.n), k = static_cast<uint64_t>(key.k);
  const uint64_t first_rows = key.transpose_b ? k : n, first_cols = key.transpose_b ? n : k;
  const uint64_t second_rows = key.transpose_a ? m : k, second_cols = key.transpose_a ? k : m;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.layout_first, key.input_type, first_rows, first_cols,
                                          static_cast<int64_t>(first_rows)));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.layout_second, key.input_type, second_rows, second_cols,
                                          static_cast<int64_t>(second_rows)));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.layout_c, CUDA_R_32F, n, m, static_cast<int64_t>(n)));

  cublasLtMatmulPreference_t preference = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  set_preference(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t{kWorkspaceBytes});
  set_preference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.alignment_b);
  set_preference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.alignment_a);
  set_preference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.alignment_c);
  set_preference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.alignment_c);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(cublaslt_handle(), plan.operation, plan.layout_first,
                                              plan.layout_second, plan.layout_c, plan.layout_c, preference, 1,
                                              &result, &found));
  CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(preference));
  if (found == 0)
    report_check_failure("cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__,
                         "no algorithm for m=" + std::to_string(key.m) + " n=" + std::to_string(key.n) +
                             " k=" + std::to_string(key.k));
  plan.algorithm = result.algo;
  return plan;
}

// a and b are float or bf16 (input_type), c is float.
void run_gemm(cudaDataType_t input_type, bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
              float alpha, const void* a, const void* b, float beta, float* c) {
  static std::map<GemmKey, GemmPlan> plans;
  static DeviceScratch workspace;
  const GemmKey key{input_type,      transpose_a,     transpose_b,     m, n, k,
                    alignment_of(a), alignment_of(b), alignment_of(c)};
  auto found = plans.find(key);
  if (found == plans.end()) found = plans.emplace(key, make_plan(key)).first;
  const GemmPlan& plan = found->second;
  CUBLAS_CHECK(cublasLtMatmul(cublaslt_handle(), plan.operation, &alpha, b, plan.layout_first, a, plan.layout_second,
                              &beta, c, plan.layout_c, c, plan.layout_c, &plan.algorithm,
                              workspace.get(kWorkspaceBytes), kWorkspaceBytes, 0));
}

__global__ void round_to_bf16_kernel(const float* __restrict__ values, __nv_bfloat16* __restrict__ rounded,
                                     int64_t n) {
  for (int64_t i = grid_thread_index(); i < n; i += grid_thread_count()) rounded[i] = __float2bfloat16_rn(values[i]);
}

}  // namespace

void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c) {
  run_gemm(CUDA_R_32F, transpose_a, transpose_b, m, n, k, alpha, a, b, beta, c);
}

void gemm_bf16(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
               const float* b, float beta, float* c) {
  // Reused between calls, like the CPU reference's rounded copies.
  static DeviceScratch rounded_a_scratch, rounded_b_scratch;
  auto* rounded_a = rounded_a_scratch.get<__nv_bfloat16>(static_cast<size_t>(m * k) * sizeof(__nv_bfloat16));
  auto* rounded_b = rounded_b_scratch.get<__nv_bfloat16>(static_cast<size_t>(k * n) * sizeof(__nv_bfloat16));
  launch_over(m * k, round_to_bf16_kernel, a, rounded_a, m * k);
  launch_over(k * n, round_to_bf16_kernel, b, rounded_b, k * n);
  run_gemm(CUDA_R_16BF, transpose_a, transpose_b, m, n, k, alpha, rounded_a, rounded_b, beta, c);
}

}  // namespace trainctl::cuda_kernels
