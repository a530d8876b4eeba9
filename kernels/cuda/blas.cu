// The CUDA BLAS family on cuBLASLt. Row-major C = alpha * op(A) op(B) + beta * C (the CPU
// reference's cblas_sgemm call) is column-major C^T = alpha * op(B)^T op(A)^T + beta * C^T, and a
// row-major matrix in memory is its own transpose read column-major, with the same leading
// dimension: so cuBLASLt's A is our b, its B our a, with the transpose flags, the memory, the
// leading dimensions and the batch strides as they are, and its D is our c (D = C). Operands are
// f32 or bf16 as typed, C f32 or bf16; products are summed in fp32 (CUBLAS_COMPUTE_32F, never
// TF32). The epilogues are cuBLASLt's, seen through the same transpose: the bias runs along
// cuBLASLt's rows, our columns (EPILOGUE_BIAS, GELU_AUX_BIAS, with the GELU input as a column-major
// aux of leading dimension ld_aux); the gradient of our A's bias is that of cuBLASLt's B (BGRADB),
// and our B's that of its A (BGRADA). cuBLASLt writes a bias gradient in C's type where ours
// accumulates into float: it goes into the stream's scratch, and elementwise.add adds it.
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

#include "cuda/cuda_check.h"
#include "cuda/cuda_ops.h"
#include "cuda/device_scratch.h"

namespace trainctl::cuda_kernels {

namespace {

constexpr auto kWorkspaceBytes = static_cast<size_t>(kGpuGemmWorkspaceBytes);

// A matrix as stored, row-major: rows x cols (op(X) transposed, when the GEMM transposes X), row
// stride ld, and in a batch, `stride` elements from one matrix to the next.
struct StoredMatrix {
  int64_t rows, cols, ld, stride;
};

// The stored form of an operand whose op(X) is op_rows x op_cols.
StoredMatrix stored_matrix(bool transpose, int64_t op_rows, int64_t op_cols, int64_t ld, int64_t stride) {
  return {transpose ? op_cols : op_rows, transpose ? op_rows : op_cols, ld, stride};
}

cudaDataType_t data_type(ElementType type) { return type == ElementType::kBf16 ? CUDA_R_16BF : CUDA_R_32F; }

bool has_bias(Epilogue epilogue) { return epilogue == Epilogue::kBias || epilogue == Epilogue::kGeluBias; }
bool has_aux(Epilogue epilogue) { return epilogue == Epilogue::kGeluBias || epilogue == Epilogue::kGeluGrad; }
bool has_bias_gradient(Epilogue epilogue) {
  return epilogue == Epilogue::kBiasGradA || epilogue == Epilogue::kBiasGradB;
}

cublasLtEpilogue_t cublaslt_epilogue(Epilogue epilogue) {
  switch (epilogue) {
    case Epilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::kGeluBias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case Epilogue::kGeluGrad: return CUBLASLT_EPILOGUE_DGELU;
    case Epilogue::kBiasGradA: return CUBLASLT_EPILOGUE_BGRADB;
    case Epilogue::kBiasGradB: return CUBLASLT_EPILOGUE_BGRADA;
    case Epilogue::kNone: break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// Everything the algorithm choice depends on, pointers' alignments included: the heuristic
// assumes 256-byte aligned matrices unless told otherwise, and the runtime multiplies into
// gradients at any float offset of one buffer; it reads the alignment of the epilogue's vector
// and aux matrix from their pointers in the descriptor. Strides count only when there is a batch.
struct GemmKey {
  cudaDataType_t input_type, output_type;
  bool transpose_a, transpose_b;
  int64_t m, n, k, lda, ldb, ldc, batch, stride_a, stride_b, stride_c;
  Epilogue epilogue;
  int64_t ld_aux;
  uint32_t alignment_a, alignment_b, alignment_c, alignment_vector, alignment_aux;

  auto as_tuple() const {
    return std::tie(input_type, output_type, transpose_a, transpose_b, m, n, k, lda, ldb, ldc, batch, stride_a,
                    stride_b, stride_c, epilogue, ld_aux, alignment_a, alignment_b, alignment_c, alignment_vector,
                    alignment_aux);
  }
  bool operator<(const GemmKey& other) const { return as_tuple() < other.as_tuple(); }

  std::string description() const {
    return "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
           " lda=" + std::to_string(lda) + " ldb=" + std::to_string(ldb) + " ldc=" + std::to_string(ldc) +
           " batch=" + std::to_string(batch) + " epilogue=" + std::to_string(static_cast<int>(epilogue));
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

template <typename Value>
void set_operation(cublasLtMatmulDesc_t operation, cublasLtMatmulDescAttributes_t attribute, const Value& value) {
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(operation, attribute, &value, sizeof(value)));
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

// The epilogue's pointers of one call: the bias or the bias gradient's scratch (cuBLASLt's
// BIAS_POINTER for both), and the GELU input.
struct EpiloguePointers {
  const void* vector;
  const void* aux;
};

// Points the descriptor's epilogue at this call's vector and aux matrix: the plan is made with
// pointers of the same alignments (the key), and used again with others.
void point_epilogue(cublasLtMatmulDesc_t operation, const GemmKey& key, const EpiloguePointers& pointers) {
  if (key.epilogue != Epilogue::kNone && key.epilogue != Epilogue::kGeluGrad)
    set_operation(operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, pointers.vector);
  if (has_aux(key.epilogue)) set_operation(operation, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, pointers.aux);
}

GemmPlan make_plan(const GemmKey& key, const EpiloguePointers& pointers) {
  GemmPlan plan{};
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.operation, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t first_op = key.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t second_op = key.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_operation(plan.operation, CUBLASLT_MATMUL_DESC_TRANSA, first_op);
  set_operation(plan.operation, CUBLASLT_MATMUL_DESC_TRANSB, second_op);
  set_operation(plan.operation, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<uint32_t>(cublaslt_epilogue(key.epilogue)));
  if (has_aux(key.epilogue)) set_operation(plan.operation, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, key.ld_aux);
  point_epilogue(plan.operation, key, pointers);

  plan.layout_first = make_layout(
      key.input_type, stored_matrix(key.transpose_b, key.k, key.n, key.ldb, key.stride_b), key.batch);
  plan.layout_second = make_layout(
      key.input_type, stored_matrix(key.transpose_a, key.m, key.k, key.lda, key.stride_a), key.batch);
  plan.layout_c = make_layout(key.output_type, {key.m, key.n, key.ldc, key.stride_c}, key.batch);

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
  require_valid_gemm(gemm);
  if (gemm.m == 0 || gemm.n == 0 || gemm.batch == 0) return;
  const cudaStream_t cuda = cuda_stream(stream);
  StreamScratch& scratch = scratch_of(cuda);
  const int64_t bias_gradient_count = gemm.epilogue == Epilogue::kBiasGradA ? gemm.m : gemm.n;
  const size_t bias_gradient_bytes = static_cast<size_t>(bias_gradient_count) * sizeof(float);
  float* bias_gradient =
      has_bias_gradient(gemm.epilogue) ? scratch.bias_gradient.get<float>(bias_gradient_bytes, cuda) : nullptr;
  const EpiloguePointers pointers{has_bias(gemm.epilogue) ? gemm.bias.data : bias_gradient, gemm.aux.data};
  const StoredMatrix a = stored_matrix(gemm.transpose_a, gemm.m, gemm.k, gemm.lda, gemm.stride_a);
  const StoredMatrix b = stored_matrix(gemm.transpose_b, gemm.k, gemm.n, gemm.ldb, gemm.stride_b);
  const bool batched = gemm.batch > 1;
  const size_t input_bytes = element_bytes(gemm.a.type), output_bytes = element_bytes(gemm.c.type);
  const GemmKey key{
      .input_type = data_type(gemm.a.type),
      .output_type = data_type(gemm.c.type),
      .transpose_a = gemm.transpose_a,
      .transpose_b = gemm.transpose_b,
      .m = gemm.m,
      .n = gemm.n,
      .k = gemm.k,
      .lda = a.ld,
      .ldb = b.ld,
      .ldc = gemm.ldc,
      .batch = gemm.batch,
      .stride_a = batched ? a.stride : 0,
      .stride_b = batched ? b.stride : 0,
      .stride_c = batched ? gemm.stride_c : 0,
      .epilogue = gemm.epilogue,
      .ld_aux = has_aux(gemm.epilogue) ? gemm.ld_aux : 0,
      .alignment_a = alignment_of(gemm.a.data, a.stride, input_bytes, gemm.batch),
      .alignment_b = alignment_of(gemm.b.data, b.stride, input_bytes, gemm.batch),
      .alignment_c = alignment_of(gemm.c.data, gemm.stride_c, output_bytes, gemm.batch),
      .alignment_vector = alignment_of(pointers.vector, 0, output_bytes, 1),
      .alignment_aux = alignment_of(pointers.aux, 0, output_bytes, 1),
  };
  std::map<GemmKey, GemmPlan>& plans = blas_state().plans;
  auto found = plans.find(key);
  if (found == plans.end())
    found = plans.emplace(key, make_plan(key, pointers)).first;
  else
    point_epilogue(found->second.operation, key, pointers);
  const GemmPlan& plan = found->second;
  void* workspace = scratch.gemm_workspace.get(kWorkspaceBytes, cuda);
  CUBLAS_CHECK(cublasLtMatmul(cublaslt_handle(), plan.operation, &gemm.alpha, gemm.b.data, plan.layout_first,
                              gemm.a.data, plan.layout_second, &gemm.beta, gemm.c.data, plan.layout_c, gemm.c.data,
                              plan.layout_c, &plan.algorithm, workspace, kWorkspaceBytes, cuda));
  if (bias_gradient != nullptr) add(stream, gemm.bias_grad, gemm.bias_grad, bias_gradient, bias_gradient_count);
}

}  // namespace trainctl::cuda_kernels
