// The CPU's blas family: GEMM on OpenBLAS, one cblas_sgemm per batch entry with the given
// leading dimensions; the bf16 GEMM rounds its operands to bf16 and multiplies them in fp32.
#include <cblas.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "cpu_ops.h"

namespace trainctl::cpu {

namespace {

// fp32 -> bf16 -> fp32: keep the top 16 bits, rounding to nearest with ties to even, as
// __float2bfloat16_rn does. NaN stays NaN (quieted) instead of rounding into infinity.
float round_to_bf16(float x) {
  uint32_t bits = std::bit_cast<uint32_t>(x);
  if (std::isnan(x)) return std::bit_cast<float>((bits | 0x00400000u) & 0xFFFF0000u);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return std::bit_cast<float>(bits & 0xFFFF0000u);
}

// One operand of a (batched) GEMM as stored: `batch` matrices of rows x cols, row stride ld,
// matrix stride `stride` (0: the same matrix for every batch entry).
struct StoredOperand {
  const float* data;
  int64_t rows, cols, ld, stride;
};

// Rounds the operand to bf16 into `packed`, dense (ld = cols), one matrix per distinct stored
// one; returns the packed matrix stride.
int64_t pack_rounded(const StoredOperand& operand, int64_t batch, std::vector<float>& packed) {
  const int64_t matrices = operand.stride == 0 ? 1 : batch;
  const int64_t size = operand.rows * operand.cols;
  packed.resize(static_cast<size_t>(matrices * size));
  for (int64_t i = 0; i < matrices; ++i)
    for (int64_t r = 0; r < operand.rows; ++r) {
      const float* row = operand.data + i * operand.stride + r * operand.ld;
      std::transform(row, row + operand.cols, packed.begin() + i * size + r * operand.cols, round_to_bf16);
    }
  return operand.stride == 0 ? 0 : size;
}

}  // namespace

void gemm(Stream, const Gemm& g) {
  for (int64_t i = 0; i < g.batch; ++i)
    cblas_sgemm(CblasRowMajor, g.transpose_a ? CblasTrans : CblasNoTrans, g.transpose_b ? CblasTrans : CblasNoTrans,
                static_cast<blasint>(g.m), static_cast<blasint>(g.n), static_cast<blasint>(g.k), g.alpha,
                g.a + i * g.stride_a, static_cast<blasint>(g.lda), g.b + i * g.stride_b, static_cast<blasint>(g.ldb),
                g.beta, g.c + i * g.stride_c, static_cast<blasint>(g.ldc));
}

void gemm_bf16(Stream stream, const Gemm& g) {
  // Reused between calls: a training step makes a handful of GEMMs of the same few shapes.
  thread_local std::vector<float> rounded_a, rounded_b;
  const StoredOperand a{g.a, g.transpose_a ? g.k : g.m, g.transpose_a ? g.m : g.k, g.lda, g.stride_a};
  const StoredOperand b{g.b, g.transpose_b ? g.n : g.k, g.transpose_b ? g.k : g.n, g.ldb, g.stride_b};
  Gemm rounded = g;
  rounded.stride_a = pack_rounded(a, g.batch, rounded_a);
  rounded.stride_b = pack_rounded(b, g.batch, rounded_b);
  rounded.a = rounded_a.data();
  rounded.lda = a.cols;
  rounded.b = rounded_b.data();
  rounded.ldb = b.cols;
  gemm(stream, rounded);
}

}  // namespace trainctl::cpu
