// The CPU's rope family: rotary position embedding in place on the query and key heads of
// attention's qkv, forward, and backward (the rotation by minus the angle), as Hugging Face's
// apply_rotary_pos_emb computes it in fp32: a head's halves x1 and x2 become x1 cos - x2 sin and
// x2 cos + x1 sin (q * cos + rotate_half(q) * sin: each product rounded, then the sum). A bf16
// head is widened, rotated in float and rounded once.
#include "cpu_ops.h"

namespace trainctl::cpu {

namespace {

// The rotation by the tables' angles (sign 1) or by their negatives (sign -1: sin negated, which
// is exact).
void rotate_heads(TypedPtr qkv, const float* cos, const float* sin, const AttentionShape& shape, float sign) {
  const int64_t half = shape.head_size / 2, row_width = shape.qkv_width();
  const int64_t rotated_heads = shape.heads + shape.kv_heads;  // the queries', then the keys'
  for (int64_t b = 0; b < shape.batch; ++b)
    for (int64_t t = 0; t < shape.seq; ++t) {
      const float* cos_row = cos + t * half;
      const float* sin_row = sin + t * half;
      for (int64_t h = 0; h < rotated_heads; ++h) {
        const TypedPtr head = qkv + (b * shape.seq + t) * row_width + h * shape.head_size;
        for (int64_t i = 0; i < half; ++i) {
          const float x1 = load(head, i), x2 = load(head, i + half);
          const float c = cos_row[i], s = sign * sin_row[i];
          store(head, i, x1 * c - x2 * s);
          store(head, i + half, x2 * c + x1 * s);
        }
      }
    }
}

}  // namespace

void rope_forward(Stream, TypedPtr qkv, const float* cos, const float* sin, const AttentionShape& shape) {
  rotate_heads(qkv, cos, sin, shape, 1.0f);
}

void rope_backward(Stream, TypedPtr grad_qkv, const float* cos, const float* sin, const AttentionShape& shape) {
  rotate_heads(grad_qkv, cos, sin, shape, -1.0f);
}

}  // namespace trainctl::cpu
