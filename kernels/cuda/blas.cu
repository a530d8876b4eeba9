// The CUDA BLAS family on cuBLASLt. Row-major C = alpha * op(A) op(B) + beta * C (the CPU
// reference's cblas_sgemm call) is column-major C^T = alpha * op(B)^T op(A)^T + beta * C^T, and a
// row-major matrix in memory is its own transpose read column-major, with the same leading
// dimension: so cuBLASLt's A is our b, its B our a, with the transpose flags, the memory, the
// leading dimensions and the batch strides as they are. gemm sums in fp32 (CUBLAS_COMPUTE_32F,
// never TF32); gemm_bf16 first rounds a and b to bf16 (__float2bfloat16_rn, as the CPU reference
// rounds) into packed copies, a thread per column (four, read as a float4, where every row starts
// 16-byte aligned) going down the rows of the batch's matrices, and sums the products in fp32
// into fp32 c.
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "cuda/cuda_check.h"
#include "cuda/cuda_ops.h"
#include "cuda/device_scratch.h"
#include "cuda/kernel_common.cuh"

namespace trainctl::cuda_kernels {

namespace {

// cuBLASLt's workspace: room for the split-K and stream-K algorithms the heuristic may choose.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// A matrix as stored, row-major: rows x cols (op(X) transposed, when the GEMM transposes X), row
// stride ld, and in a batch, `stride` elements from one matrix to the next.
struct StoredMatrix {
  int64_t rows, cols, ld, stride;
};

// The stored form of an operand whose op(X) is op_rows x op_cols.
StoredMatrix stored_matrix(bool transpose, int64_t op_rows, int64_t op_cols, int64_t ld, int64_t stride) {
  return {transpose ? op_cols : op_rows, transpose ? op_rows : op_cols, ld, stride};
}
StoredMatrix stored_a(const Gemm& gemm) {
  return stored_matrix(gemm.transpose_a, gemm.m, gemm.k, gemm.lda, gemm.stride_a);
}
StoredMatrix stored_b(const Gemm& gemm) {
  return stored_matrix(gemm.transpose_b, gemm.k, gemm.n, gemm.ldb, gemm.stride_b);
}

// Everything the algorithm choice depends on, pointers' alignments included: the heuristic
// assumes 256-byte aligned matrices unless told otherwise, and the runtime multiplies into
// gradients at any float offset of one buffer. Strides count only when there is a batch.
struct GemmKey {
  cudaDataType_t input_type;
  bool transpose_a, transpose_b;
  int64_t m, n, k, lda, ldb, ldc, batch, stride_a, stride_b, stride_c;
  uint32_t alignment_a, alignment_b, alignment_c;

  auto as_tuple() const {
    return std::tie(input_type, transpose_a, transpose_b, m, n, k, lda, ldb, ldc, batch, stride_a, stride_b, stride_c,
                    alignment_a, alignment_b, alignment_c);
  }
  bool operator<(const GemmKey& other) const { return as_tuple() < other.as_tuple(); }

  std::string description() const {
    return "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
           " lda=" + std::to_string(lda) + " ldb=" + std::to_string(ldb) + " ldc=" + std::to_string(ldc) +
           " batch=" + std::to_string(batch);
  }
};

// The descriptors and the algorithm of one GEMM, made once and kept for the process: a training
// step makes the same few GEMMs again and again, and a map lookup costs far less than a heuristic
// query. Named from cuBLASLt's side: `first` is its A (our b), `second` its B (our a).
struct GemmPlan {
  cublasLtMatmulDesc_t operation;
  cublasLtMatrixLayout_t layout_first, layout_second, layout_c;
  cublasLtMatmulAlgo_t algorithm;
};

// The largest power of two up to 256 that divides the address of every matrix of the batch.
uint32_t alignment_of(const void* base, int64_t stride, size_t element_bytes, int64_t batch) {
  auto address = reinterpret_cast<uintptr_t>(base);
  if (batch > 1) address |= static_cast<uintptr_t>(stride) * element_bytes;
  uint32_t alignment = 256;
  while (address % alignment != 0) alignment /= 2;
  return alignment;
}

size_t element_bytes(cudaDataType_t type) { return type == CUDA_R_16BF ? sizeof(__nv_bfloat16) : sizeof(float); }

// The cuBLASLt handle and the plans made with it, from the first GEMM until unbind; never
// destroyed at exit, where cuBLASLt may already be gone.
struct BlasState {
  cublasLtHandle_t handle = nullptr;
  std::map<GemmKey, GemmPlan> plans;
};

BlasState& blas_state() {
  static auto* const state = new BlasState;
  return *state;
}

cublasLtHandle_t cublaslt_handle() {
  BlasState& state = blas_state();
  if (state.handle == nullptr) CUBLAS_CHECK(cublasLtCreate(&state.handle));
  return state.handle;
}

template <typename Value>
void set_preference(cublasLtMatmulPreference_t preference, cublasLtMatmulPreferenceAttributes_t attribute,
                    const Value& value) {
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof(value)));
}

template <typename Value>
void set_layout(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attribute, const Value& value) {
  CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, attribute, &value, sizeof(value)));
}

// The column-major layout of `batch` stored row-major matrices: each one's transpose, with the
// same leading dimension.
cublasLtMatrixLayout_t make_layout(cudaDataType_t type, const StoredMatrix& stored, int64_t batch) {
  cublasLtMatrixLayout_t layout = nullptr;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, type, static_cast<uint64_t>(stored.cols),
                                          static_cast<uint64_t>(stored.rows), stored.ld));
  set_layout(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, static_cast<int32_t>(batch));
  set_layout(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stored.stride);
  return layout;
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

  plan.layout_first = make_layout(
      key.input_type, stored_matrix(key.transpose_b, key.k, key.n, key.ldb, key.stride_b), key.batch);
  plan.layout_second = make_layout(
      key.input_type, stored_matrix(key.transpose_a, key.m, key.k, key.lda, key.stride_a), key.batch);
  plan.layout_c = make_layout(CUDA_R_32F, {key.m, key.n, key.ldc, key.stride_c}, key.batch);

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
    report_check_failure("cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__, "no algorithm for " + key.description());
  plan.algorithm = result.algo;
  return plan;
}

// `gemm`'s shape, scalars and c, with a and b of `input_type` (float or bf16) at `a` and `b`,
// laid out as `a_layout` and `b_layout` say.
void run_gemm(cudaStream_t stream, const Gemm& gemm, cudaDataType_t input_type, const void* a,
              const StoredMatrix& a_layout, const void* b, const StoredMatrix& b_layout) {
  if (gemm.m == 0 || gemm.n == 0 || gemm.batch == 0) return;
  std::map<GemmKey, GemmPlan>& plans = blas_state().plans;
  const bool batched = gemm.batch > 1;
  const GemmKey key{
      .input_type = input_type,
      .transpose_a = gemm.transpose_a,
      .transpose_b = gemm.transpose_b,
      .m = gemm.m,
      .n = gemm.n,
      .k = gemm.k,
      .lda = a_layout.ld,
      .ldb = b_layout.ld,
      .ldc = gemm.ldc,
      .batch = gemm.batch,
      .stride_a = batched ? a_layout.stride : 0,
      .stride_b = batched ? b_layout.stride : 0,
      .stride_c = batched ? gemm.stride_c : 0,
      .alignment_a = alignment_of(a, a_layout.stride, element_bytes(input_type), gemm.batch),
      .alignment_b = alignment_of(b, b_layout.stride, element_bytes(input_type), gemm.batch),
      .alignment_c = alignment_of(gemm.c, gemm.stride_c, sizeof(float), gemm.batch),
  };
  auto found = plans.find(key);
  if (found == plans.end()) found = plans.emplace(key, make_plan(key)).first;
  const GemmPlan& plan = found->second;
  void* workspace = scratch_of(stream).gemm_workspace.get(kWorkspaceBytes, stream);
  CUBLAS_CHECK(cublasLtMatmul(cublaslt_handle(), plan.operation, &gemm.alpha, b, plan.layout_first, a,
                              plan.layout_second, &gemm.beta, gemm.c, plan.layout_c, gemm.c, plan.layout_c,
                              &plan.algorithm, workspace, kWorkspaceBytes, stream));
}

// kWidth bf16 values, stored at once.
template <int kWidth>
struct alignas(kWidth * sizeof(__nv_bfloat16)) Bf16s {
  __nv_bfloat16 v[kWidth];
};

// The bf16 of `matrices` matrices as `stored` lays them out, packed into `rounded`: matrix after
// matrix, row after row. A row tile's thread per kWidth columns (kernel_common.cuh) over the rows
// of the matrices one after the other; its first row and the step to its next are split into
// whole matrices and rows once, so that going down needs no division.
template <int kWidth>
__global__ void round_to_bf16_kernel(const float* __restrict__ values, StoredMatrix stored, int64_t matrices,
                                     __nv_bfloat16* __restrict__ rounded) {
  const int64_t column = row_tile_pack() * kWidth;
  if (column >= stored.cols) return;
  const int64_t first = row_tile_first_row(), step = row_tile_row_step();
  const int64_t step_matrices = step / stored.rows, step_rows = step % stored.rows;
  int64_t matrix = first / stored.rows, row = first % stored.rows;
  while (matrix < matrices) {
    const Floats<kWidth> source = load_floats<kWidth>(values + matrix * stored.stride + row * stored.ld + column);
    Bf16s<kWidth> result;
    for (int j = 0; j < kWidth; ++j) result.v[j] = __float2bfloat16_rn(source.v[j]);
    *reinterpret_cast<Bf16s<kWidth>*>(rounded + (matrix * stored.rows + row) * stored.cols + column) = result;
    matrix += step_matrices;
    row += step_rows;
    if (row >= stored.rows) {
      row -= stored.rows;
      ++matrix;
    }
  }
}

// One operand rounded to bf16, packed.
struct RoundedOperand {
  const __nv_bfloat16* data;
  StoredMatrix stored;
};

// Rounds the matrices of one operand into `scratch`. An operand that every GEMM of the batch
// shares (stride 0) is rounded once and stays shared.
RoundedOperand round_to_bf16(cudaStream_t stream, const float* values, const StoredMatrix& stored, int64_t batch,
                             DeviceScratch& scratch) {
  const int64_t matrices = stored.stride == 0 ? 1 : batch;
  const int64_t n = matrices * stored.rows * stored.cols;
  auto* rounded = scratch.get<__nv_bfloat16>(static_cast<size_t>(n) * sizeof(__nv_bfloat16), stream);
  if (n > 0) {
    // Every row of every matrix starts 16-byte aligned; the packed copy's rows then start 8-byte
    // aligned (scratch is cudaMalloc's).
    const bool aligned_rows = stored.cols % 4 == 0 && stored.ld % 4 == 0 &&
                              (matrices == 1 || stored.stride % 4 == 0) && float4_aligned({values});
    with_width(aligned_rows, [&](auto width) {
      const RowTileLaunch shape = row_tile_launch(matrices * stored.rows, stored.cols / width());
      launch(stream, shape.grid, shape.block, round_to_bf16_kernel<width()>, values, stored, matrices, rounded);
    });
  }
  return {rounded, {stored.rows, stored.cols, stored.cols, stored.stride == 0 ? 0 : stored.rows * stored.cols}};
}

}  // namespace

void release_gemm_plans() {
  BlasState& state = blas_state();
  for (const auto& [key, plan] : state.plans) {
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(plan.operation));
    for (cublasLtMatrixLayout_t layout : {plan.layout_first, plan.layout_second, plan.layout_c})
      CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(layout));
  }
  state.plans.clear();
  if (state.handle != nullptr) CUBLAS_CHECK(cublasLtDestroy(state.handle));
  state.handle = nullptr;
}

void gemm(Stream stream, const Gemm& gemm) {
  run_gemm(cuda_stream(stream), gemm, CUDA_R_32F, gemm.a, stored_a(gemm), gemm.b, stored_b(gemm));
}

void gemm_bf16(Stream stream, const Gemm& gemm) {
  const cudaStream_t cuda = cuda_stream(stream);
  // Reused between calls, like the CPU reference's rounded copies.
  StreamScratch& scratch = scratch_of(cuda);
  const RoundedOperand a = round_to_bf16(cuda, gemm.a, stored_a(gemm), gemm.batch, scratch.bf16_a);
  const RoundedOperand b = round_to_bf16(cuda, gemm.b, stored_b(gemm), gemm.batch, scratch.bf16_b);
  run_gemm(cuda, gemm, CUDA_R_16BF, a.data, a.stored, b.data, b.stored);
}

}  // namespace trainctl::cuda_kernels
