// The CUDA embedding family: GPT-2's token plus position embedding, or a Llama's token embedding
// alone (wpe null), forward and backward. The forward is a warp per position adding its token's
// row of wte to its position's row of wpe (or copying it).
// The backward adds without float atomics and in the CPU reference's order (kernels/cpu/
// embedding.cpp), so it matches it bitwise: each row of grad_wte takes the rows of grad_out of
// the positions holding its token, one at a time in increasing position, onto its current value;
// each row of grad_wpe takes its position's rows batch by batch. Which positions share a token is
// found on the device, since the op has only device pointers and the host must not wait: a first
// kernel links every position to the next one with the same token and marks the first occurrence
// of each, comparing every pair of tokens through shared-memory tiles ((batch * seq)^2
// comparisons: 67 million at 8 x 1024 tokens, an estimated few tens of microseconds, not yet
// measured); a second walks each first occurrence's chain, a thread per four channels (one where
// rows are not whole aligned float4s).
#include <algorithm>
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda/cuda_ops.h"
#include "cuda/kernel_common.cuh"

namespace trainctl::cuda_kernels {

namespace {

// A warp per position p = b * seq + t: out[p,:] = wte[tokens[p],:] + wpe[t,:] (or wte's row alone,
// wpe null), kWidth channels per load.
template <int kWidth>
__global__ void embedding_forward_kernel(float* __restrict__ out, const int32_t* __restrict__ tokens,
                                         const float* __restrict__ wte, const float* __restrict__ wpe,
                                         int64_t positions, int64_t seq, int64_t channels) {
  const int lane = lane_index();
  const int64_t packs = channels / kWidth;
  for (int64_t p = grid_warp_index(); p < positions; p += grid_warp_count()) {
    const float* token_row = wte + int64_t{tokens[p]} * channels;
    float* out_row = out + p * channels;
    if (wpe == nullptr) {
      for (int64_t k = lane; k < packs; k += kWarpSize)
        store_floats<kWidth>(out_row + k * kWidth, load_floats<kWidth>(token_row + k * kWidth));
      continue;
    }
    const float* position_row = wpe + (p % seq) * channels;  // once per row, not per element
    for (int64_t k = lane; k < packs; k += kWarpSize) {
      const Floats<kWidth> token = load_floats<kWidth>(token_row + k * kWidth);
      const Floats<kWidth> position = load_floats<kWidth>(position_row + k * kWidth);
      Floats<kWidth> sum;
      for (int j = 0; j < kWidth; ++j) sum.v[j] = token.v[j] + position.v[j];
      store_floats<kWidth>(out_row + k * kWidth, sum);
    }
  }
}

// A position's link to the next position with the same token (-1 after the last), and whether
// it is the first position with its token.
struct TokenLink {
  int64_t next;
  int32_t is_first;
};

// Blocks of two warps, so that the 8 x 1024 positions of a GPT-2 step spread over 128 SMs.
constexpr int kLinkThreads = 2 * kWarpSize;

// A thread per position: the block's threads go over all the tokens together, a tile at a time
// through shared memory (each token read by every thread of the block at once), in increasing
// position, so the first equal token after a thread's own is its next.
__global__ void link_equal_tokens_kernel(TokenLink* __restrict__ links, const int32_t* __restrict__ tokens,
                                         int64_t positions) {
  __shared__ int32_t tile[kLinkThreads];
  const int64_t p = grid_thread_index();
  const bool is_position = p < positions;
  const int32_t token = is_position ? tokens[p] : 0;
  int64_t next = -1;
  bool is_first = true;
  for (int64_t tile_start = 0; tile_start < positions; tile_start += kLinkThreads) {
    __syncthreads();  // the previous tile's readers are done
    const int64_t q = tile_start + threadIdx.x;
    if (q < positions) tile[threadIdx.x] = tokens[q];
    __syncthreads();
    const int tile_size =
        positions - tile_start < kLinkThreads ? static_cast<int>(positions - tile_start) : kLinkThreads;
    for (int j = 0; j < tile_size; ++j) {
      if (tile[j] != token) continue;
      const int64_t other = tile_start + j;
      if (other < p) is_first = false;
      if (other > p && next < 0) next = other;
    }
  }
  if (is_position) links[p] = {next, is_first ? 1 : 0};
}

// A thread per (row, `width` channels): grid x = rows, y = blocks of channels; threads past the
// row's end do nothing (no barriers follow). Rows and channels within check_backward_shape's.
struct RowLaunch {
  dim3 grid, block;
};

RowLaunch row_launch(int64_t rows, int64_t channels, int width) {
  const int64_t units = channels / width;
  const int64_t threads = std::min(int64_t{kBlockThreads}, ceil_div(units, kWarpSize) * kWarpSize);
  return {dim3(static_cast<unsigned int>(rows), static_cast<unsigned int>(ceil_div(units, threads))),
          dim3(static_cast<unsigned int>(threads))};
}

__device__ inline int64_t row_channel(int width) { return (blockIdx.y * int64_t{blockDim.x} + threadIdx.x) * width; }

// Grid x = positions: the block of each first occurrence walks its token's chain, adding the
// rows of grad_out in increasing position onto grad_wte's row; the others have nothing to do.
template <int kWidth>
__global__ void accumulate_token_rows_kernel(float* __restrict__ grad_wte, const float* __restrict__ grad_out,
                                             const int32_t* __restrict__ tokens, const TokenLink* __restrict__ links,
                                             int64_t channels) {
  const int64_t first = blockIdx.x;
  const int64_t c = row_channel(kWidth);
  if (c >= channels || links[first].is_first == 0) return;
  float* row = grad_wte + int64_t{tokens[first]} * channels + c;
  Floats<kWidth> sum = load_floats<kWidth>(row);
  for (int64_t p = first; p >= 0; p = links[p].next) {
    const Floats<kWidth> g = load_floats<kWidth>(grad_out + p * channels + c);
    for (int j = 0; j < kWidth; ++j) sum.v[j] += g.v[j];
  }
  store_floats<kWidth>(row, sum);
}

// Grid x = seq: grad_wpe's row t takes grad_out's rows (b, t) for b = 0, 1, ... in order.
template <int kWidth>
__global__ void accumulate_position_rows_kernel(float* __restrict__ grad_wpe, const float* __restrict__ grad_out,
                                                int64_t batch, int64_t seq, int64_t channels) {
  const int64_t t = blockIdx.x;
  const int64_t c = row_channel(kWidth);
  if (c >= channels) return;
  float* row = grad_wpe + t * channels + c;
  Floats<kWidth> sum = load_floats<kWidth>(row);
  const float* g_row = grad_out + t * channels + c;
  for (int64_t b = 0; b < batch; ++b, g_row += seq * channels) {
    const Floats<kWidth> g = load_floats<kWidth>(g_row);
    for (int j = 0; j < kWidth; ++j) sum.v[j] += g.v[j];
  }
  store_floats<kWidth>(row, sum);
}

// The grids of embedding_backward: positions in x (at most INT_MAX blocks), blocks of channels
// in y (at most 65535).
void check_backward_shape(int64_t positions, int64_t channels) {
  if (positions > INT_MAX || ceil_div(channels, kBlockThreads) > 65535)
    throw std::invalid_argument("embedding_backward on CUDA: " + std::to_string(positions) + " positions of " +
                                std::to_string(channels) + " channels, over its grid's limits");
}

}  // namespace

void embedding_forward(Stream stream, float* out, const int32_t* tokens, const float* wte, const float* wpe,
                       int64_t batch, int64_t seq, int64_t channels) {
  const int64_t positions = batch * seq;
  if (positions == 0 || channels == 0) return;
  with_vector_width<float>(channels, {out, wte, wpe}, [&](auto width) {
    launch(cuda_stream(stream), blocks_for_rows(positions), kBlockThreads, embedding_forward_kernel<width()>, out,
           tokens, wte, wpe, positions, seq, channels);
  });
}

void embedding_backward(Stream stream, float* grad_wte, float* grad_wpe, const float* grad_out, const int32_t* tokens,
                        int64_t batch, int64_t seq, int64_t channels) {
  const int64_t positions = batch * seq;
  if (positions == 0 || channels == 0) return;
  check_backward_shape(positions, channels);
  const cudaStream_t cuda = cuda_stream(stream);
  auto* links = scratch_of(cuda).intermediates.get<TokenLink>(static_cast<size_t>(positions) * sizeof(TokenLink), cuda);
  launch(cuda, static_cast<unsigned int>(ceil_div(positions, kLinkThreads)), kLinkThreads, link_equal_tokens_kernel,
         links, tokens, positions);
  with_vector_width<float>(channels, {grad_wte, grad_out}, [&](auto width) {
    const RowLaunch shape = row_launch(positions, channels, width());
    launch(cuda, shape.grid, shape.block, accumulate_token_rows_kernel<width()>, grad_wte, grad_out, tokens, links,
           channels);
  });
  if (grad_wpe == nullptr) return;
  with_vector_width<float>(channels, {grad_wpe, grad_out}, [&](auto width) {
    const RowLaunch shape = row_launch(seq, channels, width());
    launch(cuda, shape.grid, shape.block, accumulate_position_rows_kernel<width()>, grad_wpe, grad_out, batch, seq,
           channels);
  });
}

}  // namespace trainctl::cuda_kernels
