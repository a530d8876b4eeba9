// The CUDA rope family: rotary position embedding in place on the query and key heads of
// attention's qkv, forward and backward, with the CPU reference's arithmetic (kernels/cpu/rope.cpp:
// x1 cos - x2 sin and x2 cos + x1 sin, each product rounded, uncontracted: --fmad=false), so both
// match it bitwise, in f32 and bf16 (widened, rotated in float, rounded once). A warp per head of
// a position, its lanes over the head's first half, each rotating element i with i + head_size / 2.
#include <cstdint>

#include "cuda/cuda_ops.h"
#include "cuda/kernel_common.cuh"

namespace trainctl::cuda_kernels {

namespace {

// Heads (b, t, h) for h below heads + kv_heads (the queries', then the keys'), a warp each; sign
// 1 rotates by the tables' angles, -1 by their negatives (sin negated, exactly).
template <typename T>
__global__ void rope_kernel(T* qkv, const float* __restrict__ cos, const float* __restrict__ sin,
                            AttentionShape shape, float sign) {
  // qkv_width(), which is host code.
  const int64_t half = shape.head_size / 2, row_width = (shape.heads + 2 * shape.kv_heads) * shape.head_size;
  const int64_t rotated_heads = shape.heads + shape.kv_heads;
  const int64_t heads = shape.batch * shape.seq * rotated_heads;
  for (int64_t unit = grid_warp_index(); unit < heads; unit += grid_warp_count()) {
    const int64_t position = unit / rotated_heads;  // b * seq + t
    T* head = qkv + position * row_width + (unit - position * rotated_heads) * shape.head_size;
    const int64_t table_row = (position % shape.seq) * half;
    for (int64_t i = lane_index(); i < half; i += kWarpSize) {
      const float x1 = widen(head[i]), x2 = widen(head[i + half]);
      const float c = cos[table_row + i], s = sign * sin[table_row + i];
      head[i] = narrow<T>(x1 * c - x2 * s);
      head[i + half] = narrow<T>(x2 * c + x1 * s);
    }
  }
}

void rotate_heads(Stream stream, TypedPtr qkv, const float* cos, const float* sin, const AttentionShape& shape,
            float sign) {
  const int64_t heads = shape.batch * shape.seq * (shape.heads + shape.kv_heads);
  if (heads == 0 || shape.head_size == 0) return;
  with_element_type(qkv.type, [&](auto type) {
    using T = typename decltype(type)::type;
    launch(cuda_stream(stream), blocks_for_rows(heads), kBlockThreads, rope_kernel<T>, typed<T>(qkv), cos, sin, shape,
           sign);
  });
}

}  // namespace

void rope_forward(Stream stream, TypedPtr qkv, const float* cos, const float* sin, const AttentionShape& shape) {
  rotate_heads(stream, qkv, cos, sin, shape, 1.0f);
}

void rope_backward(Stream stream, TypedPtr grad_qkv, const float* cos, const float* sin, const AttentionShape& shape) {
  rotate_heads(stream, grad_qkv, cos, sin, shape, -1.0f);
}

}  // namespace trainctl::cuda_kernels
