// The CPU's blas family: GEMM on OpenBLAS, one cblas_sgemm per batch entry with the given leading
// dimensions, then the epilogue on the fp32 result, row by row. bf16 operands are widened to fp32
// (exactly) into packed scratch first, so their products are exact and summed in fp32; a bf16 C is
// computed in fp32 scratch and rounded once. The bias-gradient epilogues sum their operand's rows
// in order into zeroed scratch and add the sums to the gradient once (zeroed_column_sums), as every
// parameter gradient here is formed.
#include <cblas.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "activation_functions.h"
#include "cpu_ops.h"

namespace trainctl::cpu {

namespace {

// Scratch slots: the widened A and B, C's fp32 result, and a row of the epilogue's other inputs.
constexpr int kSlotA = 0, kSlotB = 1, kSlotC = 2, kSlotBias = 3;

// One operand of a (batched) GEMM as stored: `batch` matrices of rows x cols, row stride ld,
// matrix stride `stride` (0: the same matrix for every batch entry).
struct StoredOperand {
  ConstTypedPtr data;
  int64_t rows, cols, ld, stride;
};

// The operand as fp32: as stored when it is f32, else widened into scratch `slot`, dense (ld =
// cols), one matrix per distinct stored one. Sets ld and stride to the result's.
const float* widened(const StoredOperand& operand, int64_t batch, int slot, int64_t& ld, int64_t& stride) {
  if (operand.data.type == ElementType::kF32) {
    ld = operand.ld;
    stride = operand.stride;
    return operand.data.f32();
  }
  const int64_t matrices = operand.stride == 0 ? 1 : batch;
  const int64_t size = operand.rows * operand.cols;
  float* packed = scratch<float>(slot, matrices * size);
  for (int64_t i = 0; i < matrices; ++i)
    for (int64_t r = 0; r < operand.rows; ++r) {
      const Bf16* row = operand.data.bf16() + i * operand.stride + r * operand.ld;
      float* out = packed + i * size + r * operand.cols;
      for (int64_t c = 0; c < operand.cols; ++c) out[c] = to_float(row[c]);
    }
  ld = operand.cols;
  stride = operand.stride == 0 ? 0 : size;
  return packed;
}

// The epilogue over one m x n result in fp32 (row stride ldr), in place. cuBLASLt's GELU is
// GPT-2's tanh form.
void apply_epilogue(const Gemm& g, float* result, int64_t ldr) {
  using activations::GeluTanh;
  const int64_t n = g.n;
  for (int64_t i = 0; i < g.m; ++i) {
    float* row = result + i * ldr;
    switch (g.epilogue) {
      case Epilogue::kBias:
      case Epilogue::kGeluBias: {
        const float* bias = as_floats(g.bias, n, kSlotBias);
        for (int64_t j = 0; j < n; ++j) row[j] += bias[j];
        if (g.epilogue == Epilogue::kGeluBias) {
          store_floats(g.aux + i * g.ld_aux, row, n);
          for (int64_t j = 0; j < n; ++j) row[j] = GeluTanh::forward(row[j]);
        }
        break;
      }
      case Epilogue::kGeluGrad: {
        const float* aux = as_floats(g.aux + i * g.ld_aux, n, kSlotBias);
        for (int64_t j = 0; j < n; ++j) row[j] = row[j] * GeluTanh::derivative(aux[j], 0.0f);
        break;
      }
      case Epilogue::kNone:
      case Epilogue::kBiasGradA:
      case Epilogue::kBiasGradB:
        return;
    }
  }
}

// The bias gradient of op(A) (m sums over k) or op(B) (n sums over k), accumulated into
// bias_grad: each sum over k in order, into zeroed scratch, added once.
void accumulate_bias_gradient(const Gemm& g) {
  const bool of_a = g.epilogue == Epilogue::kBiasGradA;
  const ConstTypedPtr operand = of_a ? g.a : g.b;
  const int64_t ld = of_a ? g.lda : g.ldb;
  const int64_t count = of_a ? g.m : g.n;
  float* sums = zeroed_column_sums(0, count);
  // op(A)[i, k] is A[i][k], or A[k][i] when transposed; op(B)[k, j] is B[k][j], or B[j][k]: the
  // sums run down the stored rows (over k) when op(A) is transposed or op(B) is not.
  if (of_a == (of_a ? g.transpose_a : g.transpose_b)) {
    for (int64_t k = 0; k < g.k; ++k) {
      const float* row = as_floats(operand + k * ld, count, kSlotBias);
      for (int64_t s = 0; s < count; ++s) sums[s] += row[s];
    }
  } else {
    for (int64_t s = 0; s < count; ++s) {
      const float* row = as_floats(operand + s * ld, g.k, kSlotBias);
      for (int64_t k = 0; k < g.k; ++k) sums[s] += row[k];
    }
  }
  add_column_sums(g.bias_grad, sums, count);
}

}  // namespace

void gemm(Stream, const Gemm& g) {
  require_valid_gemm(g);
  int64_t lda = 0, stride_a = 0, ldb = 0, stride_b = 0;
  const float* a = widened({g.a, g.transpose_a ? g.k : g.m, g.transpose_a ? g.m : g.k, g.lda, g.stride_a}, g.batch,
                           kSlotA, lda, stride_a);
  const float* b = widened({g.b, g.transpose_b ? g.n : g.k, g.transpose_b ? g.k : g.n, g.ldb, g.stride_b}, g.batch,
                           kSlotB, ldb, stride_b);
  const bool direct = g.c.type == ElementType::kF32;
  // A bf16 C is formed in packed fp32 scratch (its old values widened where beta reads them).
  const int64_t ldr = direct ? g.ldc : g.n;
  const int64_t stride_r = direct ? g.stride_c : g.m * g.n;
  float* result = direct ? g.c.f32() : scratch<float>(kSlotC, g.batch * g.m * g.n);
  for (int64_t i = 0; i < g.batch; ++i) {
    float* r = result + i * stride_r;
    if (!direct && g.beta != 0.0f)
      for (int64_t row = 0; row < g.m; ++row)
        for (int64_t col = 0; col < g.n; ++col)
          r[row * ldr + col] = load(g.c, i * g.stride_c + row * g.ldc + col);
    cblas_sgemm(CblasRowMajor, g.transpose_a ? CblasTrans : CblasNoTrans, g.transpose_b ? CblasTrans : CblasNoTrans,
                static_cast<blasint>(g.m), static_cast<blasint>(g.n), static_cast<blasint>(g.k), g.alpha,
                a + i * stride_a, static_cast<blasint>(lda), b + i * stride_b, static_cast<blasint>(ldb),
                g.beta, r, static_cast<blasint>(ldr));
  }
  if (g.epilogue == Epilogue::kBiasGradA || g.epilogue == Epilogue::kBiasGradB) accumulate_bias_gradient(g);
  apply_epilogue(g, result, ldr);
  if (direct) return;
  for (int64_t i = 0; i < g.batch; ++i)
    for (int64_t row = 0; row < g.m; ++row)
      for (int64_t col = 0; col < g.n; ++col)
        store(g.c, i * g.stride_c + row * g.ldc + col, result[i * stride_r + row * ldr + col]);
}

}  // namespace trainctl::cpu
