// cuBLASLt's matmul as its documentation (cublasLt.h) defines it, computed on the host with
// OpenBLAS:
//   D_i = epilogue(alpha * op(A_i) op(B_i) + beta * C_i),  X_i = X + i * (X's strided batch offset),
// over column-major matrices with leading dimensions, fp32 compute and scale, and these types:
// A and B fp32 with C and D fp32; A and B bf16 with C and D both bf16 or both fp32 (anything else
// is CUBLAS_STATUS_NOT_SUPPORTED). Products of bf16 are exact in fp32 and summed in fp32; a bf16
// C is widened exactly, a bf16 D is the fp32 result after the epilogue rounded once to nearest
// even. It is written from the documentation and apart from the CPU device table's GEMM
// (row-major, kernels/cpu/blas.cpp), so that the kernels' tests check how kernels/cuda maps a
// row-major GEMM onto cuBLASLt's column-major one, not a GEMM against itself. A matmul is queued
// on its stream like a kernel; its operands, and the bias and aux buffers of its epilogue, must
// lie in device memory and hold all their elements, or it faults when it runs.
//
// Epilogues, with batch count 1 only (else NOT_SUPPORTED), x = alpha op(A) op(B) + beta C:
//   BIAS: x + bias (a vector of D's rows, broadcast over its columns); GELU: GELU(x); GELU_BIAS:
//   GELU(x + bias); GELU_AUX and GELU_AUX_BIAS: the same, storing the GELU's input in the aux
//   matrix; DGELU: x * GELU'(aux), aux the forward's GELU input; BGRADA and BGRADB: x, and in the
//   bias pointer's vector the sums over k of op(A) (one per row of D) or of op(B) (one per column),
//   written, not accumulated. GELU is the tanh approximation, on the fp32 value. RELU's epilogues
//   (and their bit-mask) are NOT_SUPPORTED; so is DGELU_BGRAD, whose bias gradient the header
//   leaves unclear (of the matmul's output, or of the GELU gradient's: "independently").
// The bias vector (a bias gradient too) and the aux matrix have D's type: BIAS_DATA_TYPE and
// EPILOGUE_AUX_DATA_TYPE set to another are NOT_SUPPORTED (only IMMA and fp8 kernels differ). The
// aux matrix's EPILOGUE_AUX_LD must be divisible by 8 and at least D's rows, and the pointers an
// epilogue uses must be set: else CUBLAS_STATUS_INVALID_VALUE, from the heuristic for the leading
// dimension, from the matmul for a pointer (the heuristic reads the pointers only for their
// alignment, and a plan may be made before they are known).
//
// The algorithm the heuristic returns remembers the alignments the preference promised for A, B,
// C and D, and those of the bias and aux pointers the descriptor held then; a matmul on pointers
// less aligned than that is refused (CUBLAS_STATUS_NOT_SUPPORTED) where a GPU's kernel might read
// misaligned vectors: a plan cached for other pointers shows.
#include <cblas.h>
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
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
constexpr int32_t kTypeOfD = -1;             // BIAS_DATA_TYPE's and EPILOGUE_AUX_DATA_TYPE's default

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
  void* bias = nullptr;  // the bias, or where a bias gradient goes
  int32_t bias_type = kTypeOfD;
  void* aux = nullptr;
  int64_t aux_ld = 0;
  int32_t aux_type = kTypeOfD;
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
  uint32_t bias_alignment, aux_alignment;
};

// What an epilogue does to each element x of alpha op(A) op(B) + beta C, in this order.
enum EpilogueStep : unsigned {
  kAddBias = 1,            // x += bias[row]
  kStoreAux = 2,           // aux = x, the GELU's input
  kGelu = 4,               // x = GELU(x)
  kGeluGradient = 8,       // x *= GELU'(aux)
  kBiasGradientA = 16,     // bias[row] = sum over k of op(A)[row, :]
  kBiasGradientB = 32,     // bias[col] = sum over k of op(B)[:, col]
};
constexpr unsigned kUsesBias = kAddBias | kBiasGradientA | kBiasGradientB;
constexpr unsigned kUsesAux = kStoreAux | kGeluGradient;

struct EpilogueSteps {
  cublasLtEpilogue_t epilogue;
  unsigned steps;
};

constexpr EpilogueSteps kEpilogues[] = {
    {CUBLASLT_EPILOGUE_DEFAULT, 0},
    {CUBLASLT_EPILOGUE_BIAS, kAddBias},
    {CUBLASLT_EPILOGUE_GELU, kGelu},
    {CUBLASLT_EPILOGUE_GELU_AUX, kStoreAux | kGelu},
    {CUBLASLT_EPILOGUE_GELU_BIAS, kAddBias | kGelu},
    {CUBLASLT_EPILOGUE_GELU_AUX_BIAS, kAddBias | kStoreAux | kGelu},
    {CUBLASLT_EPILOGUE_DGELU, kGeluGradient},
    {CUBLASLT_EPILOGUE_BGRADA, kBiasGradientA},
    {CUBLASLT_EPILOGUE_BGRADB, kBiasGradientB},
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

// The span in elements of `cols` columns of `rows` elements, `ld` apart.
uint64_t span_elements(uint64_t rows, uint64_t cols, int64_t ld) {
  return rows == 0 || cols == 0 ? 0 : (cols - 1) * static_cast<uint64_t>(ld) + rows;
}

// The span of a layout's matrices in bytes, from the first element of the first to the last of
// the last.
size_t span_bytes(const Layout& layout) {
  const uint64_t one = span_elements(layout.rows, layout.cols, layout.ld);
  if (one == 0) return 0;
  return (static_cast<uint64_t>(layout.batch - 1) * static_cast<uint64_t>(layout.stride) + one) *
         element_bytes(layout.type);
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
         a.batch == d.batch && b.batch == d.batch && c.batch == d.batch && c.ld == d.ld && c.stride == d.stride;
}

bool types_supported(const MatmulDesc& desc, const Layout& a, const Layout& b, const Layout& c, const Layout& d) {
  const bool inputs = a.type == b.type && (a.type == CUDA_R_32F || a.type == CUDA_R_16BF);
  const bool outputs = c.type == d.type && (d.type == CUDA_R_32F || d.type == a.type);
  return desc.compute == CUBLAS_COMPUTE_32F && desc.scale == CUDA_R_32F && inputs && outputs;
}

bool epilogue_steps(uint32_t epilogue, unsigned& steps) {
  for (const EpilogueSteps& known : kEpilogues)
    if (known.epilogue == epilogue) {
      steps = known.steps;
      return true;
    }
  return false;
}

bool explicit_type_differs(int32_t type, cudaDataType_t of_d) { return type != kTypeOfD && type != of_d; }

// What the heuristic and the matmul both check: the shape, the types and the epilogue's
// attributes. Gives the shape and the epilogue's steps.
cublasStatus_t check_plan(const MatmulDesc& desc, const Layout& a, const Layout& b, const Layout& c,
                          const Layout& d, Shape& shape, unsigned& steps) {
  if (!matmul_shape(desc, a, b, c, d, shape)) return CUBLAS_STATUS_INVALID_VALUE;
  if (!types_supported(desc, a, b, c, d) || desc.pointer_mode != CUBLASLT_POINTER_MODE_HOST ||
      !epilogue_steps(desc.epilogue, steps))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (steps != 0 && d.batch != 1) return CUBLAS_STATUS_NOT_SUPPORTED;
  if ((steps & kUsesBias) != 0 && explicit_type_differs(desc.bias_type, d.type)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if ((steps & kUsesAux) != 0) {
    if (explicit_type_differs(desc.aux_type, d.type)) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (desc.aux_ld % 8 != 0 || desc.aux_ld < static_cast<int64_t>(d.rows)) return CUBLAS_STATUS_INVALID_VALUE;
  }
  return CUBLAS_STATUS_SUCCESS;
}

// The largest power of two up to 256 that divides the address.
uint32_t alignment_of(const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  const uintptr_t lowest_bit = address & (~address + 1);
  return address == 0 ? kDefaultAlignment : static_cast<uint32_t>(std::min<uintptr_t>(lowest_bit, kDefaultAlignment));
}

bool aligned(const void* pointer, uint32_t alignment) {
  return reinterpret_cast<uintptr_t>(pointer) % alignment == 0;
}

float load(cudaDataType_t type, const void* base, int64_t at) {
  return type == CUDA_R_16BF ? __bfloat162float(static_cast<const __nv_bfloat16*>(base)[at])
                             : static_cast<const float*>(base)[at];
}

void store(cudaDataType_t type, void* base, int64_t at, float value) {
  if (type == CUDA_R_16BF) {
    static_cast<__nv_bfloat16*>(base)[at] = __float2bfloat16_rn(value);
  } else {
    static_cast<float*>(base)[at] = value;
  }
}

// Matrix i of a layout, widened to a packed fp32 column-major copy (exact).
void widen(const Layout& layout, const void* base, int32_t i, std::vector<float>& widened) {
  widened.resize(layout.rows * layout.cols);
  for (uint64_t col = 0; col < layout.cols; ++col) {
    const int64_t column = static_cast<int64_t>(i) * layout.stride + static_cast<int64_t>(col) * layout.ld;
    for (uint64_t row = 0; row < layout.rows; ++row)
      widened[col * layout.rows + row] = load(layout.type, base, column + static_cast<int64_t>(row));
  }
}

// A column-major fp32 matrix.
struct Fp32Matrix {
  const float* data;
  int64_t ld;
  float at(uint64_t row, uint64_t col) const {
    return data[static_cast<int64_t>(col) * ld + static_cast<int64_t>(row)];
  }
};

// Matrix i of an operand as fp32: itself when it is fp32, else its widened copy in `widened`.
Fp32Matrix as_fp32(const Layout& layout, const void* base, int32_t i, std::vector<float>& widened) {
  if (layout.type == CUDA_R_32F)
    return {static_cast<const float*>(base) + static_cast<int64_t>(i) * layout.stride, layout.ld};
  widen(layout, base, i, widened);
  return {widened.data(), static_cast<int64_t>(layout.rows)};
}

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

float gelu(float x) { return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x))); }

float gelu_gradient(float x) {
  const float t = std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
}

// A matmul as it runs on its stream.
struct Matmul {
  MatmulDesc desc;
  Shape shape;
  unsigned steps;
  float alpha, beta;
  Layout a, b, c, d;
  const void *a_base, *b_base, *c_base;
  void* d_base;
};

void run_matmul(const Matmul& matmul) {
  const auto op = [](int32_t transpose) { return transpose != CUBLAS_OP_N ? CblasTrans : CblasNoTrans; };
  const bool ta = matmul.desc.transpose_a != CUBLAS_OP_N, tb = matmul.desc.transpose_b != CUBLAS_OP_N;
  const auto [m, n, k] = matmul.shape;
  const Layout& d = matmul.d;
  const cudaDataType_t type = d.type;  // of D, C, the bias and the aux matrix alike
  std::vector<float> wide_a, wide_b, x;
  for (int32_t i = 0; i < d.batch; ++i) {
    const Fp32Matrix a = as_fp32(matmul.a, matmul.a_base, i, wide_a), b = as_fp32(matmul.b, matmul.b_base, i, wide_b);
    // x = alpha op(A) op(B) + beta C in fp32, packed; C is not read when beta is 0, as BLAS's isn't.
    x.assign(m * n, 0.0f);
    if (matmul.beta != 0.0f) widen(matmul.c, matmul.c_base, i, x);
    // BLAS wants leading dimensions of at least 1, even for matrices with no rows.
    cblas_sgemm(CblasColMajor, op(matmul.desc.transpose_a), op(matmul.desc.transpose_b), static_cast<blasint>(m),
                static_cast<blasint>(n), static_cast<blasint>(k), matmul.alpha, a.data,
                static_cast<blasint>(std::max<int64_t>(a.ld, 1)), b.data,
                static_cast<blasint>(std::max<int64_t>(b.ld, 1)), matmul.beta, x.data(),
                static_cast<blasint>(std::max<uint64_t>(m, 1)));
    const unsigned steps = matmul.steps;
    void* const bias = matmul.desc.bias;
    void* const aux = matmul.desc.aux;
    const int64_t aux_ld = matmul.desc.aux_ld;
    if ((steps & kBiasGradientA) != 0)
      for (uint64_t row = 0; row < m; ++row) {
        float sum = 0.0f;
        for (uint64_t l = 0; l < k; ++l) sum += ta ? a.at(l, row) : a.at(row, l);
        store(type, bias, static_cast<int64_t>(row), sum);
      }
    if ((steps & kBiasGradientB) != 0)
      for (uint64_t col = 0; col < n; ++col) {
        float sum = 0.0f;
        for (uint64_t l = 0; l < k; ++l) sum += tb ? b.at(col, l) : b.at(l, col);
        store(type, bias, static_cast<int64_t>(col), sum);
      }
    const int64_t d_first = static_cast<int64_t>(i) * d.stride;
    for (uint64_t col = 0; col < n; ++col)
      for (uint64_t row = 0; row < m; ++row) {
        float value = x[col * m + row];
        const auto aux_at = static_cast<int64_t>(col) * aux_ld + static_cast<int64_t>(row);
        if ((steps & kAddBias) != 0) value += load(type, bias, static_cast<int64_t>(row));
        if ((steps & kStoreAux) != 0) store(type, aux, aux_at, value);
        if ((steps & kGelu) != 0) value = gelu(value);
        if ((steps & kGeluGradient) != 0) value *= gelu_gradient(load(type, aux, aux_at));
        store(type, matmul.d_base, d_first + static_cast<int64_t>(col) * d.ld + static_cast<int64_t>(row), value);
      }
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
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return set(ours_desc.bias, buffer, bytes);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return set(ours_desc.bias_type, buffer, bytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return set(ours_desc.aux, buffer, bytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return set(ours_desc.aux_ld, buffer, bytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: return set(ours_desc.aux_type, buffer, bytes);
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
  const MatmulDesc& ours_desc = ours<MatmulDesc>(desc);
  Shape shape{};
  unsigned steps = 0;
  const cublasStatus_t checked =
      check_plan(ours_desc, ours<Layout>(a), ours<Layout>(b), ours<Layout>(c), ours<Layout>(d), shape, steps);
  if (checked != CUBLAS_STATUS_SUCCESS) return checked;
  results[0] = cublasLtMatmulHeuristicResult_t{};
  new (results[0].algo.data) Algo{kAlgoMark, ours<Preference>(preference).alignments, alignment_of(ours_desc.bias),
                                  alignment_of(ours_desc.aux)};
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
  Matmul matmul{.desc = ours<MatmulDesc>(desc),
                .shape = {},
                .steps = 0,
                .alpha = 0.0f,
                .beta = 0.0f,
                .a = ours<Layout>(a_layout),
                .b = ours<Layout>(b_layout),
                .c = ours<Layout>(c_layout),
                .d = ours<Layout>(d_layout),
                .a_base = a,
                .b_base = b,
                .c_base = c,
                .d_base = d};
  const cublasStatus_t checked =
      check_plan(matmul.desc, matmul.a, matmul.b, matmul.c, matmul.d, matmul.shape, matmul.steps);
  if (checked != CUBLAS_STATUS_SUCCESS) return checked;
  const bool uses_bias = (matmul.steps & kUsesBias) != 0, uses_aux = (matmul.steps & kUsesAux) != 0;
  if (alpha == nullptr || beta == nullptr || algo == nullptr || (uses_bias && matmul.desc.bias == nullptr) ||
      (uses_aux && matmul.desc.aux == nullptr))
    return CUBLAS_STATUS_INVALID_VALUE;
  Algo chosen{};
  std::memcpy(&chosen, algo->data, sizeof(chosen));
  if (chosen.mark != kAlgoMark) return CUBLAS_STATUS_INVALID_VALUE;
  if (!aligned(a, chosen.alignments.a) || !aligned(b, chosen.alignments.b) || !aligned(c, chosen.alignments.c) ||
      !aligned(d, chosen.alignments.d) || (uses_bias && !aligned(matmul.desc.bias, chosen.bias_alignment)) ||
      (uses_aux && !aligned(matmul.desc.aux, chosen.aux_alignment)))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  matmul.alpha = *static_cast<const float*>(alpha);
  matmul.beta = *static_cast<const float*>(beta);

  const std::lock_guard lock(device_mutex());
  if (sticky_error() != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
  CUstream_st* queue = resolve(stream);
  if (queue == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  // An operand outside device memory faults when the matmul runs, as a GPU kernel's read would.
  struct Operand {
    const char* name;
    const void* pointer;
    size_t bytes;
  };
  std::vector<Operand> operands = {{"A", a, span_bytes(matmul.a)},
                                   {"B", b, span_bytes(matmul.b)},
                                   {"C", c, span_bytes(matmul.c)},
                                   {"D", d, span_bytes(matmul.d)}};
  const size_t element = element_bytes(matmul.d.type);
  if (uses_bias) {
    const uint64_t length = (matmul.steps & kBiasGradientB) != 0 ? matmul.shape.n : matmul.shape.m;
    operands.push_back({"the bias vector", matmul.desc.bias, length * element});
  }
  if (uses_aux)
    operands.push_back({"the aux matrix", matmul.desc.aux,
                        span_elements(matmul.shape.m, matmul.shape.n, matmul.desc.aux_ld) * element});
  std::string why;
  for (const Operand& operand : operands) {
    const Allocation* allocation = find_allocation(operand.pointer, operand.bytes);
    if (allocation == nullptr || allocation->kind != MemoryKind::kDevice) {
      why = std::string("cublasLtMatmul: ") + operand.name + "'s " + std::to_string(operand.bytes) +
            " bytes are not all in one device allocation";
      break;
    }
  }
  enqueue(queue, [matmul, why] {
    if (!why.empty()) {
      fault(cudaErrorIllegalAddress, why);
      return;
    }
    run_matmul(matmul);
  });
  std::vector<const void*> pointers;
  for (const Operand& operand : operands) pointers.push_back(operand.pointer);
  log_queued(queue, "matmul", pointers);
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
