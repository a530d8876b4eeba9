// What the CUDA kernels share: launch shapes, grid-stride indexing (over elements, packs of
// elements, warps per row, or a thread per column and the rows over blocks, so that no index is
// divided per element), the element types of activations (float and bf16, widened to float to
// compute and rounded once to store) moved a pack at a time as one vector access where a run-time
// check of the pointers says every access is aligned, and the deterministic reductions
// (fixed-order warp and block sums; the last block of a grid combining every block's partial
// result; column sums of a matrix into gradients), which make each op give bitwise the same
// result on every run.
#pragma once

#include <cuda_runtime.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "cuda/cuda_check.h"
#include "cuda/cuda_ops.h"
#include "cuda/device_scratch.h"

namespace trainctl::cuda_kernels {

constexpr int kWarpSize = 32;
constexpr int kBlockThreads = 256;
constexpr int kBlockWarps = kBlockThreads / kWarpSize;
// Enough blocks of kBlockThreads to fill an H200 (132 SMs x 2048 threads) in one wave. Grids
// depend on the problem size alone, never on the GPU, so a reduction adds in the same order on
// any GPU and any run.
constexpr int64_t kMaxBlocks = 1024;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks of kBlockThreads for a grid-stride loop over n elements (n > 0).
inline unsigned int blocks_for(int64_t n) {
  return static_cast<unsigned int>(std::min(ceil_div(n, kBlockThreads), kMaxBlocks));
}

__device__ inline int64_t grid_thread_index() { return blockIdx.x * int64_t{blockDim.x} + threadIdx.x; }
__device__ inline int64_t grid_thread_count() { return gridDim.x * int64_t{blockDim.x}; }

// Blocks of kBlockThreads for a kernel with a warp per row (rows > 0): warp w of the grid takes
// rows w, w + grid_warp_count(), ... All lanes of a warp go through the same rows, so the warp's
// shuffles are reached by all of them.
inline unsigned int blocks_for_rows(int64_t rows) {
  return static_cast<unsigned int>(std::min(ceil_div(rows, kBlockWarps), kMaxBlocks));
}
__device__ inline int64_t grid_warp_index() { return blockIdx.x * int64_t{kBlockWarps} + threadIdx.x / kWarpSize; }
__device__ inline int64_t grid_warp_count() { return gridDim.x * int64_t{kBlockWarps}; }
__device__ inline int lane_index() { return static_cast<int>(threadIdx.x % kWarpSize); }

// Launches kernel(args...) on `stream` as `grid` blocks of `block` threads with `shared_bytes` of
// dynamic shared memory (tensor_cores.cuh's dynamic_shared_memory; over 48 KiB only for a kernel
// that allow_shared_memory has allowed it), through CUDA's templated cudaLaunchKernelEx: the
// toolkit's under nvcc, the CPU implementation's (cuda_on_cpu/) under the host compiler, so that
// one source builds for both. Every launch of kernels/cuda goes through here.
template <typename... Params, typename... Args>
void launch_with_shared_memory(cudaStream_t stream, dim3 grid, dim3 block, size_t shared_bytes,
                               void (*kernel)(Params...), Args... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...));
}

// Lets `kernel` launch with up to `bytes` of dynamic shared memory: above 48 KiB a kernel must be
// allowed it (cudaFuncAttributeMaxDynamicSharedMemorySize), once, before its first launch.
template <typename... Params>
void allow_shared_memory(void (*kernel)(Params...), size_t bytes) {
  if (bytes > 48 * 1024)
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

// The same with no dynamic shared memory.
template <typename... Params, typename... Args>
void launch(cudaStream_t stream, dim3 grid, dim3 block, void (*kernel)(Params...), Args... args) {
  launch_with_shared_memory(stream, grid, block, 0, kernel, args...);
}

// Launches kernel(args...) with blocks_for(n) blocks of kBlockThreads on `stream`; nothing to do
// for n == 0 (a grid of no blocks is a launch error).
template <typename... Params, typename... Args>
void launch_over(cudaStream_t stream, int64_t n, void (*kernel)(Params...), Args... args) {
  if (n == 0) return;
  launch(stream, blocks_for(n), kBlockThreads, kernel, args...);
}

// body(std::type_identity<T>{}) for the device type T of `type`'s elements: float, or
// __nv_bfloat16 (a Bf16's bits).
template <typename Body>
void with_element_type(ElementType type, Body body) {
  if (type == ElementType::kBf16)
    body(std::type_identity<__nv_bfloat16>{});
  else
    body(std::type_identity<float>{});
}

// The element type of an op's typed tensors, which must all have one (train.precision stores every
// activation in it); absent (null) ones have none. Throws std::invalid_argument naming the op
// otherwise.
inline ElementType one_element_type(const char* op, std::initializer_list<ConstTypedPtr> tensors) {
  std::optional<ElementType> type;
  for (const ConstTypedPtr& tensor : tensors) {
    if (!tensor) continue;
    if (type && *type != tensor.type)
      throw std::invalid_argument(std::string(op) + " on CUDA: typed tensors of different element types");
    type = tensor.type;
  }
  return type.value_or(ElementType::kF32);
}

// A typed tensor's pointer as its device type.
template <typename T>
T* typed(TypedPtr x) {
  return static_cast<T*>(x.data);
}
template <typename T>
const T* typed(ConstTypedPtr x) {
  return static_cast<const T*>(x.data);
}

// An element as a float (exact), and a float as an element (bf16: rounded to nearest, ties to
// even, as the CPU's to_bf16).
__device__ inline float widen(float x) { return x; }
__device__ inline float widen(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T>
__device__ inline T narrow(float x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(x);
  else
    return x;
}

// kWidth consecutive elements as floats, to compute with.
template <int kWidth>
struct Floats {
  float v[kWidth];
};

// kWidth consecutive elements of type T as stored, moved by one access of kWidth * sizeof(T)
// bytes (the address is then that aligned): a float4 for four floats, eight bf16s in the same 16
// bytes.
template <typename T, int kWidth>
struct alignas(kWidth * sizeof(T)) Elements {
  T v[kWidth];
};

template <int kWidth, typename T>
__device__ inline Floats<kWidth> load_floats(const T* address) {
  const Elements<T, kWidth> stored = *reinterpret_cast<const Elements<T, kWidth>*>(address);
  Floats<kWidth> values;
  for (int j = 0; j < kWidth; ++j) values.v[j] = widen(stored.v[j]);
  return values;
}

template <int kWidth, typename T>
__device__ inline void store_floats(T* address, const Floats<kWidth>& values) {
  Elements<T, kWidth> stored;
  for (int j = 0; j < kWidth; ++j) stored.v[j] = narrow<T>(values.v[j]);
  *reinterpret_cast<Elements<T, kWidth>*>(address) = stored;
}

// The elements of T that one 16-byte access moves: 4 floats, 8 bf16s.
template <typename T>
constexpr int kVectorWidth = 16 / static_cast<int>(sizeof(T));

// Whether each of `pointers` (null is) is `bytes`-byte aligned, so that accesses of that many
// bytes there are whole vectors.
inline bool aligned_to(size_t bytes, std::initializer_list<const void*> pointers) {
  bool aligned = true;
  for (const void* pointer : pointers) aligned = aligned && reinterpret_cast<uintptr_t>(pointer) % bytes == 0;
  return aligned;
}

// body(std::integral_constant<int, kWidth>{}) when `vector`, else
// body(std::integral_constant<int, 1>{}), the scalar path.
template <int kWidth, typename Body>
void with_width(bool vector, Body body) {
  if (vector)
    body(std::integral_constant<int, kWidth>{});
  else
    body(std::integral_constant<int, 1>{});
}

// with_width for rows of `cols` elements of T at each of `rows`: kVectorWidth<T> when every row
// starts 16-byte aligned (then a row is whole vectors).
template <typename T, typename Body>
void with_vector_width(int64_t cols, std::initializer_list<const void*> rows, Body body) {
  with_width<kVectorWidth<T>>(cols % kVectorWidth<T> == 0 && aligned_to(16, rows), body);
}

// with_width for vectors of any length of T, which for_each_pack goes over: kVectorWidth<T> when
// each of `vectors` starts 16-byte aligned.
template <typename T, typename Body>
void with_pack_width(std::initializer_list<const void*> vectors, Body body) {
  with_width<kVectorWidth<T>>(aligned_to(16, vectors), body);
}

// The grid-stride loop of an elementwise kernel over n elements, kWidth at a time:
// body(i, std::integral_constant<int, kWidth>{}) for each whole pack, i its first element; then,
// for kWidth > 1, body(i, std::integral_constant<int, 1>{}) for each of the last n % kWidth
// elements, a thread each (a grid has more than seven threads). Launched over
// ceil_div(n, kWidth) threads (launch_over); a thread divides nothing but n, once.
template <int kWidth, typename Body>
__device__ void for_each_pack(int64_t n, Body body) {
  const int64_t whole = n - n % kWidth;
  const int64_t step = grid_thread_count() * kWidth;
  for (int64_t i = grid_thread_index() * kWidth; i < whole; i += step) body(i, std::integral_constant<int, kWidth>{});
  if constexpr (kWidth > 1) {
    const int64_t i = whole + grid_thread_index();
    if (i < n) body(i, std::integral_constant<int, 1>{});
  }
}

// Kernels over a matrix of `rows` rows of `packs` packs of columns (a pack: kWidth floats) with a
// thread per pack and the rows over blocks: blocks of (x: a column tile's packs, y: row lanes),
// grids of (x: column tiles, y: row blocks). A thread keeps its columns, and what depends on them
// alone (a bias), over every row it takes: row_tile_first_row(), then row_tile_row_step() further
// each time. A tile is a power of two of packs up to a warp (a warp then takes whole rows of a
// narrow matrix, next to each other), else whole warps (each within one row, reading 32
// consecutive packs), as even as whole warps make them (less than a warp idle per tile). A grid
// is at most one wave (the threads of kMaxBlocks blocks of kBlockThreads) and gives each thread
// kRowTileRowsPerThread rows or more where the matrix has them, so that what a thread keeps is
// used again.
constexpr int64_t kRowTileRowsPerThread = 4;

struct RowTileLaunch {
  dim3 grid, block;
};

// For rows > 0 and packs > 0.
inline RowTileLaunch row_tile_launch(int64_t rows, int64_t packs) {
  int64_t tiles = 1, tile = 0;
  if (packs < kWarpSize) {
    tile = static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(packs)));
  } else {
    tiles = ceil_div(packs, kBlockThreads);
    tile = ceil_div(ceil_div(packs, tiles), kWarpSize) * kWarpSize;
  }
  const int64_t row_lanes = kBlockThreads / tile;
  const int64_t max_row_blocks = std::max(int64_t{1}, kMaxBlocks * kBlockThreads / (tile * row_lanes) / tiles);
  const int64_t row_blocks =
      std::min({ceil_div(rows, row_lanes * kRowTileRowsPerThread), max_row_blocks, int64_t{65535}});
  return {dim3(static_cast<unsigned int>(tiles), static_cast<unsigned int>(row_blocks)),
          dim3(static_cast<unsigned int>(tile), static_cast<unsigned int>(row_lanes))};
}

__device__ inline int64_t row_tile_pack() { return blockIdx.x * int64_t{blockDim.x} + threadIdx.x; }
__device__ inline int64_t row_tile_first_row() { return blockIdx.y * int64_t{blockDim.y} + threadIdx.y; }
__device__ inline int64_t row_tile_row_step() { return gridDim.y * int64_t{blockDim.y}; }

// Sum over the warp by an xor butterfly: every lane ends with the same bits, since each pairwise
// sum is the same in either order, and the pairing is fixed.
template <typename T>
__device__ T warp_sum(T value) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// Sum over a one-dimensional block of kBlockThreads threads, in a fixed order; every thread gets it.
template <typename T>
__device__ T block_sum(T value) {
  __shared__ T warp_sums[kBlockWarps];
  value = warp_sum(value);
  if (threadIdx.x % kWarpSize == 0) warp_sums[threadIdx.x / kWarpSize] = value;
  __syncthreads();
  T total = warp_sums[0];
  for (int warp = 1; warp < kBlockWarps; ++warp) total += warp_sums[warp];
  __syncthreads();  // warp_sums is free for the next call
  return total;
}

// Called by every thread of each of the `blocks` blocks of a grid after it stored its partial
// result: true, in all threads of the block, for the block that finished last. That block then
// combines every partial in a fixed order, so the result does not depend on which block it was;
// it reads the partials with __ldcg (from L2: L1 is not coherent between blocks). The counter
// starts at zero and is left at zero for the next launch.
__device__ inline bool finished_last(unsigned int* counter, unsigned int blocks) {
  __shared__ bool is_last;
  __threadfence();  // this thread's partial is visible device-wide before its block counts itself done
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    is_last = atomicAdd(counter, 1u) == blocks - 1;
    if (is_last) {
      *counter = 0;
      __threadfence();
    }
  }
  __syncthreads();
  return is_last;
}

// Column sums: a kernel that sums a [rows, cols] matrix over its rows into per-column
// gradients (a bias; LayerNorm's weight and bias), without float atomics and in a fixed order.
// Its blocks are 32 columns by 8 row lanes, so that each warp reads 32 consecutive floats of a
// row. A block covers a range of rows of its column tile: each thread sums its rows in order, the
// block adds its lanes' sums in lane order; with more than one row block, each block stores its
// sums and the last of the tile to finish adds them in row-block order. The call's sums are
// formed first and added to the gradient once, as the CPU reference adds them
// (zeroed_column_sums, add_column_sums). A block covers kColumnSumRowsPerBlock rows, or more
// where that would make over kColumnSumMaxRowBlocks per tile (the last block's sum over them
// grows) or kColumnSumMaxBlocks in all (a few waves fill the GPU; the partial sums stay small).
constexpr int kColumnSumTile = kWarpSize;
constexpr int kColumnSumLanes = kBlockThreads / kColumnSumTile;
constexpr int64_t kColumnSumRowsPerBlock = 64;
constexpr int64_t kColumnSumMaxRowBlocks = 256;
constexpr int64_t kColumnSumMaxBlocks = 4096;

// A column-sum kernel's shape and scratch, passed to it by value.
struct ColumnSums {
  int64_t rows, cols, rows_per_block;
  float* partials;         // [row block][sum][cols]; null with one row block
  unsigned int* counters;  // one per column tile, zero between launches
};

struct ColumnSumLaunch {
  dim3 grid, block;
  ColumnSums sums;
};

// The launch of a kernel that forms `sums` column sums of [rows, cols] (both > 0) through
// sum_columns, with scratch from `stream`'s.
inline ColumnSumLaunch column_sum_launch(cudaStream_t stream, int64_t rows, int64_t cols, int sums) {
  const int64_t column_tiles = ceil_div(cols, kColumnSumTile);
  const int64_t row_blocks = std::min({ceil_div(rows, kColumnSumRowsPerBlock), kColumnSumMaxRowBlocks,
                                       std::max(int64_t{1}, kColumnSumMaxBlocks / column_tiles)});
  ColumnSums shape{rows, cols, ceil_div(rows, row_blocks), nullptr, nullptr};
  if (row_blocks > 1) {
    StreamScratch& scratch = scratch_of(stream);
    shape.partials =
        scratch.reduction_partials.get<float>(static_cast<size_t>(row_blocks * sums * cols) * sizeof(float), stream);
    shape.counters =
        scratch.block_counters.get<unsigned int>(static_cast<size_t>(column_tiles) * sizeof(unsigned int), stream);
  }
  return {dim3(static_cast<unsigned int>(column_tiles), static_cast<unsigned int>(row_blocks)),
          dim3(kColumnSumTile, kColumnSumLanes), shape};
}

// The body of a column-sum kernel, run by every thread of the block: element(row, column, sums)
// for each element of the thread's share, which does the kernel's elementwise work and adds the
// element's terms to sums[0, kSums); then gradients[s][column] += the column's sum s over all
// rows. It returns early in the blocks that leave the adding to another, so the kernel does
// nothing after it.
template <int kSums, typename Element>
__device__ void sum_columns(const ColumnSums& shape, float* const (&gradients)[kSums], Element element) {
  __shared__ float lane_sums[kSums][kColumnSumLanes][kColumnSumTile];
  const int64_t column = blockIdx.x * int64_t{kColumnSumTile} + threadIdx.x;
  const bool in_matrix = column < shape.cols;
  const int64_t first_row = blockIdx.y * shape.rows_per_block;
  const int64_t end_row =
      first_row + shape.rows_per_block < shape.rows ? first_row + shape.rows_per_block : shape.rows;
  float sums[kSums] = {};
  if (in_matrix)
    for (int64_t row = first_row + threadIdx.y; row < end_row; row += kColumnSumLanes) element(row, column, sums);

  // Replaces each of a thread's sums by the sum over the row lanes of its column, in lane order.
  auto sum_lanes = [&](float (&values)[kSums]) {
    for (int s = 0; s < kSums; ++s) lane_sums[s][threadIdx.y][threadIdx.x] = values[s];
    __syncthreads();
    for (int s = 0; s < kSums; ++s) {
      float total = lane_sums[s][0][threadIdx.x];
      for (int lane = 1; lane < kColumnSumLanes; ++lane) total += lane_sums[s][lane][threadIdx.x];
      values[s] = total;
    }
    __syncthreads();  // lane_sums is free for the next call
  };
  sum_lanes(sums);
  const bool writes_column = threadIdx.y == 0 && in_matrix;
  if (gridDim.y == 1) {
    if (writes_column)
      for (int s = 0; s < kSums; ++s) gradients[s][column] += sums[s];
    return;
  }
  if (writes_column)
    for (int s = 0; s < kSums; ++s) shape.partials[(blockIdx.y * int64_t{kSums} + s) * shape.cols + column] = sums[s];
  if (!finished_last(&shape.counters[blockIdx.x], gridDim.y)) return;
  float totals[kSums] = {};
  if (in_matrix)
    for (int64_t row_block = threadIdx.y; row_block < gridDim.y; row_block += kColumnSumLanes)
      for (int s = 0; s < kSums; ++s)
        totals[s] += __ldcg(&shape.partials[(row_block * kSums + s) * shape.cols + column]);
  sum_lanes(totals);
  if (writes_column)
    for (int s = 0; s < kSums; ++s) gradients[s][column] += totals[s];
}

}  // namespace trainctl::cuda_kernels
