// The CUDA attention family: causal self-attention, multi-head or grouped-query, forward and
// backward, over f32 or bf16 tensors (widened to fp32 as they are read, a bf16 result rounded once as it is written)
// computed in fp32 on CUDA cores, tiled in the manner of FlashAttention-2 so that no seq x seq
// matrix is ever stored. A block takes a tile of 32 rows of one (batch, head), four threads per
// row, each holding every fourth column of the head (d <= 128, padded with zeros to 32, 64 or 128)
// and summing its share of a dot product, the four shares then added by a fixed xor butterfly.
// Tiles in shared memory keep each thread's columns next to each other (Tile), so that it reads
// them four at a time, and the dot products and accumulations are explicit fused multiply-adds
// (fmaf), which the build's --fmad=false (there for the elementwise kernels' bitwise match with the
// CPU) would otherwise split into a multiply and an add; the tolerances against the CPU are those
// of any fp32 sum order. The forward streams the key and value tiles up to the causal limit through
// shared memory with an online softmax (running max and sum), and writes out and lse = max +
// log(sum). The backward recomputes the probabilities exp(s - lse) tile by tile in two passes that
// each own what they write, so no float atomics and bitwise the same result on every run: one block
// per key tile of a key/value head accumulates dK and dV over its group's query heads in order and,
// for each, over the query tiles in order; one block per query tile of a query head accumulates dQ
// over the key tiles in order; each computes D_i = dO_i . O_i itself, in the same order. A query
// head reads its key/value head's columns of qkv in place (attention_layout.cuh).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "cuda/attention_layout.cuh"
#include "cuda/cuda_ops.h"
#include "cuda/kernel_common.cuh"

namespace trainctl::cuda_kernels {

namespace {

constexpr int kTile = 32;                   // rows (queries or keys) of a block's tile
constexpr int kSplit = 4;                   // threads per row, lanes next to each other
constexpr int kThreads = kTile * kSplit;    // threads of a block
constexpr int kMaxHeadSize = 128;

// A dot product's four shares summed in every lane of the row's group: the pairing is fixed,
// and each pairwise sum is the same in either order, so all four lanes get the same bits.
__device__ inline float group_sum(float value) {
  for (int offset = kSplit / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// One (sequence, query head) of the attention tensors, blockIdx.x's of batch * heads: where its q
// columns, its key/value head's k and v columns, its out (and grad_out) columns and its lse row
// are.
template <typename T>
struct QueryHeadView {
  const T* q;
  const T* k;
  const T* v;
  int64_t out_offset;
  int64_t lse_offset;

  __device__ QueryHeadView(const T* qkv, const AttentionLayout& layout) {
    const auto [b, h] = layout.block_query_head();
    const int kv = layout.kv_head(h);
    q = qkv + layout.q_offset(b, h);
    k = qkv + layout.k_offset(b, kv);
    v = qkv + layout.v_offset(b, kv);
    out_offset = layout.out_offset(b, h);
    lse_offset = layout.lse_offset(b, h);
  }
};

// The first query of this block's tile: the tiles in reverse order, so that the blocks with the
// most keys to go over (the last queries) start first.
__device__ inline int64_t tile_start() { return int64_t{gridDim.y - 1 - blockIdx.y} * kTile; }

// kTile rows of kD columns in shared memory. Each row is laid out as kSplit runs, one per thread
// of a row's group: run `sub` holds columns sub, sub + kSplit, sub + 2 kSplit, ..., the thread's
// columns in the order it sums them, so that it reads four of them as one float4: a shared load
// per four multiply-adds, not one per multiply-add. The runs are padded by four floats, so that
// the four of a row start in different banks: a warp's eight rows of threads read the same tile
// row (a broadcast), its four threads of a row four 16-byte pieces in distinct banks.
template <int kD>
struct alignas(16) Tile {
  static constexpr int kRun = kD / kSplit + 4;
  float values[kTile][kSplit * kRun];

  // Row r, column c = base[(first + r) * ld + c], zero past the last row or the head's columns;
  // consecutive threads read consecutive columns.
  template <typename T>
  __device__ void load(const T* base, int64_t ld, int64_t first, int64_t seq, int head_size) {
    for (int e = static_cast<int>(threadIdx.x); e < kTile * kD; e += kThreads) {
      const int r = e / kD, c = e % kD;
      const int64_t row = first + r;
      values[r][c % kSplit * kRun + c / kSplit] = row < seq && c < head_size ? widen(base[row * ld + c]) : 0.0f;
    }
  }

  // Columns sub + kSplit * (m + j), j = 0..3, of row r (m a multiple of 4): the thread's m-th to
  // (m + 3)-th.
  __device__ Floats<4> quad(int r, int sub, int m) const { return load_floats<4>(&values[r][sub * kRun + m]); }
};

// A thread's columns of row `row` (clamped to the last row: rows past it are computed but never
// written), zero past the head's columns.
template <int kD, typename T>
__device__ void load_columns(float (&values)[kD / kSplit], const T* base, int64_t ld, int64_t row, int64_t seq,
                             int head_size, int sub) {
  const int64_t clamped = min(row, seq - 1);
#pragma unroll
  for (int m = 0; m < kD / kSplit; ++m) {
    const int c = sub + kSplit * m;
    values[m] = c < head_size ? widen(base[clamped * ld + c]) : 0.0f;
  }
}

// D_i = dO_i . O_i for the row of the thread's group, in every lane of it: the same order in
// both backward passes.
template <int kD, typename T>
__device__ float output_dot(const T* grad_out, const T* out, int64_t out_ld, int64_t row, int64_t seq,
                            int head_size, int sub) {
  const int64_t clamped = min(row, seq - 1);
  float dot = 0.0f;
#pragma unroll
  for (int m = 0; m < kD / kSplit; ++m) {
    const int c = sub + kSplit * m;
    if (c < head_size) dot = fmaf(widen(grad_out[clamped * out_ld + c]), widen(out[clamped * out_ld + c]), dot);
  }
  return group_sum(dot);
}

// Grid: x = batch * heads, y = query tiles. Each group of kSplit threads keeps its query row's
// q and output accumulator in registers (kD / kSplit columns each) and the tile's scores.
template <int kD, typename T>
__global__ void __launch_bounds__(kThreads)
    attention_forward_kernel(T* __restrict__ out, float* __restrict__ lse, const T* __restrict__ qkv,
                             AttentionLayout layout, float scale) {
  constexpr int kCols = kD / kSplit;
  __shared__ Tile<kD> k_tile, v_tile;
  const QueryHeadView<T> head(qkv, layout);
  const int64_t seq = layout.seq, ld = layout.qkv_ld();
  const int head_size = layout.head_size;
  const int row = static_cast<int>(threadIdx.x) / kSplit, sub = static_cast<int>(threadIdx.x) % kSplit;
  const int64_t first_query = tile_start();
  const int64_t i = first_query + row;

  float q[kCols], o[kCols];
  load_columns<kD>(q, head.q, ld, i, seq, head_size, sub);
#pragma unroll
  for (int m = 0; m < kCols; ++m) o[m] = 0.0f;
  float running_max = -INFINITY, running_sum = 0.0f;

  const int64_t key_end = min(seq, first_query + kTile);
  for (int64_t first_key = 0; first_key < key_end; first_key += kTile) {
    __syncthreads();  // the previous tile's readers are done
    k_tile.load(head.k, ld, first_key, seq, head_size);
    v_tile.load(head.v, ld, first_key, seq, head_size);
    __syncthreads();

    // Scaled scores, -inf where masked. The first tile always has key 0 <= i, so the running
    // max is finite from then on for every row that is written.
    float s[kTile];
    float tile_max = -INFINITY;
#pragma unroll
    for (int jj = 0; jj < kTile; ++jj) {
      float dot = 0.0f;
#pragma unroll
      for (int m = 0; m < kCols; m += 4) {
        const Floats<4> k = k_tile.quad(jj, sub, m);
#pragma unroll
        for (int j = 0; j < 4; ++j) dot = fmaf(q[m + j], k.v[j], dot);
      }
      dot = group_sum(dot) * scale;
      s[jj] = first_key + jj <= i ? dot : -INFINITY;
      tile_max = fmaxf(tile_max, s[jj]);
    }
    const float new_max = fmaxf(running_max, tile_max);
    const float correction = expf(running_max - new_max);  // 0 on the first tile
#pragma unroll
    for (int m = 0; m < kCols; ++m) o[m] *= correction;
    float tile_sum = 0.0f;
#pragma unroll
    for (int jj = 0; jj < kTile; ++jj) {
      const float p = expf(s[jj] - new_max);
      tile_sum += p;
#pragma unroll
      for (int m = 0; m < kCols; m += 4) {
        const Floats<4> v = v_tile.quad(jj, sub, m);
#pragma unroll
        for (int j = 0; j < 4; ++j) o[m + j] = fmaf(p, v.v[j], o[m + j]);
      }
    }
    running_sum = running_sum * correction + tile_sum;
    running_max = new_max;
  }

  if (i >= seq) return;
  const float inverse_sum = 1.0f / running_sum;
  T* out_row = out + head.out_offset + i * layout.out_ld();
#pragma unroll
  for (int m = 0; m < kCols; ++m) {
    const int c = sub + kSplit * m;
    if (c < head_size) out_row[c] = narrow<T>(o[m] * inverse_sum);
  }
  if (sub == 0) lse[head.lse_offset + i] = running_max + logf(running_sum);
}

// dK and dV. Grid: x = batch * kv_heads, y = key tiles. Each group keeps its key row's k and v
// and its dK and dV accumulators in registers, and goes over the query heads of its key/value
// head's group in order and, for each, over the query tiles from its own onwards, in order,
// through shared memory: dV_j += P_ij dO_i, dK_j += dS_ij Q_i.
template <int kD, typename T>
__global__ void __launch_bounds__(kThreads)
    attention_backward_key_kernel(T* __restrict__ grad_qkv, const T* __restrict__ grad_out, const T* __restrict__ qkv,
                                  const T* __restrict__ out, const float* __restrict__ lse, AttentionLayout layout,
                                  float scale) {
  constexpr int kCols = kD / kSplit;
  __shared__ Tile<kD> q_tile, grad_out_tile;
  __shared__ float lse_tile[kTile], dot_tile[kTile];
  const auto [b, kv] = layout.block_kv_head();
  const int64_t seq = layout.seq, ld = layout.qkv_ld(), out_ld = layout.out_ld();
  const int head_size = layout.head_size;
  const int row = static_cast<int>(threadIdx.x) / kSplit, sub = static_cast<int>(threadIdx.x) % kSplit;
  // In order: the first key tiles, which the most queries see, start first.
  const int64_t first_key = int64_t{blockIdx.y} * kTile;
  const int64_t j = first_key + row;

  float k[kCols], v[kCols], grad_k[kCols], grad_v[kCols];
  load_columns<kD>(k, qkv + layout.k_offset(b, kv), ld, j, seq, head_size, sub);
  load_columns<kD>(v, qkv + layout.v_offset(b, kv), ld, j, seq, head_size, sub);
#pragma unroll
  for (int m = 0; m < kCols; ++m) grad_k[m] = grad_v[m] = 0.0f;

  const int group_end = (kv + 1) * layout.group_size();
  for (int h = kv * layout.group_size(); h < group_end; ++h) {
    const T* q = qkv + layout.q_offset(b, h);
    const T* head_grad_out = grad_out + layout.out_offset(b, h);
    const T* head_out = out + layout.out_offset(b, h);
    const float* head_lse = lse + layout.lse_offset(b, h);
    for (int64_t first_query = first_key; first_query < seq; first_query += kTile) {
      __syncthreads();  // the previous tile's readers are done
      q_tile.load(q, ld, first_query, seq, head_size);
      grad_out_tile.load(head_grad_out, out_ld, first_query, seq, head_size);
      const float dot = output_dot<kD>(head_grad_out, head_out, out_ld, first_query + row, seq, head_size, sub);
      if (sub == 0) {
        dot_tile[row] = dot;
        lse_tile[row] = head_lse[min(first_query + row, seq - 1)];
      }
      __syncthreads();

      const int rows = static_cast<int>(min(int64_t{kTile}, seq - first_query));
      for (int r = 0; r < rows; ++r) {
        float s = 0.0f, grad_p = 0.0f;
#pragma unroll
        for (int m = 0; m < kCols; m += 4) {
          const Floats<4> q_quad = q_tile.quad(r, sub, m), grad_o = grad_out_tile.quad(r, sub, m);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            s = fmaf(q_quad.v[e], k[m + e], s);
            grad_p = fmaf(grad_o.v[e], v[m + e], grad_p);
          }
        }
        s = group_sum(s) * scale;
        grad_p = group_sum(grad_p);
        const float p = j <= first_query + r ? expf(s - lse_tile[r]) : 0.0f;
        const float grad_s = p * (grad_p - dot_tile[r]);
#pragma unroll
        for (int m = 0; m < kCols; m += 4) {
          const Floats<4> q_quad = q_tile.quad(r, sub, m), grad_o = grad_out_tile.quad(r, sub, m);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            grad_v[m + e] = fmaf(p, grad_o.v[e], grad_v[m + e]);
            grad_k[m + e] = fmaf(grad_s, q_quad.v[e], grad_k[m + e]);
          }
        }
      }
    }
  }

  if (j >= seq) return;
  T* grad_k_row = grad_qkv + layout.k_offset(b, kv) + j * ld;
  T* grad_v_row = grad_qkv + layout.v_offset(b, kv) + j * ld;
#pragma unroll
  for (int m = 0; m < kCols; ++m) {
    const int c = sub + kSplit * m;
    if (c < head_size) {
      grad_k_row[c] = narrow<T>(grad_k[m] * scale);
      grad_v_row[c] = narrow<T>(grad_v[m]);
    }
  }
}

// dQ. Grid: x = batch * heads, y = query tiles. Each group keeps its query row's q, dO and dQ
// accumulator in registers, and goes over the key tiles up to the causal limit, in order,
// through shared memory: dQ_i += dS_ij K_j.
template <int kD, typename T>
__global__ void __launch_bounds__(kThreads)
    attention_backward_query_kernel(T* __restrict__ grad_qkv, const T* __restrict__ grad_out,
                                    const T* __restrict__ qkv, const T* __restrict__ out,
                                    const float* __restrict__ lse, AttentionLayout layout, float scale) {
  constexpr int kCols = kD / kSplit;
  __shared__ Tile<kD> k_tile, v_tile;
  const QueryHeadView<T> head(qkv, layout);
  const int64_t seq = layout.seq, ld = layout.qkv_ld(), out_ld = layout.out_ld();
  const int head_size = layout.head_size;
  const int row = static_cast<int>(threadIdx.x) / kSplit, sub = static_cast<int>(threadIdx.x) % kSplit;
  const int64_t first_query = tile_start();
  const int64_t i = first_query + row;
  const T* head_grad_out = grad_out + head.out_offset;

  float q[kCols], grad_o[kCols], grad_q[kCols];
  load_columns<kD>(q, head.q, ld, i, seq, head_size, sub);
  load_columns<kD>(grad_o, head_grad_out, out_ld, i, seq, head_size, sub);
#pragma unroll
  for (int m = 0; m < kCols; ++m) grad_q[m] = 0.0f;
  const float dot = output_dot<kD>(head_grad_out, out + head.out_offset, out_ld, i, seq, head_size, sub);
  const float row_lse = lse[head.lse_offset + min(i, seq - 1)];

  const int64_t key_end = min(seq, first_query + kTile);
  for (int64_t first_key = 0; first_key < key_end; first_key += kTile) {
    __syncthreads();  // the previous tile's readers are done
    k_tile.load(head.k, ld, first_key, seq, head_size);
    v_tile.load(head.v, ld, first_key, seq, head_size);
    __syncthreads();
#pragma unroll 4
    for (int jj = 0; jj < kTile; ++jj) {
      float s = 0.0f, grad_p = 0.0f;
#pragma unroll
      for (int m = 0; m < kCols; m += 4) {
        const Floats<4> k = k_tile.quad(jj, sub, m), v = v_tile.quad(jj, sub, m);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          s = fmaf(q[m + j], k.v[j], s);
          grad_p = fmaf(grad_o[m + j], v.v[j], grad_p);
        }
      }
      s = group_sum(s) * scale;
      grad_p = group_sum(grad_p);
      // Keys past the last are zero rows, and masked for every row that is written.
      const float p = first_key + jj <= i ? expf(s - row_lse) : 0.0f;
      const float grad_s = p * (grad_p - dot);
#pragma unroll
      for (int m = 0; m < kCols; m += 4) {
        const Floats<4> k = k_tile.quad(jj, sub, m);
#pragma unroll
        for (int j = 0; j < 4; ++j) grad_q[m + j] = fmaf(grad_s, k.v[j], grad_q[m + j]);
      }
    }
  }

  if (i >= seq) return;
  T* grad_q_row = grad_qkv + (head.q - qkv) + i * ld;
#pragma unroll
  for (int m = 0; m < kCols; ++m) {
    const int c = sub + kSplit * m;
    if (c < head_size) grad_q_row[c] = narrow<T>(grad_q[m] * scale);
  }
}

// The grids, the scale and the padded head size of a call; nothing to do when `empty`.
struct Launch {
  AttentionLayout layout;
  dim3 query_grid;  // a block per query tile of each (sequence, query head)
  dim3 key_grid;    // a block per key tile of each (sequence, key/value head)
  float scale;
  int padded;       // kD: the head size rounded up to 32, 64 or 128
  bool empty;
};

Launch launch_of(const AttentionShape& shape) {
  require_valid_attention(shape);
  if (shape.head_size > kMaxHeadSize)
    throw std::invalid_argument("attention on CUDA: head size " + std::to_string(shape.head_size) + " over " +
                                std::to_string(kMaxHeadSize));
  const int64_t tiles = ceil_div(shape.seq, kTile);
  if (tiles > 65535) throw std::invalid_argument("attention on CUDA: seq " + std::to_string(shape.seq) + " too long");
  const auto grid = [&](int64_t heads) {
    return dim3(static_cast<unsigned int>(shape.batch * heads), static_cast<unsigned int>(tiles));
  };
  const int64_t head_size = shape.head_size;
  return {attention_layout(shape),
          grid(shape.heads),
          grid(shape.kv_heads),
          1.0f / std::sqrt(static_cast<float>(head_size)),
          head_size <= 32 ? 32 : head_size <= 64 ? 64 : 128,
          shape.batch * shape.seq == 0 || head_size == 0};
}

// body(std::integral_constant<int, kD>) for the call's padded head size.
template <typename Body>
void with_padded_head(const Launch& call, Body body) {
  switch (call.padded) {
    case 32: body(std::integral_constant<int, 32>{}); break;
    case 64: body(std::integral_constant<int, 64>{}); break;
    default: body(std::integral_constant<int, 128>{}); break;
  }
}

}  // namespace

void attention_forward(Stream stream, TypedPtr out, float* lse, ConstTypedPtr qkv, const AttentionShape& shape) {
  const Launch call = launch_of(shape);
  if (call.empty) return;
  const ElementType type = one_element_type("attention_forward", {out, qkv});
  if (flash_attention_usable(type, shape, {out.data, qkv.data})) {
    flash_attention_forward(cuda_stream(stream), typed<__nv_bfloat16>(out), lse, typed<__nv_bfloat16>(qkv), shape);
    return;
  }
  with_element_type(type, [&](auto type) {
    using T = typename decltype(type)::type;
    with_padded_head(call, [&](auto padded) {
      launch(cuda_stream(stream), call.query_grid, kThreads, attention_forward_kernel<padded(), T>, typed<T>(out), lse,
             typed<T>(qkv), call.layout, call.scale);
    });
  });
}

void attention_backward(Stream stream, TypedPtr grad_qkv, ConstTypedPtr grad_out, ConstTypedPtr qkv, ConstTypedPtr out,
                        const float* lse, const AttentionShape& shape) {
  const Launch call = launch_of(shape);
  if (call.empty) return;
  const ElementType type = one_element_type("attention_backward", {grad_qkv, grad_out, qkv, out});
  if (flash_attention_usable(type, shape, {grad_qkv.data, grad_out.data, qkv.data, out.data})) {
    flash_attention_backward(cuda_stream(stream), typed<__nv_bfloat16>(grad_qkv), typed<__nv_bfloat16>(grad_out),
                             typed<__nv_bfloat16>(qkv), typed<__nv_bfloat16>(out), lse, shape);
    return;
  }
  with_element_type(type, [&](auto type) {
    using T = typename decltype(type)::type;
    with_padded_head(call, [&](auto padded) {
      const cudaStream_t cuda = cuda_stream(stream);
      launch(cuda, call.key_grid, kThreads, attention_backward_key_kernel<padded(), T>, typed<T>(grad_qkv),
             typed<T>(grad_out), typed<T>(qkv), typed<T>(out), lse, call.layout, call.scale);
      launch(cuda, call.query_grid, kThreads, attention_backward_query_kernel<padded(), T>, typed<T>(grad_qkv),
             typed<T>(grad_out), typed<T>(qkv), typed<T>(out), lse, call.layout, call.scale);
    });
  });
}

}  // namespace trainctl::cuda_kernels
