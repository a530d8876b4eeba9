// The CUDA elementwise family: the activations forward and backward over n elements of f32 or bf16,
// the residual add over floats, and SwiGLU over rows of f32 or bf16; also memory.convert's kernel.
// Each but SwiGLU is a grid-stride loop over its vectors, 16 bytes at a time (four floats, eight
// bf16s) where every vector it touches starts 16-byte aligned, else one element at a time
// (kernel_common.cuh's for_each_pack); SwiGLU goes over its rows with a thread per pack of columns
// and the rows over blocks (kernel_common.cuh's row tiles), reading a pack of the gate and the
// same pack of up from each row. The activations' and SwiGLU's arithmetic is the one both devices
// compile (activation_functions.h), on elements widened to float and rounded once when stored,
// uncontracted (--fmad=false) as the CPU's (-ffp-contract=off): so ReLU, the identity and add match
// the CPU bitwise, and the GELUs and SwiGLU differ only by erff, expf and tanhf, which are not
// correctly rounded on either side.
#include <cstdint>
#include <type_traits>

#include "activation_functions.h"
#include "cuda/cuda_ops.h"
#include "cuda/kernel_common.cuh"

namespace trainctl::cuda_kernels {

namespace {

using activations::with_activation;

// out may be z itself: each element is read before it is written, by the same thread.
template <typename Act, int kWidth, typename T>
__global__ void activation_forward_kernel(T* out, const T* z, int64_t n) {
  for_each_pack<kWidth>(n, [=](int64_t i, auto width) {
    constexpr int kPack = decltype(width)::value;
    Floats<kPack> values = load_floats<kPack>(z + i);
    for (int j = 0; j < kPack; ++j) values.v[j] = Act::forward(values.v[j]);
    store_floats<kPack>(out + i, values);
  });
}

// Only the erf GELU's derivative reads the forward's output (the cdf it holds); the others are
// not given it, so that their backward reads one vector less.
template <typename Act>
constexpr bool kReadsOutput = std::is_same_v<Act, activations::Gelu>;

// grad_z may be grad_out itself: each element is read before it is written, by the same thread.
// The identity's derivative is 1, which needs neither z nor out (null then): grad_z = grad_out * 1.
template <typename Act, int kWidth, typename T>
__global__ void activation_backward_kernel(T* grad_z, const T* grad_out, const T* __restrict__ z,
                                           const T* __restrict__ out, int64_t n) {
  for_each_pack<kWidth>(n, [=](int64_t i, auto width) {
    constexpr int kPack = decltype(width)::value;
    Floats<kPack> grad = load_floats<kPack>(grad_out + i);
    if constexpr (!std::is_same_v<Act, activations::Identity>) {
      const Floats<kPack> inputs = load_floats<kPack>(z + i);
      Floats<kPack> outputs{};
      if constexpr (kReadsOutput<Act>) outputs = load_floats<kPack>(out + i);
      for (int j = 0; j < kPack; ++j) grad.v[j] = grad.v[j] * Act::derivative(inputs.v[j], outputs.v[j]);
    }
    store_floats<kPack>(grad_z + i, grad);
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

// out [rows, width] = silu(gate) * up, gate and up a row of gate_up's halves.
template <int kWidth, typename T>
__global__ void swiglu_forward_kernel(T* __restrict__ out, const T* __restrict__ gate_up, int64_t rows,
                                      int64_t width) {
  const int64_t column = row_tile_pack() * kWidth;
  if (column >= width) return;
  for (int64_t r = row_tile_first_row(); r < rows; r += row_tile_row_step()) {
    const T* row = gate_up + 2 * r * width + column;
    const Floats<kWidth> gate = load_floats<kWidth>(row), up = load_floats<kWidth>(row + width);
    Floats<kWidth> result;
    for (int j = 0; j < kWidth; ++j) result.v[j] = activations::SwiGlu::forward(gate.v[j], up.v[j]);
    store_floats<kWidth>(out + r * width + column, result);
  }
}

template <int kWidth, typename T>
__global__ void swiglu_backward_kernel(T* __restrict__ grad_gate_up, const T* __restrict__ grad_out,
                                       const T* __restrict__ gate_up, int64_t rows, int64_t width) {
  const int64_t column = row_tile_pack() * kWidth;
  if (column >= width) return;
  for (int64_t r = row_tile_first_row(); r < rows; r += row_tile_row_step()) {
    const int64_t at = 2 * r * width + column;
    const Floats<kWidth> gate = load_floats<kWidth>(gate_up + at), up = load_floats<kWidth>(gate_up + at + width);
    const Floats<kWidth> grad = load_floats<kWidth>(grad_out + r * width + column);
    Floats<kWidth> grad_gate, grad_up;
    for (int j = 0; j < kWidth; ++j) {
      grad_gate.v[j] = activations::SwiGlu::gate_gradient(grad.v[j], gate.v[j], up.v[j]);
      grad_up.v[j] = activations::SwiGlu::up_gradient(grad.v[j], gate.v[j]);
    }
    store_floats<kWidth>(grad_gate_up + at, grad_gate);
    store_floats<kWidth>(grad_gate_up + at + width, grad_up);
  }
}

// dst = src converted, kWidth elements at a time.
template <int kWidth, typename To, typename From>
__global__ void convert_kernel(To* __restrict__ dst, const From* __restrict__ src, int64_t n) {
  for_each_pack<kWidth>(n, [=](int64_t i, auto width) {
    constexpr int kPack = decltype(width)::value;
    store_floats<kPack>(dst + i, load_floats<kPack>(src + i));
  });
}

}  // namespace

void activation_forward(Stream stream, TypedPtr out, ConstTypedPtr z, int64_t n, Activation act) {
  with_element_type(one_element_type("activation_forward", {out, z}), [&](auto type) {
    using T = typename decltype(type)::type;
    with_pack_width<T>({out.data, z.data}, [&](auto width) {
      with_activation(act, [&](auto activation) {
        launch_over(cuda_stream(stream), ceil_div(n, width()),
                    activation_forward_kernel<decltype(activation), width(), T>, typed<T>(out), typed<T>(z), n);
      });
    });
  });
}

void activation_backward(Stream stream, TypedPtr grad_z, ConstTypedPtr grad_out, ConstTypedPtr z, ConstTypedPtr out,
                         int64_t n, Activation act) {
  with_element_type(one_element_type("activation_backward", {grad_z, grad_out, z, out}), [&](auto type) {
    using T = typename decltype(type)::type;
    with_pack_width<T>({grad_z.data, grad_out.data, z.data, out.data}, [&](auto width) {
      with_activation(act, [&](auto activation) {
        launch_over(cuda_stream(stream), ceil_div(n, width()),
                    activation_backward_kernel<decltype(activation), width(), T>, typed<T>(grad_z),
                    typed<T>(grad_out), typed<T>(z), typed<T>(out), n);
      });
    });
  });
}

// Four elements at a time: a float4 on the f32 side, four bf16s on the other.
void convert_elements(cudaStream_t stream, TypedPtr dst, ConstTypedPtr src, int64_t n) {
  with_element_type(dst.type, [&](auto dst_type) {
    using To = typename decltype(dst_type)::type;
    using From = std::conditional_t<std::is_same_v<To, float>, __nv_bfloat16, float>;
    constexpr int kWidth = 4;
    const bool aligned = aligned_to(kWidth * sizeof(To), {dst.data}) && aligned_to(kWidth * sizeof(From), {src.data});
    with_width<kWidth>(aligned, [&](auto width) {
      launch_over(stream, ceil_div(n, width()), convert_kernel<width(), To, From>, typed<To>(dst), typed<From>(src), n);
    });
  });
}

void add(Stream stream, float* out, const float* a, const float* b, int64_t n) {
  with_pack_width<float>({out, a, b}, [=](auto width) {
    launch_over(cuda_stream(stream), ceil_div(n, width()), add_kernel<width()>, out, a, b, n);
  });
}

void swiglu_forward(Stream stream, TypedPtr out, ConstTypedPtr gate_up, int64_t rows, int64_t width) {
  if (rows == 0 || width == 0) return;
  with_element_type(one_element_type("swiglu_forward", {out, gate_up}), [&](auto type) {
    using T = typename decltype(type)::type;
    with_vector_width<T>(width, {out.data, gate_up.data}, [&](auto pack) {
      const RowTileLaunch shape = row_tile_launch(rows, width / pack());
      launch(cuda_stream(stream), shape.grid, shape.block, swiglu_forward_kernel<pack(), T>, typed<T>(out),
             typed<T>(gate_up), rows, width);
    });
  });
}

void swiglu_backward(Stream stream, TypedPtr grad_gate_up, ConstTypedPtr grad_out, ConstTypedPtr gate_up, int64_t rows,
                     int64_t width) {
  if (rows == 0 || width == 0) return;
  with_element_type(one_element_type("swiglu_backward", {grad_gate_up, grad_out, gate_up}), [&](auto type) {
    using T = typename decltype(type)::type;
    with_vector_width<T>(width, {grad_gate_up.data, grad_out.data, gate_up.data}, [&](auto pack) {
      const RowTileLaunch shape = row_tile_launch(rows, width / pack());
      launch(cuda_stream(stream), shape.grid, shape.block, swiglu_backward_kernel<pack(), T>, typed<T>(grad_gate_up),
             typed<T>(grad_out), typed<T>(gate_up), rows, width);
    });
  });
}

}  // namespace trainctl::cuda_kernels
