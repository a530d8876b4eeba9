// The CUDA elementwise family: the fused bias + activation ops and the residual add. The
// bias_act forward adds the bias and applies the activation, a thread per column (four columns,
// as float4s, where the rows are whole aligned float4s) holding its bias in registers over the
// rows it takes (kernel_common.cuh's row tiles), so that no element's column is found by a
// division; the backward multiplies by the activation's derivative and sums grad_bias over rows
// in the same kernel, deterministically (kernel_common.cuh's column sums: fixed-order sums per
// block, then the last block adds the blocks' sums in order; no float atomics). add goes over its
// vectors four floats at a time where all three are 16-byte aligned. The arithmetic is the CPU
// reference's (kernels/cpu/elementwise.cpp), operation for operation (and uncontracted:
// --fmad=false), so ReLU, the identity and add match it bitwise, and the GELUs differ only by
// erff, expf and tanhf, which are not correctly rounded on either side.
#include <cstdint>
#include <type_traits>

#include "cuda/cuda_ops.h"
#include "cuda/kernel_common.cuh"

namespace trainctl::cuda_kernels {

namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kGeluTanhCubic = 0.044715f;

// Its derivative is 1, which needs neither z nor out: they may be null (derivative_at).
struct Identity {
  __device__ static float forward(float z) { return z; }
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

// The activation's derivative at element i, reading z and out only where it needs them.
template <typename Act>
__device__ float derivative_at(const float* z, const float* out, int64_t i) {
  if constexpr (std::is_same_v<Act, Identity>)
    return 1.0f;
  else
    return Act::derivative(z[i], out[i]);
}

template <typename Body>
void with_activation(Activation act, Body body) {
  switch (act) {
    case Activation::kRelu: body(Relu{}); break;
    case Activation::kGelu: body(Gelu{}); break;
    case Activation::kGeluTanh: body(GeluTanh{}); break;
    case Activation::kNone: body(Identity{}); break;
  }
}

// A row tile's thread per kWidth columns (row_tile_launch over cols / kWidth packs). out may be z
// itself: each element is read before it is written, by the same thread, and then only the
// activation is stored.
template <typename Act, int kWidth>
__global__ void bias_act_forward_kernel(float* z, const float* __restrict__ bias, float* out, int64_t rows,
                                        int64_t cols) {
  const int64_t column = row_tile_pack() * kWidth;
  if (column >= cols) return;
  const Floats<kWidth> column_bias = load_floats<kWidth>(bias + column);
  const bool in_place = out == z;
  for (int64_t row = row_tile_first_row(); row < rows; row += row_tile_row_step()) {
    const int64_t i = row * cols + column;
    Floats<kWidth> biased = load_floats<kWidth>(z + i), activated;
    for (int j = 0; j < kWidth; ++j) {
      biased.v[j] = biased.v[j] + column_bias.v[j];
      activated.v[j] = Act::forward(biased.v[j]);
    }
    if (!in_place) store_floats<kWidth>(z + i, biased);
    store_floats<kWidth>(out + i, activated);
  }
}

// grad_z may be grad_out itself: each element is read before it is written, by the same thread.
// The column-sum grid of kernel_common.cuh: grad_bias takes the sum over rows of grad_z.
template <typename Act>
__global__ void bias_act_backward_kernel(const float* grad_out, const float* __restrict__ z,
                                         const float* __restrict__ out, float* grad_z, float* __restrict__ grad_bias,
                                         ColumnSums shape) {
  sum_columns<1>(shape, {grad_bias}, [&](int64_t row, int64_t column, float (&grad_bias_sum)[1]) {
    const int64_t i = row * shape.cols + column;
    const float g = grad_out[i] * derivative_at<Act>(z, out, i);
    grad_z[i] = g;
    grad_bias_sum[0] += g;
  });
}

// out may be a or b: each element is read before it is written, by the same thread.
template <int kWidth>
__global__ void add_kernel(float* out, const float* a, const float* b, int64_t n) {
  for_each_pack<kWidth>(n, [=](int64_t i, auto width) {
    constexpr int kPack = decltype(width)::value;
    const Floats<kPack> x = load_floats<kPack>(a + i), y = load_floats<kPack>(b + i);
    Floats<kPack> sum;
    for (int j = 0; j < kPack; ++j) sum.v[j] = x.v[j] + y.v[j];
    store_floats<kPack>(out + i, sum);
  });
}

}  // namespace

void bias_act_forward(Stream stream, float* z, const float* bias, float* out, int64_t rows, int64_t cols,
                      Activation act) {
  if (rows == 0 || cols == 0) return;
  with_vector_width(cols, {z, bias, out}, [=](auto width) {
    const RowTileLaunch shape = row_tile_launch(rows, cols / width());
    with_activation(act, [=](auto activation) {
      launch(cuda_stream(stream), shape.grid, shape.block, bias_act_forward_kernel<decltype(activation), width()>, z,
             bias, out, rows, cols);
    });
  });
}

void bias_act_backward(Stream stream, const float* grad_out, const float* z, const float* out, float* grad_z,
                       float* grad_bias, int64_t rows, int64_t cols, Activation act) {
  if (rows == 0 || cols == 0) return;
  const cudaStream_t cuda = cuda_stream(stream);
  const ColumnSumLaunch shape = column_sum_launch(cuda, rows, cols, 1);
  with_activation(act, [=](auto activation) {
    launch(cuda, shape.grid, shape.block, bias_act_backward_kernel<decltype(activation)>, grad_out, z, out, grad_z,
           grad_bias, shape.sums);
  });
}

void add(Stream stream, float* out, const float* a, const float* b, int64_t n) {
  with_pack_width({out, a, b}, [=](auto width) {
    launch_over(cuda_stream(stream), ceil_div(n, width()), add_kernel<width()>, out, a, b, n);
  });
}

}  // namespace trainctl::cuda_kernels
