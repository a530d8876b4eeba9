// The CUDA elementwise family: the fused bias + activation ops and the residual add. The
// bias_act forward adds the bias and applies the activation; the backward multiplies by the
// activation's derivative and sums grad_bias over rows in the same kernel, deterministically
// (fixed-order sums per block, then the last block adds the blocks' sums in order: no float
// atomics). The arithmetic is the CPU reference's (kernels/cpu/elementwise.cpp), operation for
// operation (and uncontracted: --fmad=false), so ReLU, the identity and add match it bitwise, and
// the GELUs differ only by erff, expf and tanhf, which are not correctly rounded on either side.
#include <algorithm>
#include <cstdint>

#include "cuda/cuda_ops.h"
#include "cuda/kernel_common.cuh"

namespace trainctl::cuda_kernels {

namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kGeluTanhCubic = 0.044715f;

struct Identity {
  __device__ static float forward(float z) { return z; }
  __device__ static float derivative(float, float) { return 1.0f; }
};
struct Relu {
  __device__ static float forward(float z) { return z > 0.0f ? z : 0.0f; }
  __device__ static float derivative(float z, float) { return z > 0.0f ? 1.0f : 0.0f; }
};
// The exact erf form: gelu(z) = z * cdf(z).
struct Gelu {
  __device__ static float forward(float z) { return 0.5f * z * (1.0f + erff(z * kInvSqrt2)); }
  // gelu'(z) = cdf(z) + z * pdf(z), with cdf(z) = out / z recovered from the forward's output;
  // cdf(0) = 0.5, where out / z has no value.
  __device__ static float derivative(float z, float out) {
    const float cdf = z != 0.0f ? out / z : 0.5f;
    return cdf + z * kInvSqrt2Pi * expf(-0.5f * z * z);
  }
};
// GPT-2's tanh approximation: 0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3))).
struct GeluTanh {
  __device__ static float forward(float z) {
    const float inner = kSqrt2OverPi * (z + kGeluTanhCubic * (z * z * z));
    return 0.5f * z * (1.0f + tanhf(inner));
  }
  // From z alone (out is not enough to recover tanh): d/dz of the above.
  __device__ static float derivative(float z, float) {
    const float z_squared = z * z;
    const float tanh_inner = tanhf(kSqrt2OverPi * (z + kGeluTanhCubic * (z_squared * z)));
    const float inner_derivative = kSqrt2OverPi * (1.0f + 3.0f * kGeluTanhCubic * z_squared);
    return 0.5f * (1.0f + tanh_inner) + 0.5f * z * (1.0f - tanh_inner * tanh_inner) * inner_derivative;
  }
};

template <typename Body>
void with_activation(Activation act, Body body) {
  switch (act) {
    case Activation::kRelu: body(Relu{}); break;
    case Activation::kGelu: body(Gelu{}); break;
    case Activation::kGeluTanh: body(GeluTanh{}); break;
    case Activation::kNone: body(Identity{}); break;
  }
}

// out may be z itself: each element is read before it is written, by the same thread.
template <typename Act>
__global__ void bias_act_forward_kernel(float* z, const float* __restrict__ bias, float* out, int64_t rows,
                                        int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = grid_thread_index(); i < n; i += grid_thread_count()) {
    const float biased = z[i] + bias[i % cols];
    z[i] = biased;
    out[i] = Act::forward(biased);
  }
}

// The backward's blocks are 32 columns by 8 row lanes: each warp reads 32 consecutive floats of a
// row. A block covers kRowsPerBlock rows of its column tile, or more where that would make over
// kMaxRowBlocks per tile (the last block's sum over them grows) or kMaxBackwardBlocks in all
// (a few waves fill the GPU, and the partial sums stay under 1 MiB).
constexpr int kTileColumns = kWarpSize;
constexpr int kRowLanes = kBlockThreads / kTileColumns;
constexpr int64_t kRowsPerBlock = 64;
constexpr int64_t kMaxRowBlocks = 256;
constexpr int64_t kMaxBackwardBlocks = 4096;

// grad_z may be grad_out itself: each element is read before it is written, by the same thread.
// With one row block, the block adds its sums to grad_bias directly; with more, each stores its
// sums in partials[row_block][column] and the last block of each column tile adds them in order.
template <typename Act>
__global__ void bias_act_backward_kernel(const float* grad_out, const float* __restrict__ z,
                                         const float* __restrict__ out, float* grad_z, float* __restrict__ grad_bias,
                                         int64_t rows, int64_t cols, int64_t rows_per_block, float* partials,
                                         unsigned int* counters) {
  __shared__ float lane_sums[kRowLanes][kTileColumns];
  const int64_t column = blockIdx.x * int64_t{kTileColumns} + threadIdx.x;
  const int64_t first_row = blockIdx.y * rows_per_block;
  const int64_t end_row = first_row + rows_per_block < rows ? first_row + rows_per_block : rows;
  float sum = 0.0f;
  if (column < cols) {
    for (int64_t row = first_row + threadIdx.y; row < end_row; row += kRowLanes) {
      const int64_t i = row * cols + column;
      const float g = grad_out[i] * Act::derivative(z[i], out[i]);
      grad_z[i] = g;
      sum += g;
    }
  }
  // Sums the row lanes' sums of each column, in lane order; every thread of the column gets it.
  auto column_sum = [&](float lane_sum) {
    lane_sums[threadIdx.y][threadIdx.x] = lane_sum;
    __syncthreads();
    float total = lane_sums[0][threadIdx.x];
    for (int lane = 1; lane < kRowLanes; ++lane) total += lane_sums[lane][threadIdx.x];
    __syncthreads();
    return total;
  };
  const float block_sum_of_column = column_sum(sum);
  if (gridDim.y == 1) {
    if (threadIdx.y == 0 && column < cols) grad_bias[column] += block_sum_of_column;
    return;
  }
  if (threadIdx.y == 0 && column < cols) partials[blockIdx.y * cols + column] = block_sum_of_column;
  if (!finished_last(&counters[blockIdx.x], gridDim.y)) return;
  float partial_sum = 0.0f;
  if (column < cols)
    for (int64_t row_block = threadIdx.y; row_block < gridDim.y; row_block += kRowLanes)
      partial_sum += __ldcg(&partials[row_block * cols + column]);
  const float total = column_sum(partial_sum);
  if (threadIdx.y == 0 && column < cols) grad_bias[column] += total;
}

// out may be a or b: each element is read before it is written, by the same thread.
__global__ void add_kernel(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = grid_thread_index(); i < n; i += grid_thread_count()) out[i] = a[i] + b[i];
}

// add_kernel for 16-byte aligned vectors: four elements per load and store, then the last n % 4
// one by one (the grid has more threads than that).
__global__ void add_quads_kernel(float* out, const float* a, const float* b, int64_t n) {
  const int64_t quads = n / 4;
  for (int64_t i = grid_thread_index(); i < quads; i += grid_thread_count()) {
    const float4 x = reinterpret_cast<const float4*>(a)[i], y = reinterpret_cast<const float4*>(b)[i];
    reinterpret_cast<float4*>(out)[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
  const int64_t tail = quads * 4 + grid_thread_index();
  if (tail < n) out[tail] = a[tail] + b[tail];
}

}  // namespace

void bias_act_forward(Stream stream, float* z, const float* bias, float* out, int64_t rows, int64_t cols,
                      Activation act) {
  with_activation(act, [=](auto activation) {
    launch_over(cuda_stream(stream), rows * cols, bias_act_forward_kernel<decltype(activation)>, z, bias, out, rows,
                cols);
  });
}

void bias_act_backward(Stream stream, const float* grad_out, const float* z, const float* out, float* grad_z,
                       float* grad_bias, int64_t rows, int64_t cols, Activation act) {
  if (rows == 0 || cols == 0) return;
  const cudaStream_t cuda = cuda_stream(stream);
  const int64_t column_tiles = ceil_div(cols, kTileColumns);
  const int64_t row_blocks = std::min({ceil_div(rows, kRowsPerBlock), kMaxRowBlocks,
                                       std::max(int64_t{1}, kMaxBackwardBlocks / column_tiles)});
  const int64_t rows_per_block = ceil_div(rows, row_blocks);
  float* partials = nullptr;
  unsigned int* counters = nullptr;
  if (row_blocks > 1) {
    StreamScratch& scratch = scratch_of(cuda);
    partials = scratch.reduction_partials.get<float>(static_cast<size_t>(row_blocks * cols) * sizeof(float), cuda);
    counters =
        scratch.block_counters.get<unsigned int>(static_cast<size_t>(column_tiles) * sizeof(unsigned int), cuda);
  }
  const dim3 grid(static_cast<unsigned int>(column_tiles), static_cast<unsigned int>(row_blocks));
  const dim3 block(kTileColumns, kRowLanes);
  with_activation(act, [=](auto activation) {
    bias_act_backward_kernel<decltype(activation)><<<grid, block, 0, cuda>>>(
        grad_out, z, out, grad_z, grad_bias, rows, cols, rows_per_block, partials, counters);
    CUDA_CHECK(cudaGetLastError());
  });
}

void add(Stream stream, float* out, const float* a, const float* b, int64_t n) {
  const auto addresses = reinterpret_cast<uintptr_t>(out) | reinterpret_cast<uintptr_t>(a) |
                         reinterpret_cast<uintptr_t>(b);
  if (addresses % alignof(float4) == 0)
    launch_over(cuda_stream(stream), ceil_div(n, 4), add_quads_kernel, out, a, b, n);
  else
    launch_over(cuda_stream(stream), n, add_kernel, out, a, b, n);
}

}  // namespace trainctl::cuda_kernels
