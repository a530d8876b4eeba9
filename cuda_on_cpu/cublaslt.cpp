// cuBLASLt's matmul as its documentation defines it, computed on the host with OpenBLAS:
//   D_i = alpha * op(A_i) op(B_i) + beta * C_i,  X_i = X + i * (X's strided batch offset),
// over column-major matrices with leading dimensions, fp32 or bf16 A and B, fp32 compute,
// scale, C and D, no epilogue yet. It is written from the documentation and apart from the CPU
// device table's GEMM (row-major, kernels/cpu/blas.cpp), so that the kernels' tests check how
// kernels/cuda maps a row-major GEMM onto cuBLASLt's column-major one, not a GEMM against
// itself. A matmul is queued on its stream like a kernel; its operands must lie in device
// memory. The algorithm the heuristic returns remembers the alignments the preference promised,
// and a matmul on pointers less aligned than that is refused (CUBLAS_STATUS_NOT_SUPPORTED)
// where a GPU's kernel might read misaligned vectors: a plan cached for other pointers shows.
#include <cblas.h>
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "device_state.h"

using namespace cuda_on_cpu;

struct cublasLtContext {};

namespace {

constexpr uint32_t kDefaultAlignment = 256;  // what the heuristic assumes unless told otherwise

struct Layout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch = 1;
  int64_t stride = 0;
  int32_t order = CUBLASLT_ORDER_COL;
};

struct MatmulDesc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  int32_t transpose_a = CUBLAS_OP_N, transpose_b = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  int32_t pointer_mode = CUBLASLT_POINTER_MODE_HOST;
};

// Alignments in bytes of A, B, C and D.
struct Alignments {
  uint32_t a = kDefaultAlignment, b = kDefaultAlignment, c = kDefaultAlignment, d = kDefaultAlignment;
};

struct Preference {
  uint64_t max_workspace = 0;
  Alignments alignments;
};

constexpr uint64_t kAlgoMark = 0x6375646f6e637075ull;  // "cudaoncpu"

struct Algo {
  uint64_t mark;
  Alignments alignments;
};

// The library's structs live in the opaque storage the header reserves for them.
template <typename Ours, typename Opaque>
Ours& ours(Opaque* opaque) {
  static_assert(sizeof(Ours) <= sizeof(Opaque::data));
  return *std::launder(reinterpret_cast<Ours*>(opaque->data));
}

template <typename Ours, typename Opaque>
Opaque* create(const Ours& value) {
  auto* opaque = new Opaque{};
  new (opaque->data) Ours(value);
  return opaque;
}

template <typename Value>
cublasStatus_t set(Value& field, const void* buffer, size_t bytes) {
  if (buffer == nullptr || bytes != sizeof(Value)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&field, buffer, sizeof(Value));
  return CUBLAS_STATUS_SUCCESS;
}

size_t element_bytes(cudaDataType_t type) { return type == CUDA_R_16BF ? 2 : 4; }

// The span of a layout's matrices in bytes, from the first element of the first to the last of
// the last.
size_t span_bytes(const Layout& layout) {
  if (layout.rows == 0 || layout.cols == 0) return 0;
  const auto elements = static_cast<uint64_t>(layout.batch - 1) * static_cast<uint64_t>(layout.stride) +
                        (layout.cols - 1) * static_cast<uint64_t>(layout.ld) + layout.rows;
  return elements * element_bytes(layout.type);
}

struct Shape {
  uint64_t m, n, k;
};

// The product's shape, or nothing when the operands do not fit together as the documentation
// requires.
bool matmul_shape(const MatmulDesc& desc, const Layout& a, const Layout& b, const Layout& c, const Layout& d,
                  Shape& shape) {
  const bool ta = desc.transpose_a != CUBLAS_OP_N, tb = desc.transpose_b != CUBLAS_OP_N;
  shape.m = ta ? a.cols : a.rows;
  shape.k = ta ? a.rows : a.cols;
  const uint64_t k_of_b = tb ? b.cols : b.rows;
  shape.n = tb ? b.rows : b.cols;
  for (const Layout* layout : {&a, &b, &c, &d})
    if (layout->order != CUBLASLT_ORDER_COL || layout->ld < static_cast<int64_t>(layout->rows) ||
        layout->batch < 1 || layout->stride < 0)
      return false;
  return k_of_b == shape.k && c.rows == shape.m && c.cols == shape.n && d.rows == shape.m && d.cols == shape.n &&
         a.batch == d.batch && b.batch == d.batch && c.batch == d.batch && a.type == b.type &&
         (a.type == CUDA_R_32F || a.type == CUDA_R_16BF) && c.type == CUDA_R_32F && d.type == CUDA_R_32F &&
         c.ld == d.ld && c.stride == d.stride;
}

bool supported(const MatmulDesc& desc) {
  return desc.compute == CUBLAS_COMPUTE_32F && desc.scale == CUDA_R_32F &&
         desc.epilogue == CUBLASLT_EPILOGUE_DEFAULT && desc.pointer_mode == CUBLASLT_POINTER_MODE_HOST;
}

bool aligned(const void* pointer, uint32_t alignment) {
  return reinterpret_cast<uintptr_t>(pointer) % alignment == 0;
}

// Matrix i of a bf16 operand, widened to a packed fp32 column-major copy (exact).
void widen(const Layout& layout, const void* base, int32_t i, std::vector<float>& widened) {
  widened.resize(layout.rows * layout.cols);
  const auto* matrix = static_cast<const __nv_bfloat16*>(base) + static_cast<int64_t>(i) * layout.stride;
  for (uint64_t col = 0; col < layout.cols; ++col)
    for (uint64_t row = 0; row < layout.rows; ++row)
      widened[col * layout.rows + row] = __bfloat162float(matrix[static_cast<int64_t>(col) * layout.ld + row]);
}

void run_matmul(const MatmulDesc& desc, const Shape& shape, float alpha, float beta, const Layout& a,
                const void* a_base, const Layout& b, const void* b_base, const Layout& c, const float* c_base,
                float* d_base) {
  const auto op = [](int32_t transpose) { return transpose != CUBLAS_OP_N ? CblasTrans : CblasNoTrans; };
  std::vector<float> wide_a, wide_b;
  for (int32_t i = 0; i < c.batch; ++i) {
    const float* c_i = c_base + static_cast<int64_t>(i) * c.stride;
    float* d_i = d_base + static_cast<int64_t>(i) * c.stride;
    if (c_i != d_i && beta != 0.0f)
      for (uint64_t col = 0; col < shape.n; ++col)
        std::memcpy(d_i + col * c.ld, c_i + col * c.ld, shape.m * sizeof(float));
    const float *a_i = nullptr, *b_i = nullptr;
    int64_t lda = a.ld, ldb = b.ld;
    if (a.type == CUDA_R_16BF) {
      widen(a, a_base, i, wide_a);
      widen(b, b_base, i, wide_b);
      a_i = wide_a.data();
      b_i = wide_b.data();
      lda = static_cast<int64_t>(a.rows);
      ldb = static_cast<int64_t>(b.rows);
    } else {
      a_i = static_cast<const float*>(a_base) + static_cast<int64_t>(i) * a.stride;
      b_i = static_cast<const float*>(b_base) + static_cast<int64_t>(i) * b.stride;
    }
    // BLAS wants leading dimensions of at least 1, even for matrices with no rows.
    cblas_sgemm(CblasColMajor, op(desc.transpose_a), op(desc.transpose_b), static_cast<blasint>(shape.m),
                static_cast<blasint>(shape.n), static_cast<blasint>(shape.k), alpha, a_i,
                static_cast<blasint>(std::max<int64_t>(lda, 1)), b_i, static_cast<blasint>(std::max<int64_t>(ldb, 1)),
                beta, d_i, static_cast<blasint>(std::max<int64_t>(c.ld, 1)));
  }
}

}  // namespace

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *desc = create<MatmulDesc, cublasLtMatmulDescOpaque_t>(MatmulDesc{.compute = compute, .scale = scale});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                                              const void* buffer, size_t bytes) {
  MatmulDesc& ours_desc = ours<MatmulDesc>(desc);
  switch (attribute) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return set(ours_desc.transpose_a, buffer, bytes);
    case CUBLASLT_MATMUL_DESC_TRANSB: return set(ours_desc.transpose_b, buffer, bytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return set(ours_desc.epilogue, buffer, bytes);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return set(ours_desc.pointer_mode, buffer, bytes);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (layout == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *layout = create<Layout, cublasLtMatrixLayoutOpaque_t>(Layout{.type = type, .rows = rows, .cols = cols, .ld = ld});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(const cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                cublasLtMatrixLayoutAttribute_t attribute, const void* buffer,
                                                size_t bytes) {
  Layout& ours_layout = ours<Layout>(layout);
  switch (attribute) {
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return set(ours_layout.batch, buffer, bytes);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return set(ours_layout.stride, buffer, bytes);
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return set(ours_layout.order, buffer, bytes);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* preference) {
  if (preference == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *preference = create<Preference, cublasLtMatmulPreferenceOpaque_t>(Preference{});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(const cublasLtMatmulPreference_t preference) {
  delete preference;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t preference,
                                                    cublasLtMatmulPreferenceAttributes_t attribute,
                                                    const void* buffer, size_t bytes) {
  Preference& ours_preference = ours<Preference>(preference);
  switch (attribute) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return set(ours_preference.max_workspace, buffer, bytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return set(ours_preference.alignments.a, buffer, bytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return set(ours_preference.alignments.b, buffer, bytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return set(ours_preference.alignments.c, buffer, bytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return set(ours_preference.alignments.d, buffer, bytes);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t preference, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (requested < 1 || results == nullptr || returned == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  Shape shape{};
  const MatmulDesc& ours_desc = ours<MatmulDesc>(desc);
  if (!matmul_shape(ours_desc, ours<Layout>(a), ours<Layout>(b), ours<Layout>(c), ours<Layout>(d), shape))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!supported(ours_desc)) return CUBLAS_STATUS_NOT_SUPPORTED;
  results[0] = cublasLtMatmulHeuristicResult_t{};
  new (results[0].algo.data) Algo{kAlgoMark, ours<Preference>(preference).alignments};
  results[0].workspaceSize = 0;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
                              cublasLtMatrixLayout_t a_layout, const void* b, cublasLtMatrixLayout_t b_layout,
                              const void* beta, const void* c, cublasLtMatrixLayout_t c_layout, void* d,
                              cublasLtMatrixLayout_t d_layout, const cublasLtMatmulAlgo_t* algo, void*, size_t,
                              cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  const MatmulDesc ours_desc = ours<MatmulDesc>(desc);
  const Layout la = ours<Layout>(a_layout), lb = ours<Layout>(b_layout), lc = ours<Layout>(c_layout),
               ld = ours<Layout>(d_layout);
  Shape shape{};
  if (!matmul_shape(ours_desc, la, lb, lc, ld, shape) || alpha == nullptr || beta == nullptr || algo == nullptr)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!supported(ours_desc)) return CUBLAS_STATUS_NOT_SUPPORTED;
  Algo chosen{};
  std::memcpy(&chosen, algo->data, sizeof(chosen));
  if (chosen.mark != kAlgoMark) return CUBLAS_STATUS_INVALID_VALUE;
  if (!aligned(a, chosen.alignments.a) || !aligned(b, chosen.alignments.b) || !aligned(c, chosen.alignments.c) ||
      !aligned(d, chosen.alignments.d))
    return CUBLAS_STATUS_NOT_SUPPORTED;

  const std::lock_guard lock(device_mutex());
  if (sticky_error() != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
  CUstream_st* queue = resolve(stream);
  if (queue == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  // An operand outside device memory faults when the matmul runs, as a GPU kernel's read would.
  struct Operand {
    const char* name;
    const void* pointer;
    const Layout& layout;
  };
  std::string why;
  for (const Operand& operand : {Operand{"A", a, la}, Operand{"B", b, lb}, Operand{"C", c, lc}, Operand{"D", d, ld}}) {
    const Allocation* allocation = find_allocation(operand.pointer, span_bytes(operand.layout));
    if (allocation == nullptr || allocation->kind != MemoryKind::kDevice) {
      why = std::string("cublasLtMatmul: ") + operand.name + "'s " + std::to_string(span_bytes(operand.layout)) +
            " bytes are not all in one device allocation";
      break;
    }
  }
  const float alpha_value = *static_cast<const float*>(alpha), beta_value = *static_cast<const float*>(beta);
  enqueue(queue, [=] {
    if (!why.empty()) {
      fault(cudaErrorIllegalAddress, why);
      return;
    }
    run_matmul(ours_desc, shape, alpha_value, beta_value, la, a, lb, b, lc, static_cast<const float*>(c),
               static_cast<float*>(d));
  });
  ++counts().blas_calls;
  return CUBLAS_STATUS_SUCCESS;
}

namespace {

struct StatusText {
  cublasStatus_t status;
  const char* name;
  const char* description;
};

constexpr StatusText kStatusTexts[] = {
    {CUBLAS_STATUS_SUCCESS, "CUBLAS_STATUS_SUCCESS", "success"},
    {CUBLAS_STATUS_NOT_INITIALIZED, "CUBLAS_STATUS_NOT_INITIALIZED", "the library was not initialized"},
    {CUBLAS_STATUS_INVALID_VALUE, "CUBLAS_STATUS_INVALID_VALUE", "an invalid numeric value was used as an argument"},
    {CUBLAS_STATUS_EXECUTION_FAILED, "CUBLAS_STATUS_EXECUTION_FAILED", "the GPU program failed to execute"},
    {CUBLAS_STATUS_NOT_SUPPORTED, "CUBLAS_STATUS_NOT_SUPPORTED", "the functionality requested is not supported"},
};

const StatusText* text_of(cublasStatus_t status) {
  for (const StatusText& text : kStatusTexts)
    if (text.status == status) return &text;
  return nullptr;
}

}  // namespace

const char* cublasLtGetStatusName(cublasStatus_t status) {
  const StatusText* text = text_of(status);
  return text != nullptr ? text->name : "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasLtGetStatusString(cublasStatus_t status) {
  const StatusText* text = text_of(status);
  return text != nullptr ? text->description : "unknown error";
}
