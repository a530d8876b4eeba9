// The CPU's attention family: causal self-attention, multi-head or grouped-query, forward and
// backward, one (batch, query head) at a time. The GEMMs run on OpenBLAS straight on the strided
// q, k and v columns of qkv (a query head reads its group's key and value columns in place, never
// a copy of them); the seq x seq scores live only in a thread_local scratch reused from head to
// head, small enough to stay in cache, and backward recomputes the probabilities from the scores
// and the saved log-sum-exp. A key/value head's gradient is the sum over its group's query heads,
// added in their order: the first head's GEMMs write it, the next ones add to it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu_ops.h"

namespace trainctl::cpu {

namespace {

// One (batch, query head)'s view of the attention tensors: where its q columns, its key/value
// head's k and v columns and its out columns start.
struct Head {
  int64_t seq, size, qkv_ld, out_ld;
  float scale;  // 1 / sqrt(size)
  int64_t q_offset, k_offset, v_offset, out_offset;
  bool first_of_group;  // the first query head of its key/value head's group
};

Head head_at(int64_t b, int64_t h, const AttentionShape& shape) {
  const int64_t size = shape.head_size, kv = h / shape.group_size();
  const int64_t row0 = b * shape.seq * shape.qkv_width();
  return {.seq = shape.seq,
          .size = size,
          .qkv_ld = shape.qkv_width(),
          .out_ld = shape.out_width(),
          .scale = 1.0f / std::sqrt(static_cast<float>(size)),
          .q_offset = row0 + h * size,
          .k_offset = row0 + (shape.heads + kv) * size,
          .v_offset = row0 + (shape.heads + shape.kv_heads + kv) * size,
          .out_offset = b * shape.seq * shape.out_width() + h * size,
          .first_of_group = h % shape.group_size() == 0};
}

// scores[i, j] = scale * q_i . k_j for all i, j (the masked half too: one dense GEMM is faster
// than the triangle piecewise).
void scaled_scores(float* scores, const float* q, const float* k, const Head& head) {
  gemm({}, Gemm{.transpose_b = true, .m = head.seq, .n = head.seq, .k = head.size, .alpha = head.scale, .a = q,
                .lda = head.qkv_ld, .b = k, .ldb = head.qkv_ld, .c = scores, .ldc = head.seq});
}

// Row i of a seq x seq matrix keeps columns [0, i]; the masked rest becomes zero.
void zero_masked(float* row, int64_t i, int64_t seq) { std::fill(row + i + 1, row + seq, 0.0f); }

// The row's scores [0, length) in place -> softmax, as PyTorch computes it: exp(s - max) times
// 1 / sum. Returns the log-sum-exp, max + log(sum).
float softmax_row(float* __restrict row, int64_t length) {
  const float max = lane_reduce(
      length, -std::numeric_limits<float>::infinity(), [&](int64_t j) { return row[j]; },
      [](float a, float b) { return a > b ? a : b; });
  for (int64_t j = 0; j < length; ++j) row[j] = expf(row[j] - max);
  const float sum = lane_sum<float>(length, [&](int64_t j) { return row[j]; });
  const float inverse_sum = 1.0f / sum;
  for (int64_t j = 0; j < length; ++j) row[j] *= inverse_sum;
  return max + std::log(sum);
}

// The row's scores [0, length) in place -> the probabilities exp(s - lse): the forward's
// softmax to within rounding, without its max and sum.
void probabilities_row(float* __restrict row, int64_t length, float lse) {
  for (int64_t j = 0; j < length; ++j) row[j] = expf(row[j] - lse);
}

// The row's grad_probabilities [0, length) in place -> grad_scores = P * (grad_P - D).
void grad_scores_row(float* __restrict grad_row, const float* __restrict probabilities, int64_t length,
                     float row_dot) {
  for (int64_t j = 0; j < length; ++j) grad_row[j] = probabilities[j] * (grad_row[j] - row_dot);
}

// A thread's seq x seq scratch matrix, grown as needed and kept.
float* square_scratch(std::vector<float>& matrix, int64_t seq) {
  matrix.resize(static_cast<size_t>(seq * seq));
  return matrix.data();
}

void attention_forward_floats(float* out, float* lse, const float* qkv, const AttentionShape& shape) {
  const int64_t seq = shape.seq;
  thread_local std::vector<float> probabilities_scratch;
  float* probabilities = square_scratch(probabilities_scratch, seq);
  for (int64_t b = 0; b < shape.batch; ++b)
    for (int64_t h = 0; h < shape.heads; ++h) {
      const Head head = head_at(b, h, shape);
      scaled_scores(probabilities, qkv + head.q_offset, qkv + head.k_offset, head);
      float* head_lse = lse + (b * shape.heads + h) * seq;
      for (int64_t i = 0; i < seq; ++i) {
        head_lse[i] = softmax_row(probabilities + i * seq, i + 1);
        zero_masked(probabilities + i * seq, i, seq);
      }
      gemm({}, Gemm{.m = seq, .n = head.size, .k = seq, .a = probabilities, .lda = seq, .b = qkv + head.v_offset,
                    .ldb = head.qkv_ld, .c = out + head.out_offset, .ldc = head.out_ld});
    }
}

// Per query head, with P the probabilities, O = P V and dO = grad_out:
//   dV = P^T dO; dP = dO V^T; D_i = rowsum(dO_i * O_i); dS = P * (dP - D_i);
//   dQ = dS K * scale; dK = dS^T Q * scale,
// dK and dV written by the group's first query head and added to by the others (beta 1).
void attention_backward_floats(float* grad_qkv, const float* grad_out, const float* qkv, const float* out,
                               const float* lse, const AttentionShape& shape) {
  const int64_t seq = shape.seq;
  thread_local std::vector<float> probabilities_scratch, grad_scores_scratch;
  float* probabilities = square_scratch(probabilities_scratch, seq);
  float* grad_scores = square_scratch(grad_scores_scratch, seq);
  for (int64_t b = 0; b < shape.batch; ++b)
    for (int64_t h = 0; h < shape.heads; ++h) {
      const Head head = head_at(b, h, shape);
      const int64_t ld = head.qkv_ld, out_ld = head.out_ld;
      const float* q = qkv + head.q_offset;
      const float* k = qkv + head.k_offset;
      const float* v = qkv + head.v_offset;
      const float* o = out + head.out_offset;
      const float* grad_o = grad_out + head.out_offset;
      const float* head_lse = lse + (b * shape.heads + h) * seq;
      const float kv_beta = head.first_of_group ? 0.0f : 1.0f;

      scaled_scores(probabilities, q, k, head);
      for (int64_t i = 0; i < seq; ++i) {
        probabilities_row(probabilities + i * seq, i + 1, head_lse[i]);
        zero_masked(probabilities + i * seq, i, seq);
      }
      gemm({}, Gemm{.transpose_a = true, .m = seq, .n = head.size, .k = seq, .beta = kv_beta, .a = probabilities,
                    .lda = seq, .b = grad_o, .ldb = out_ld, .c = grad_qkv + head.v_offset, .ldc = ld});
      gemm({}, Gemm{.transpose_b = true, .m = seq, .n = seq, .k = head.size, .a = grad_o, .lda = out_ld, .b = v,
                    .ldb = ld, .c = grad_scores, .ldc = seq});
      for (int64_t i = 0; i < seq; ++i) {
        const float* grad_o_row = grad_o + i * out_ld;
        const float* o_row = o + i * out_ld;
        const float row_dot = lane_sum<float>(head.size, [&](int64_t c) { return grad_o_row[c] * o_row[c]; });
        grad_scores_row(grad_scores + i * seq, probabilities + i * seq, i + 1, row_dot);
        zero_masked(grad_scores + i * seq, i, seq);
      }
      gemm({}, Gemm{.m = seq, .n = head.size, .k = seq, .alpha = head.scale, .a = grad_scores, .lda = seq, .b = k,
                    .ldb = ld, .c = grad_qkv + head.q_offset, .ldc = ld});
      gemm({}, Gemm{.transpose_a = true, .m = seq, .n = head.size, .k = seq, .alpha = head.scale, .beta = kv_beta,
                    .a = grad_scores, .lda = seq, .b = q, .ldb = ld, .c = grad_qkv + head.k_offset, .ldc = ld});
    }
}

}  // namespace

void attention_forward(Stream, TypedPtr out, float* lse, ConstTypedPtr qkv, const AttentionShape& shape) {
  require_valid_attention(shape);
  const int64_t rows = shape.batch * shape.seq;
  float* out_floats = floats_for(out, rows * shape.out_width(), 1);
  attention_forward_floats(out_floats, lse, as_floats(qkv, rows * shape.qkv_width(), 0), shape);
  store_floats(out, out_floats, rows * shape.out_width());
}

void attention_backward(Stream, TypedPtr grad_qkv, ConstTypedPtr grad_out, ConstTypedPtr qkv, ConstTypedPtr out,
                        const float* lse, const AttentionShape& shape) {
  require_valid_attention(shape);
  const int64_t rows = shape.batch * shape.seq;
  float* grad_qkv_floats = floats_for(grad_qkv, rows * shape.qkv_width(), 3);
  attention_backward_floats(grad_qkv_floats, as_floats(grad_out, rows * shape.out_width(), 0),
                            as_floats(qkv, rows * shape.qkv_width(), 1), as_floats(out, rows * shape.out_width(), 2),
                            lse, shape);
  store_floats(grad_qkv, grad_qkv_floats, rows * shape.qkv_width());
}

}  // namespace trainctl::cpu
