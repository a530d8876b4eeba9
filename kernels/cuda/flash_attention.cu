// Causal attention in bf16 on tensor cores, FlashAttention-2's design (attention.cu's ops call it,
// through cuda_ops.h, for bf16 tensors with a head size of 16, 32, 64 or 128), multi-head or
// grouped-query: a block takes a tile of 64 queries of one (sequence, query head) (forward, and the
// dQ pass of backward) or 64 keys of one (sequence, key/value head) (the dK, dV pass), four warps
// of 16 rows each; a query head reads its key/value head's columns of qkv in place
// (attention_layout.cuh). Its Q, K, V (and dO) tiles come into shared memory by cp.async, rows past
// the sequence as zeros; every product runs on tensor cores (mma.sync m16n8k16, bf16 operands from
// ldmatrix, fp32 accumulators): S = Q K^T, O += P V in the forward, and in the backward P's
// recomputation, dV += P^T dO, dP = dO V^T, dK += dS^T Q, dQ += dS K. The softmax is online, in
// base 2 on scores pre-scaled by log2(e) / sqrt(d), each row's running max and sum kept by the four
// lanes that hold it; the forward saves each row's log-sum-exp (natural, as the CPU's), from
// which the backward recomputes P exactly as the forward formed it. Key tiles above the diagonal
// are skipped, and in the diagonal tile and past the sequence's end the scores are masked.
// Deterministic: each block owns what it writes, loops run in a fixed order, no atomics; the two
// backward passes (by key tiles, then by query tiles) each recompute what they need, the first
// summing a key/value head's dK and dV over its group's query heads in their order. P and dS are
// rounded to bf16 as the operands of their products (as FlashAttention does); everything else
// sums in fp32.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "cuda/attention_layout.cuh"
#include "cuda/cuda_ops.h"
#include "cuda/device_scratch.h"
#include "cuda/kernel_common.cuh"
#include "cuda/tensor_cores.cuh"

namespace trainctl::cuda_kernels {

namespace {

constexpr int kRows = 64;                 // queries or keys of a block's tile
constexpr int kWarps = kRows / 16;        // a warp per 16 rows
constexpr int kThreads = kWarps * kWarpSize;
constexpr float kLog2E = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Head sizes with a tensor-core path: a multiple of the mma's k (16), at most 128.
bool head_size_supported(int64_t head_size) {
  return head_size == 16 || head_size == 32 || head_size == 64 || head_size == 128;
}

// A tile of kRows rows of kD bf16 in shared memory, each row padded by 8 elements (16 bytes) so
// that ldmatrix's eight row addresses of a matrix fall in different banks.
template <int kD>
struct Tile {
  static constexpr int kStride = kD + 8;
  static constexpr int kElements = kRows * kStride;
  __nv_bfloat16* rows;

  __device__ __nv_bfloat16* at(int row, int column) const { return rows + row * kStride + column; }

  // Rows [first, first + kRows) of a matrix of `seq` rows at `base` (row stride ld elements), by
  // 16-byte cp.async pieces spread over the block's threads, zeros past the last row. Joins the
  // threads' uncommitted copies.
  __device__ void load(const __nv_bfloat16* base, int64_t ld, int64_t first, int64_t seq) const {
    constexpr int kPieces = kD / 8;  // 16-byte pieces of a row
    for (int piece = static_cast<int>(threadIdx.x); piece < kRows * kPieces; piece += kThreads) {
      const int row = piece / kPieces, column = piece % kPieces * 8;
      const int64_t source_row = first + row;
      const bool inside = source_row < seq;
      // A row past the end reads nothing (0 source bytes) from the matrix's first row.
      cp_async_16_zero_fill(at(row, column), base + (inside ? source_row : 0) * ld + column, inside ? 16 : 0);
    }
  }
};

// Two floats as a b32 of two bf16, the first in the low half (a fragment's element order).
__device__ inline uint32_t pack_bf16(float low, float high) {
  const uint32_t lo = __bfloat16_as_ushort(__float2bfloat16_rn(low));
  const uint32_t hi = __bfloat16_as_ushort(__float2bfloat16_rn(high));
  return lo | (hi << 16);
}

// The A fragment (16 rows x 16 of k) of rows [16 warp, 16 warp + 16), columns [k0, k0 + 16) of a
// row-major tile.
template <int kD>
__device__ inline void a_fragment(uint32_t (&a)[4], const Tile<kD>& tile, int first_row, int k0) {
  const int lane = lane_index();
  ldmatrix<4>(a, tile.at(first_row + lane % 16, k0 + 8 * (lane / 16)));
}

// The B fragment (16 of k x 8 of n) of a tile whose rows are n, columns k (keys for S = Q K^T):
// rows [n0, n0 + 8), columns [k0, k0 + 16).
template <int kD>
__device__ inline void b_fragment_by_rows(uint32_t (&b)[2], const Tile<kD>& tile, int n0, int k0) {
  const int lane = lane_index();
  ldmatrix<2>(b, tile.at(n0 + lane % 8, k0 + 8 * ((lane / 8) % 2)));
}

// The B fragment of a tile whose rows are k, columns n (values for O = P V): rows [k0, k0 + 16),
// columns [n0, n0 + 8).
template <int kD>
__device__ inline void b_fragment_by_columns(uint32_t (&b)[2], const Tile<kD>& tile, int k0, int n0) {
  const int lane = lane_index();
  ldmatrix_transposed<2>(b, tile.at(k0 + lane % 16, n0));
}

// The A fragments of 16 rows x 16 columns [16 j, 16 j + 16) of a product held as C fragments of
// 8-column tiles c[2 j] and c[2 j + 1]: the same lanes hold the same elements, rounded to bf16.
__device__ inline void a_from_c(uint32_t (&a)[4], const float (&left)[4], const float (&right)[4]) {
  a[0] = pack_bf16(left[0], left[1]);
  a[1] = pack_bf16(left[2], left[3]);
  a[2] = pack_bf16(right[0], right[1]);
  a[3] = pack_bf16(right[2], right[3]);
}

// The maximum or sum over the four lanes that hold a row's elements (lanes 4g to 4g + 3): a
// fixed butterfly, so all four get the same bits.
__device__ inline float row_max(float value) {
  value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, 1));
  return fmaxf(value, __shfl_xor_sync(0xffffffffu, value, 2));
}
__device__ inline float row_sum(float value) {
  value += __shfl_xor_sync(0xffffffffu, value, 1);
  return value + __shfl_xor_sync(0xffffffffu, value, 2);
}

// One attention call's layout, and its scores' scale.
struct Shape : AttentionLayout {
  float scale_log2;  // log2(e) / sqrt(head_size): scores pre-scaled for exp2
};

// The row's lane-held position: a C fragment's element e (0 to 3) is at row g + 8 (e / 2), column
// 2 t + e % 2 of its 16 x 8 tile.
__device__ inline int fragment_row(int e) { return lane_index() / 4 + 8 * (e / 2); }
__device__ inline int fragment_column(int e) { return 2 * (lane_index() % 4) + e % 2; }

// The tile order: the last tiles (the longest causal rows) first.
__device__ inline int64_t reversed_tile() { return int64_t{gridDim.y - 1 - blockIdx.y}; }

// Forward. Grid: x = batch * heads, y = query tiles; kThreads threads; shared memory for the Q, K
// and V tiles.
template <int kD>
__global__ void __launch_bounds__(kThreads) forward_kernel(__nv_bfloat16* __restrict__ out, float* __restrict__ lse,
                                                           const __nv_bfloat16* __restrict__ qkv, Shape shape) {
  __nv_bfloat16* shared = dynamic_shared_memory<__nv_bfloat16>();
  const Tile<kD> q_tile{shared}, k_tile{shared + Tile<kD>::kElements}, v_tile{shared + 2 * Tile<kD>::kElements};
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int64_t first_query = reversed_tile() * kRows;
  const auto [sequence, h] = shape.block_query_head();
  const __nv_bfloat16* q = qkv + shape.q_offset(sequence, h);
  const __nv_bfloat16* k_head = qkv + shape.k_offset(sequence, shape.kv_head(h));
  const __nv_bfloat16* v_head = qkv + shape.v_offset(sequence, shape.kv_head(h));
  const int64_t ld = shape.qkv_ld();

  q_tile.load(q, ld, first_query, shape.seq);
  cp_async_commit_group();

  float maxima[2] = {-INFINITY, -INFINITY}, sums[2] = {0.0f, 0.0f};
  float o[kD / 8][4] = {};
  const int64_t key_end = min(shape.seq, first_query + kRows);
  for (int64_t first_key = 0; first_key < key_end; first_key += kRows) {
    __syncthreads();  // the previous tiles' readers are done
    k_tile.load(k_head, ld, first_key, shape.seq);
    v_tile.load(v_head, ld, first_key, shape.seq);
    cp_async_commit_group();
    cp_async_wait_group<0>();
    __syncthreads();

    // S = Q K^T for the warp's 16 queries and the tile's 64 keys, pre-scaled for exp2.
    float s[kRows / 8][4] = {};
    for (int k0 = 0; k0 < kD; k0 += 16) {
      uint32_t a[4];
      a_fragment(a, q_tile, 16 * warp, k0);
      for (int n = 0; n < kRows / 8; ++n) {
        uint32_t b[2];
        b_fragment_by_rows(b, k_tile, 8 * n, k0);
        mma_m16n8k16_bf16(s[n], a, b, s[n]);
      }
    }
    float tile_max[2] = {-INFINITY, -INFINITY};
    for (int n = 0; n < kRows / 8; ++n)
      for (int e = 0; e < 4; ++e) {
        const int64_t query = first_query + 16 * warp + fragment_row(e);
        const int64_t key = first_key + 8 * n + fragment_column(e);
        s[n][e] = key <= query && key < shape.seq ? s[n][e] * shape.scale_log2 : -INFINITY;
        tile_max[e / 2] = fmaxf(tile_max[e / 2], s[n][e]);
      }
    // The online softmax: the rows' new maxima; what was summed so far is rescaled to them. A row
    // with every score masked so far (past the sequence) keeps max -inf and sums nothing.
    float rescale[2];
    for (int half = 0; half < 2; ++half) {
      const float new_max = fmaxf(maxima[half], row_max(tile_max[half]));
      rescale[half] = new_max == -INFINITY ? 1.0f : exp2f(maxima[half] - new_max);
      maxima[half] = new_max;
    }
    float tile_sum[2] = {0.0f, 0.0f};
    for (int n = 0; n < kRows / 8; ++n)
      for (int e = 0; e < 4; ++e) {
        const float maximum = maxima[e / 2];
        s[n][e] = maximum == -INFINITY ? 0.0f : exp2f(s[n][e] - maximum);
        tile_sum[e / 2] += s[n][e];
      }
    for (int half = 0; half < 2; ++half) sums[half] = sums[half] * rescale[half] + row_sum(tile_sum[half]);
    for (int n = 0; n < kD / 8; ++n)
      for (int e = 0; e < 4; ++e) o[n][e] *= rescale[e / 2];

    // O += P V, P's C fragments as A fragments of 16 keys each.
    for (int k = 0; k < kRows / 16; ++k) {
      uint32_t a[4];
      a_from_c(a, s[2 * k], s[2 * k + 1]);
      for (int n = 0; n < kD / 8; ++n) {
        uint32_t b[2];
        b_fragment_by_columns(b, v_tile, 16 * k, 8 * n);
        mma_m16n8k16_bf16(o[n], a, b, o[n]);
      }
    }
  }

  // out = O / sum, and lse = (max + log2(sum)) ln 2, for the rows inside the sequence.
  __nv_bfloat16* out_head = out + shape.out_offset(sequence, h);
  for (int half = 0; half < 2; ++half) {
    const int64_t query = first_query + 16 * warp + lane_index() / 4 + 8 * half;
    if (query >= shape.seq) continue;
    const float inverse_sum = 1.0f / sums[half];
    for (int n = 0; n < kD / 8; ++n) {
      const int column = 8 * n + 2 * (lane_index() % 4);
      __nv_bfloat16* destination = out_head + query * shape.out_ld() + column;
      destination[0] = __float2bfloat16_rn(o[n][2 * half] * inverse_sum);
      destination[1] = __float2bfloat16_rn(o[n][2 * half + 1] * inverse_sum);
    }
    if (lane_index() % 4 == 0)
      lse[shape.lse_offset(sequence, h) + query] = (maxima[half] + log2f(sums[half])) * kLn2;
  }
}

// Backward, first: each row's dO . O, a warp per row (grid-stride over the batch x heads x seq
// rows, lse's order), in fp32 from the bf16 tensors; both passes read it.
template <int kD>
__global__ void output_dot_kernel(float* __restrict__ dots, const __nv_bfloat16* __restrict__ grad_out,
                                  const __nv_bfloat16* __restrict__ out, int64_t rows, Shape shape) {
  for (int64_t row = grid_warp_index(); row < rows; row += grid_warp_count()) {
    const int64_t head_row = row / shape.seq, t = row % shape.seq;
    const int64_t b = head_row / shape.heads, h = head_row % shape.heads;
    const int64_t offset = (b * shape.seq + t) * shape.out_ld() + h * shape.head_size;
    float dot = 0.0f;
    for (int c = lane_index(); c < kD; c += kWarpSize)
      dot += __bfloat162float(grad_out[offset + c]) * __bfloat162float(out[offset + c]);
    dot = warp_sum(dot);
    if (lane_index() == 0) dots[row] = dot;
  }
}

// The probabilities of the C fragments s[n] (scores of rows `first_row` + fragment_row, columns
// `first_column` + 8 n + fragment_column, already the product of the rows and columns), recomputed
// as the forward formed them: exp2(score * scale_log2 - lse_row * log2(e)), 0 where masked (a key
// after its query, or past the sequence). row_of/column_of pick which of query and key the rows
// and columns are.
template <int kColumns, bool kRowsAreQueries>
__device__ inline void probabilities(float (&s)[kColumns / 8][4], int64_t first_row, int64_t first_column,
                                     const float* lse_log2_of_queries, const Shape& shape) {
  for (int n = 0; n < kColumns / 8; ++n)
    for (int e = 0; e < 4; ++e) {
      const int64_t row = first_row + fragment_row(e), column = first_column + 8 * n + fragment_column(e);
      const int64_t query = kRowsAreQueries ? row : column, key = kRowsAreQueries ? column : row;
      const bool kept = key <= query && query < shape.seq && key < shape.seq;
      const float lse_log2 = lse_log2_of_queries[kRowsAreQueries ? fragment_row(e) : 8 * n + fragment_column(e)];
      s[n][e] = kept ? exp2f(s[n][e] * shape.scale_log2 - lse_log2) : 0.0f;
    }
}

// The block's per-query values of a query tile in shared memory: lse (in base 2) and dO . O.
// The two products each backward pass starts a tile with, for the warp's 16 rows of a and c and
// the tile's kRows rows of b and d, over the head size: first += a b^T and second += c d^T (the
// scores and their gradient: Q K^T and dO V^T in the dQ pass, transposed in the dK/dV pass).
template <int kD>
__device__ inline void two_products(float (&first)[kRows / 8][4], const Tile<kD>& a, const Tile<kD>& b,
                                    float (&second)[kRows / 8][4], const Tile<kD>& c, const Tile<kD>& d, int warp) {
  for (int k0 = 0; k0 < kD; k0 += 16) {
    uint32_t a_rows[4], c_rows[4];
    a_fragment(a_rows, a, 16 * warp, k0);
    a_fragment(c_rows, c, 16 * warp, k0);
    for (int n = 0; n < kRows / 8; ++n) {
      uint32_t columns[2];
      b_fragment_by_rows(columns, b, 8 * n, k0);
      mma_m16n8k16_bf16(first[n], a_rows, columns, first[n]);
      b_fragment_by_rows(columns, d, 8 * n, k0);
      mma_m16n8k16_bf16(second[n], c_rows, columns, second[n]);
    }
  }
}

struct QueryValues {
  float* lse_log2;
  float* dots;

  // Of the query tile from first_query on, of the query head whose rows of lse and of the dots
  // start at row_offset.
  __device__ void load(const float* lse, const float* dots_source, int64_t row_offset, int64_t first_query,
                       int64_t seq) const {
    for (int r = static_cast<int>(threadIdx.x); r < kRows; r += kThreads) {
      const int64_t query = first_query + r;
      const bool inside = query < seq;
      lse_log2[r] = inside ? lse[row_offset + query] * kLog2E : 0.0f;
      dots[r] = inside ? dots_source[row_offset + query] : 0.0f;
    }
  }
};

// Stores the warp's 16 rows of a [16 x kD] fp32 accumulator (C fragments over 8-column tiles),
// times `scale`, as bf16 rows of a tensor (row stride ld) whose row 0 is `first_row`, the rows
// inside the sequence alone.
template <int kD>
__device__ inline void store_rows(__nv_bfloat16* base, int64_t ld, int64_t first_row, int64_t seq,
                                  const float (&accumulator)[kD / 8][4], float scale) {
  for (int half = 0; half < 2; ++half) {
    const int64_t row = first_row + lane_index() / 4 + 8 * half;
    if (row >= seq) continue;
    for (int n = 0; n < kD / 8; ++n) {
      __nv_bfloat16* destination = base + row * ld + 8 * n + 2 * (lane_index() % 4);
      destination[0] = __float2bfloat16_rn(accumulator[n][2 * half] * scale);
      destination[1] = __float2bfloat16_rn(accumulator[n][2 * half + 1] * scale);
    }
  }
}

// The dK, dV pass. Grid: x = batch * kv_heads, y = key tiles; each warp owns 16 keys and
// accumulates their dK and dV over the query heads of the key/value head's group in order and, for
// each, over the query tiles from the key tile's own (causal) to the last, in order. Shared memory:
// the K, V, Q and dO tiles, and the query tile's lse and dO . O.
template <int kD>
__global__ void __launch_bounds__(kThreads)
    key_gradients_kernel(__nv_bfloat16* __restrict__ grad_qkv, const __nv_bfloat16* __restrict__ grad_out,
                         const __nv_bfloat16* __restrict__ qkv, const float* __restrict__ lse,
                         const float* __restrict__ dots, Shape shape) {
  __nv_bfloat16* shared = dynamic_shared_memory<__nv_bfloat16>();
  const Tile<kD> k_tile{shared}, v_tile{shared + Tile<kD>::kElements}, q_tile{shared + 2 * Tile<kD>::kElements},
      grad_out_tile{shared + 3 * Tile<kD>::kElements};
  const QueryValues values{reinterpret_cast<float*>(shared + 4 * Tile<kD>::kElements),
                           reinterpret_cast<float*>(shared + 4 * Tile<kD>::kElements) + kRows};
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int64_t first_key = reversed_tile() * kRows;
  const auto [sequence, kv] = shape.block_kv_head();
  const int64_t ld = shape.qkv_ld();

  k_tile.load(qkv + shape.k_offset(sequence, kv), ld, first_key, shape.seq);
  v_tile.load(qkv + shape.v_offset(sequence, kv), ld, first_key, shape.seq);
  cp_async_commit_group();

  float grad_k[kD / 8][4] = {}, grad_v[kD / 8][4] = {};
  const int group_end = (kv + 1) * shape.group_size();
  for (int h = kv * shape.group_size(); h < group_end; ++h)
    for (int64_t first_query = first_key; first_query < shape.seq; first_query += kRows) {
      __syncthreads();  // the previous tiles' readers are done
      q_tile.load(qkv + shape.q_offset(sequence, h), ld, first_query, shape.seq);
      grad_out_tile.load(grad_out + shape.out_offset(sequence, h), shape.out_ld(), first_query, shape.seq);
      cp_async_commit_group();
      values.load(lse, dots, shape.lse_offset(sequence, h), first_query, shape.seq);
      cp_async_wait_group<0>();
      __syncthreads();

      // P^T and dP^T for the warp's 16 keys and the tile's 64 queries: K Q^T and V dO^T.
      float p[kRows / 8][4] = {}, grad_p[kRows / 8][4] = {};
      two_products(p, k_tile, q_tile, grad_p, v_tile, grad_out_tile, warp);
      probabilities<kRows, false>(p, first_key + 16 * warp, first_query, values.lse_log2, shape);
      // dS^T = P^T (dP^T - dO . O of the column's query).
      for (int n = 0; n < kRows / 8; ++n)
        for (int e = 0; e < 4; ++e)
          grad_p[n][e] = p[n][e] * (grad_p[n][e] - values.dots[8 * n + fragment_column(e)]);

      // dV += P^T dO and dK += dS^T Q, over the tile's queries 16 at a time.
      for (int k = 0; k < kRows / 16; ++k) {
        uint32_t p_a[4], grad_s_a[4];
        a_from_c(p_a, p[2 * k], p[2 * k + 1]);
        a_from_c(grad_s_a, grad_p[2 * k], grad_p[2 * k + 1]);
        for (int n = 0; n < kD / 8; ++n) {
          uint32_t b[2];
          b_fragment_by_columns(b, grad_out_tile, 16 * k, 8 * n);
          mma_m16n8k16_bf16(grad_v[n], p_a, b, grad_v[n]);
          b_fragment_by_columns(b, q_tile, 16 * k, 8 * n);
          mma_m16n8k16_bf16(grad_k[n], grad_s_a, b, grad_k[n]);
        }
      }
    }
  // dK = dS^T Q / sqrt(d): the scores' scale, which scale_log2 holds with log2(e).
  const float scale = shape.scale_log2 / kLog2E;
  store_rows<kD>(grad_qkv + shape.k_offset(sequence, kv), ld, first_key + 16 * warp, shape.seq, grad_k, scale);
  store_rows<kD>(grad_qkv + shape.v_offset(sequence, kv), ld, first_key + 16 * warp, shape.seq, grad_v, 1.0f);
}

// The dQ pass. Grid: x = batch * heads, y = query tiles; each warp owns 16 queries and accumulates
// their dQ over the key tiles up to the diagonal, in order. Shared memory: the Q, dO, K and V
// tiles, and the query tile's lse and dO . O.
template <int kD>
__global__ void __launch_bounds__(kThreads)
    query_gradients_kernel(__nv_bfloat16* __restrict__ grad_qkv, const __nv_bfloat16* __restrict__ grad_out,
                           const __nv_bfloat16* __restrict__ qkv, const float* __restrict__ lse,
                           const float* __restrict__ dots, Shape shape) {
  __nv_bfloat16* shared = dynamic_shared_memory<__nv_bfloat16>();
  const Tile<kD> q_tile{shared}, grad_out_tile{shared + Tile<kD>::kElements},
      k_tile{shared + 2 * Tile<kD>::kElements}, v_tile{shared + 3 * Tile<kD>::kElements};
  const QueryValues values{reinterpret_cast<float*>(shared + 4 * Tile<kD>::kElements),
                           reinterpret_cast<float*>(shared + 4 * Tile<kD>::kElements) + kRows};
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int64_t first_query = reversed_tile() * kRows;
  const auto [sequence, h] = shape.block_query_head();
  const __nv_bfloat16* k_head = qkv + shape.k_offset(sequence, shape.kv_head(h));
  const __nv_bfloat16* v_head = qkv + shape.v_offset(sequence, shape.kv_head(h));
  const int64_t ld = shape.qkv_ld();

  q_tile.load(qkv + shape.q_offset(sequence, h), ld, first_query, shape.seq);
  grad_out_tile.load(grad_out + shape.out_offset(sequence, h), shape.out_ld(), first_query, shape.seq);
  cp_async_commit_group();
  values.load(lse, dots, shape.lse_offset(sequence, h), first_query, shape.seq);

  float grad_q[kD / 8][4] = {};
  const int64_t key_end = min(shape.seq, first_query + kRows);
  for (int64_t first_key = 0; first_key < key_end; first_key += kRows) {
    __syncthreads();  // the previous tiles' readers are done
    k_tile.load(k_head, ld, first_key, shape.seq);
    v_tile.load(v_head, ld, first_key, shape.seq);
    cp_async_commit_group();
    cp_async_wait_group<0>();
    __syncthreads();

    // P and dP for the warp's 16 queries and the tile's 64 keys: Q K^T and dO V^T.
    float p[kRows / 8][4] = {}, grad_p[kRows / 8][4] = {};
    two_products(p, q_tile, k_tile, grad_p, grad_out_tile, v_tile, warp);
    probabilities<kRows, true>(p, first_query + 16 * warp, first_key, values.lse_log2 + 16 * warp, shape);
    // dS = P (dP - dO . O of the row's query).
    for (int n = 0; n < kRows / 8; ++n)
      for (int e = 0; e < 4; ++e) grad_p[n][e] = p[n][e] * (grad_p[n][e] - values.dots[16 * warp + fragment_row(e)]);

    // dQ += dS K, over the tile's keys 16 at a time.
    for (int k = 0; k < kRows / 16; ++k) {
      uint32_t grad_s_a[4];
      a_from_c(grad_s_a, grad_p[2 * k], grad_p[2 * k + 1]);
      for (int n = 0; n < kD / 8; ++n) {
        uint32_t b[2];
        b_fragment_by_columns(b, k_tile, 16 * k, 8 * n);
        mma_m16n8k16_bf16(grad_q[n], grad_s_a, b, grad_q[n]);
      }
    }
  }
  store_rows<kD>(grad_qkv + shape.q_offset(sequence, h), ld, first_query + 16 * warp, shape.seq, grad_q,
                 shape.scale_log2 / kLog2E);
}

// body(std::integral_constant<int, kD>) for a head size the tensor-core kernels take.
template <typename Body>
void with_head_size(int64_t head_size, Body body) {
  switch (head_size) {
    case 16: body(std::integral_constant<int, 16>{}); break;
    case 32: body(std::integral_constant<int, 32>{}); break;
    case 64: body(std::integral_constant<int, 64>{}); break;
    default: body(std::integral_constant<int, 128>{}); break;
  }
}

Shape shape_of(const AttentionShape& shape) {
  return {attention_layout(shape), kLog2E / std::sqrt(static_cast<float>(shape.head_size))};
}

// batch * heads blocks across (a query head's, or with kv_heads a key/value head's), the tiles of
// the sequence down.
dim3 grid_of(int64_t batch, int64_t seq, int64_t heads) {
  return dim3(static_cast<unsigned int>(batch * heads), static_cast<unsigned int>(ceil_div(seq, kRows)));
}

template <int kD>
constexpr size_t tiles_bytes(int tiles) {
  return static_cast<size_t>(tiles) * Tile<kD>::kElements * sizeof(__nv_bfloat16);
}

}  // namespace

bool flash_attention_usable(ElementType type, const AttentionShape& shape, std::initializer_list<const void*> tensors) {
  return type == ElementType::kBf16 && head_size_supported(shape.head_size) && aligned_to(16, tensors);
}

void flash_attention_forward(cudaStream_t stream, __nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv,
                             const AttentionShape& shape) {
  with_head_size(shape.head_size, [&](auto head_size) {
    constexpr int kD = head_size();
    constexpr size_t kShared = tiles_bytes<kD>(3);
    static const bool allowed = (allow_shared_memory(forward_kernel<kD>, kShared), true);
    static_cast<void>(allowed);
    launch_with_shared_memory(stream, grid_of(shape.batch, shape.seq, shape.heads), kThreads, kShared,
                              forward_kernel<kD>, out, lse, qkv, shape_of(shape));
  });
}

// Overwrites grad_qkv: the dK, dV pass writes every key's rows, the dQ pass every query's.
void flash_attention_backward(cudaStream_t stream, __nv_bfloat16* grad_qkv, const __nv_bfloat16* grad_out,
                              const __nv_bfloat16* qkv, const __nv_bfloat16* out, const float* lse,
                              const AttentionShape& shape) {
  const Shape kernel_shape = shape_of(shape);
  const int64_t rows = shape.batch * shape.heads * shape.seq;
  float* dots = scratch_of(stream).intermediates.get<float>(static_cast<size_t>(rows) * sizeof(float), stream);
  with_head_size(shape.head_size, [&](auto head_size) {
    constexpr int kD = head_size();
    constexpr size_t kShared = tiles_bytes<kD>(4) + 2 * kRows * sizeof(float);
    static const bool allowed = (allow_shared_memory(key_gradients_kernel<kD>, kShared),
                                 allow_shared_memory(query_gradients_kernel<kD>, kShared), true);
    static_cast<void>(allowed);
    launch(stream, blocks_for_rows(rows), kBlockThreads, output_dot_kernel<kD>, dots, grad_out, out, rows,
           kernel_shape);
    launch_with_shared_memory(stream, grid_of(shape.batch, shape.seq, shape.kv_heads), kThreads, kShared,
                              key_gradients_kernel<kD>, grad_qkv, grad_out, qkv, lse, dots, kernel_shape);
    launch_with_shared_memory(stream, grid_of(shape.batch, shape.seq, shape.heads), kThreads, kShared,
                              query_gradients_kernel<kD>, grad_qkv, grad_out, qkv, lse, dots, kernel_shape);
  });
}

}  // namespace trainctl::cuda_kernels
