// Where one attention call's heads lie in its tensors (device.h, AttentionShape), for the kernels
// on CUDA cores (attention.cu) and on tensor cores (flash_attention.cu): a query head's columns of
// qkv and out and its row of lse, and its key/value head's columns of qkv, which the query heads of
// a group read in place (grouped-query attention: never a copy per query head). A kernel's block
// takes one (sequence, query head), blockIdx.x of batch * heads, or one (sequence, key/value head),
// blockIdx.x of batch * kv_heads.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "device.h"

namespace trainctl::cuda_kernels {

struct AttentionLayout {
  int64_t seq;
  int heads, kv_heads, head_size;

  // The row strides of qkv (query heads, key heads, value heads) and of out.
  __host__ __device__ int64_t qkv_ld() const { return int64_t{heads + 2 * kv_heads} * head_size; }
  __host__ __device__ int64_t out_ld() const { return int64_t{heads} * head_size; }
  // The query heads of a group, and the key/value head query head h reads (repeat_kv's order).
  __host__ __device__ int group_size() const { return heads / kv_heads; }
  __device__ int kv_head(int h) const { return h / group_size(); }

  // Of sequence b's query head h in qkv, key head and value head kv in qkv, query head h in out
  // (and grad_out), and query head h's row in lse.
  __device__ int64_t q_offset(int64_t b, int h) const { return b * seq * qkv_ld() + int64_t{h} * head_size; }
  __device__ int64_t k_offset(int64_t b, int kv) const {
    return b * seq * qkv_ld() + int64_t{heads + kv} * head_size;
  }
  __device__ int64_t v_offset(int64_t b, int kv) const {
    return b * seq * qkv_ld() + int64_t{heads + kv_heads + kv} * head_size;
  }
  __device__ int64_t out_offset(int64_t b, int h) const { return b * seq * out_ld() + int64_t{h} * head_size; }
  __device__ int64_t lse_offset(int64_t b, int h) const { return (b * heads + h) * seq; }

  // The block's sequence and head: a query head's in a grid of batch * heads blocks across, a
  // key/value head's in one of batch * kv_heads.
  struct Head {
    int64_t batch;
    int head;
  };
  __device__ Head block_query_head() const {
    return {int64_t{blockIdx.x} / heads, static_cast<int>(blockIdx.x % static_cast<unsigned int>(heads))};
  }
  __device__ Head block_kv_head() const {
    return {int64_t{blockIdx.x} / kv_heads, static_cast<int>(blockIdx.x % static_cast<unsigned int>(kv_heads))};
  }
};

inline AttentionLayout attention_layout(const AttentionShape& shape) {
  return {shape.seq, static_cast<int>(shape.heads), static_cast<int>(shape.kv_heads),
          static_cast<int>(shape.head_size)};
}

}  // namespace trainctl::cuda_kernels
