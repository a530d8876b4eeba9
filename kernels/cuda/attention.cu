// The CUDA attention family: causal multi-head self-attention, forward and backward, over f32 or
// bf16 tensors (widened to fp32 as they are read, a bf16 result rounded once as it is written)
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
// per key tile accumulates dK and dV over the query tiles in order, one block per query tile
// accumulates dQ over the key tiles in order; each computes D_i = dO_i . O_i itself, in the same
// order.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

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

// One (batch, head) of the attention tensors, blockIdx.x's.
template <typename T>
struct HeadView {
  const T* q;  // row stride 3 * channels; k and v follow at + channels and + 2 channels
  int64_t qkv_ld;
  int64_t out_offset;  // of the head's columns in out and grad_out (row stride channels)
  int64_t lse_offset;  // of the head's row in lse

  __device__ HeadView(const T* qkv, int64_t seq, int64_t channels, int heads, int head_size) {
    const int64_t b = blockIdx.x / heads, h = blockIdx.x % heads;
    qkv_ld = 3 * channels;
    q = qkv + b * seq * qkv_ld + h * head_size;
    out_offset = b * seq * channels + h * head_size;
    lse_offset = int64_t{blockIdx.x} * seq;
  }
  __device__ const T* k() const { return q + qkv_ld / 3; }
  __device__ const T* v() const { return q + 2 * (qkv_ld / 3); }
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
__device__ float output_dot(const T* grad_out, const T* out, int64_t channels, int64_t row, int64_t seq,
                            int head_size, int sub) {
  const int64_t clamped = min(row, seq - 1);
  float dot = 0.0f;
#pragma unroll
  for (int m = 0; m < kD / kSplit; ++m) {
    const int c = sub + kSplit * m;
    if (c < head_size) dot = fmaf(widen(grad_out[clamped * channels + c]), widen(out[clamped * channels + c]), dot);
  }
  return group_sum(dot);
}

// Grid: x = batch * heads, y = query tiles. Each group of kSplit threads keeps its query row's
// q and output accumulator in registers (kD / kSplit columns each) and the tile's scores.
template <int kD, typename T>
__global__ void __launch_bounds__(kThreads)
    attention_forward_kernel(T* __restrict__ out, float* __restrict__ lse, const T* __restrict__ qkv, int64_t seq,
                             int64_t channels, int heads, int head_size, float scale) {
  constexpr int kCols = kD / kSplit;
  __shared__ Tile<kD> k_tile, v_tile;
  const HeadView<T> head(qkv, seq, channels, heads, head_size);
  const int row = static_cast<int>(threadIdx.x) / kSplit, sub = static_cast<int>(threadIdx.x) % kSplit;
  const int64_t first_query = tile_start();
  const int64_t i = first_query + row;

  float q[kCols], o[kCols];
  load_columns<kD>(q, head.q, head.qkv_ld, i, seq, head_size, sub);
#pragma unroll
  for (int m = 0; m < kCols; ++m) o[m] = 0.0f;
  float running_max = -INFINITY, running_sum = 0.0f;

  const int64_t key_end = min(seq, first_query + kTile);
  for (int64_t first_key = 0; first_key < key_end; first_key += kTile) {
    __syncthreads();  // the previous tile's readers are done
    k_tile.load(head.k(), head.qkv_ld, first_key, seq, head_size);
    v_tile.load(head.v(), head.qkv_ld, first_key, seq, head_size);
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
  T* out_row = out + head.out_offset + i * channels;
#pragma unroll
  for (int m = 0; m < kCols; ++m) {
    const int c = sub + kSplit * m;
    if (c < head_size) out_row[c] = narrow<T>(o[m] * inverse_sum);
  }
  if (sub == 0) lse[head.lse_offset + i] = running_max + logf(running_sum);
}

// dK and dV. Grid: x = batch * heads, y = key tiles. Each group keeps its key row's k and v
// and its dK and dV accumulators in registers, and goes over the query tiles from its own
// onwards, in order, through shared memory: dV_j += P_ij dO_i, dK_j += dS_ij Q_i.
template <int kD, typename T>
__global__ void __launch_bounds__(kThreads)
    attention_backward_key_kernel(T* __restrict__ grad_qkv, const T* __restrict__ grad_out, const T* __restrict__ qkv,
                                  const T* __restrict__ out, const float* __restrict__ lse, int64_t seq,
                                  int64_t channels, int heads, int head_size, float scale) {
  constexpr int kCols = kD / kSplit;
  __shared__ Tile<kD> q_tile, grad_out_tile;
  __shared__ float lse_tile[kTile], dot_tile[kTile];
  const HeadView<T> head(qkv, seq, channels, heads, head_size);
  const int row = static_cast<int>(threadIdx.x) / kSplit, sub = static_cast<int>(threadIdx.x) % kSplit;
  // In order: the first key tiles, which the most queries see, start first.
  const int64_t first_key = int64_t{blockIdx.y} * kTile;
  const int64_t j = first_key + row;
  const T* head_grad_out = grad_out + head.out_offset;
  const T* head_out = out + head.out_offset;

  float k[kCols], v[kCols], grad_k[kCols], grad_v[kCols];
  load_columns<kD>(k, head.k(), head.qkv_ld, j, seq, head_size, sub);
  load_columns<kD>(v, head.v(), head.qkv_ld, j, seq, head_size, sub);
#pragma unroll
  for (int m = 0; m < kCols; ++m) grad_k[m] = grad_v[m] = 0.0f;

  for (int64_t first_query = first_key; first_query < seq; first_query += kTile) {
    __syncthreads();  // the previous tile's readers are done
    q_tile.load(head.q, head.qkv_ld, first_query, seq, head_size);
    grad_out_tile.load(head_grad_out, channels, first_query, seq, head_size);
    const float dot = output_dot<kD>(head_grad_out, head_out, channels, first_query + row, seq, head_size, sub);
    if (sub == 0) {
      dot_tile[row] = dot;
      lse_tile[row] = lse[head.lse_offset + min(first_query + row, seq - 1)];
    }
    __syncthreads();

    const int rows = static_cast<int>(min(int64_t{kTile}, seq - first_query));
    for (int r = 0; r < rows; ++r) {
      float s = 0.0f, grad_p = 0.0f;
#pragma unroll
      for (int m = 0; m < kCols; m += 4) {
        const Floats<4> q = q_tile.quad(r, sub, m), grad_o = grad_out_tile.quad(r, sub, m);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          s = fmaf(q.v[j], k[m + j], s);
          grad_p = fmaf(grad_o.v[j], v[m + j], grad_p);
        }
      }
      s = group_sum(s) * scale;
      grad_p = group_sum(grad_p);
      const float p = j <= first_query + r ? expf(s - lse_tile[r]) : 0.0f;
      const float grad_s = p * (grad_p - dot_tile[r]);
#pragma unroll
      for (int m = 0; m < kCols; m += 4) {
        const Floats<4> q = q_tile.quad(r, sub, m), grad_o = grad_out_tile.quad(r, sub, m);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          grad_v[m + j] = fmaf(p, grad_o.v[j], grad_v[m + j]);
          grad_k[m + j] = fmaf(grad_s, q.v[j], grad_k[m + j]);
        }
      }
    }
  }

  if (j >= seq) return;
  T* grad_q_base = grad_qkv + (head.q - qkv);
  T* grad_k_row = grad_q_base + channels + j * head.qkv_ld;
  T* grad_v_row = grad_q_base + 2 * channels + j * head.qkv_ld;
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
                                    const float* __restrict__ lse, int64_t seq, int64_t channels, int heads,
                                    int head_size, float scale) {
  constexpr int kCols = kD / kSplit;
  __shared__ Tile<kD> k_tile, v_tile;
  const HeadView<T> head(qkv, seq, channels, heads, head_size);
  const int row = static_cast<int>(threadIdx.x) / kSplit, sub = static_cast<int>(threadIdx.x) % kSplit;
  const int64_t first_query = tile_start();
  const int64_t i = first_query + row;
  const T* head_grad_out = grad_out + head.out_offset;

  float q[kCols], grad_o[kCols], grad_q[kCols];
  load_columns<kD>(q, head.q, head.qkv_ld, i, seq, head_size, sub);
  load_columns<kD>(grad_o, head_grad_out, channels, i, seq, head_size, sub);
#pragma unroll
  for (int m = 0; m < kCols; ++m) grad_q[m] = 0.0f;
  const float dot = output_dot<kD>(head_grad_out, out + head.out_offset, channels, i, seq, head_size, sub);
  const float row_lse = lse[head.lse_offset + min(i, seq - 1)];

  const int64_t key_end = min(seq, first_query + kTile);
  for (int64_t first_key = 0; first_key < key_end; first_key += kTile) {
    __syncthreads();  // the previous tile's readers are done
    k_tile.load(head.k(), head.qkv_ld, first_key, seq, head_size);
    v_tile.load(head.v(), head.qkv_ld, first_key, seq, head_size);
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
  T* grad_q_row = grad_qkv + (head.q - qkv) + i * head.qkv_ld;
#pragma unroll
  for (int m = 0; m < kCols; ++m) {
    const int c = sub + kSplit * m;
    if (c < head_size) grad_q_row[c] = narrow<T>(grad_q[m] * scale);
  }
}

// The grid, head size and scale of a call; grid.x == 0 when there is nothing to do.
struct AttentionShape {
  dim3 grid;
  int head_size;
  float scale;
  int padded;  // kD: the head size rounded up to 32, 64 or 128
};

AttentionShape attention_shape(int64_t batch, int64_t seq, int64_t channels, int64_t heads) {
  if (heads <= 0 || channels % heads != 0)
    throw std::invalid_argument("attention: channels (" + std::to_string(channels) + ") not a multiple of heads (" +
                                std::to_string(heads) + ")");
  const int64_t head_size = channels / heads;
  if (head_size > kMaxHeadSize)
    throw std::invalid_argument("attention on CUDA: head size " + std::to_string(head_size) + " over " +
                                std::to_string(kMaxHeadSize));
  const int64_t tiles = ceil_div(seq, kTile);
  if (tiles > 65535) throw std::invalid_argument("attention on CUDA: seq " + std::to_string(seq) + " too long");
  const int padded = head_size <= 32 ? 32 : head_size <= 64 ? 64 : 128;
  const int64_t grid_x = batch * seq == 0 || head_size == 0 ? 0 : batch * heads;
  return {dim3(static_cast<unsigned int>(grid_x), static_cast<unsigned int>(tiles)), static_cast<int>(head_size),
          1.0f / std::sqrt(static_cast<float>(head_size)), padded};
}

// body(std::integral_constant<int, kD>) for the shape's padded head size.
template <typename Body>
void with_padded_head(const AttentionShape& shape, Body body) {
  switch (shape.padded) {
    case 32: body(std::integral_constant<int, 32>{}); break;
    case 64: body(std::integral_constant<int, 64>{}); break;
    default: body(std::integral_constant<int, 128>{}); break;
  }
}

}  // namespace

void attention_forward(Stream stream, TypedPtr out, float* lse, ConstTypedPtr qkv, int64_t batch, int64_t seq,
                       int64_t channels, int64_t heads) {
  const AttentionShape shape = attention_shape(batch, seq, channels, heads);
  if (shape.grid.x == 0) return;
  const ElementType type = one_element_type("attention_forward", {out, qkv});
  if (flash_attention_usable(type, channels, heads, {out.data, qkv.data})) {
    flash_attention_forward(cuda_stream(stream), typed<__nv_bfloat16>(out), lse, typed<__nv_bfloat16>(qkv), batch, seq,
                   channels, heads);
    return;
  }
  with_element_type(type, [&](auto type) {
    using T = typename decltype(type)::type;
    with_padded_head(shape, [&](auto padded) {
      launch(cuda_stream(stream), shape.grid, kThreads, attention_forward_kernel<padded(), T>, typed<T>(out), lse,
             typed<T>(qkv), seq, channels, static_cast<int>(heads), shape.head_size, shape.scale);
    });
  });
}

void attention_backward(Stream stream, TypedPtr grad_qkv, ConstTypedPtr grad_out, ConstTypedPtr qkv, ConstTypedPtr out,
                        const float* lse, int64_t batch, int64_t seq, int64_t channels, int64_t heads) {
  const AttentionShape shape = attention_shape(batch, seq, channels, heads);
  if (shape.grid.x == 0) return;
  const ElementType type = one_element_type("attention_backward", {grad_qkv, grad_out, qkv, out});
  if (flash_attention_usable(type, channels, heads, {grad_qkv.data, grad_out.data, qkv.data, out.data})) {
    flash_attention_backward(cuda_stream(stream), typed<__nv_bfloat16>(grad_qkv), typed<__nv_bfloat16>(grad_out),
                    typed<__nv_bfloat16>(qkv), typed<__nv_bfloat16>(out), lse, batch, seq, channels, heads);
    return;
  }
  with_element_type(type, [&](auto type) {
    using T = typename decltype(type)::type;
    with_padded_head(shape, [&](auto padded) {
      const cudaStream_t cuda = cuda_stream(stream);
      launch(cuda, shape.grid, kThreads, attention_backward_key_kernel<padded(), T>, typed<T>(grad_qkv),
             typed<T>(grad_out), typed<T>(qkv), typed<T>(out), lse, seq, channels, static_cast<int>(heads),
             shape.head_size, shape.scale);
      launch(cuda, shape.grid, kThreads, attention_backward_query_kernel<padded(), T>, typed<T>(grad_qkv),
             typed<T>(grad_out), typed<T>(qkv), typed<T>(out), lse, seq, channels, static_cast<int>(heads),
             shape.head_size, shape.scale);
    });
  });
}

}  // namespace trainctl::cuda_kernels
