// The CPU's elementwise family: activations forward and backward, the residual add and SwiGLU, as
// plain loops over each element type that the compiler vectorizes, on the activations' shared
// definitions (activation_functions.h).
#include "activation_functions.h"
#include "cpu_ops.h"

namespace trainctl::cpu {

namespace {

using activations::with_activation;

inline float widen(float x) { return x; }
inline float widen(Bf16 x) { return to_float(x); }
template <typename T>
T narrow(float x) {
  if constexpr (std::is_same_v<T, Bf16>)
    return to_bf16(x);
  else
    return x;
}

// body(pointer of x's element type).
template <typename Ptr, typename Body>
void with_elements(Ptr x, Body body) {
  if (x.type == ElementType::kBf16)
    body(x.bf16());
  else
    body(x.f32());
}

// The loops are free functions taking plain arguments: restrict and the bounds survive into the
// vectorizer, which they do not through a lambda's captured references. out may be z itself,
// which an element-by-element loop allows.
template <typename Act, typename T>
void forward_elements(T* out, const T* z, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = narrow<T>(Act::forward(widen(z[i])));
}

// grad_z may be grad_out itself; z and out are read only where the derivative needs them.
template <typename Act, typename T>
void backward_elements(T* grad_z, const T* grad_out, const T* __restrict z, const T* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float derivative =
        std::is_same_v<Act, activations::Identity> ? 1.0f : activations::derivative_of<Act>(widen(z[i]), widen(out[i]));
    grad_z[i] = narrow<T>(widen(grad_out[i]) * derivative);
  }
}

// A row of SwiGLU: gate and up are a row of gate_up's two halves.
template <typename T>
void swiglu_row(T* __restrict out, const T* __restrict gate, const T* __restrict up, int64_t width) {
  for (int64_t j = 0; j < width; ++j) out[j] = narrow<T>(activations::SwiGlu::forward(widen(gate[j]), widen(up[j])));
}

template <typename T>
void swiglu_row_backward(T* __restrict grad_gate, T* __restrict grad_up, const T* __restrict grad_out,
                         const T* __restrict gate, const T* __restrict up, int64_t width) {
  for (int64_t j = 0; j < width; ++j) {
    const float grad = widen(grad_out[j]), gate_value = widen(gate[j]);
    grad_gate[j] = narrow<T>(activations::SwiGlu::gate_gradient(grad, gate_value, widen(up[j])));
    grad_up[j] = narrow<T>(activations::SwiGlu::up_gradient(grad, gate_value));
  }
}

}  // namespace

void activation_forward(Stream, TypedPtr out, ConstTypedPtr z, int64_t n, Activation act) {
  with_elements(out, [&](auto* typed_out) {
    using T = std::remove_pointer_t<decltype(typed_out)>;
    const T* typed_z = static_cast<const T*>(z.data);
    with_activation(act, [&](auto activation) { forward_elements<decltype(activation)>(typed_out, typed_z, n); });
  });
}

void activation_backward(Stream, TypedPtr grad_z, ConstTypedPtr grad_out, ConstTypedPtr z, ConstTypedPtr out,
                         int64_t n, Activation act) {
  with_elements(grad_z, [&](auto* typed_grad_z) {
    using T = std::remove_pointer_t<decltype(typed_grad_z)>;
    with_activation(act, [&](auto activation) {
      backward_elements<decltype(activation)>(typed_grad_z, static_cast<const T*>(grad_out.data),
                                              static_cast<const T*>(z.data), static_cast<const T*>(out.data), n);
    });
  });
}

float* zeroed_column_sums(int slot, int64_t cols) {
  thread_local std::vector<float> sums[2];
  sums[slot].assign(static_cast<size_t>(cols), 0.0f);
  return sums[slot].data();
}

void add_column_sums(float* gradient, const float* sums, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c) gradient[c] += sums[c];
}

void add(Stream, float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void swiglu_forward(Stream, TypedPtr out, ConstTypedPtr gate_up, int64_t rows, int64_t width) {
  with_elements(out, [&](auto* typed_out) {
    using T = std::remove_pointer_t<decltype(typed_out)>;
    const T* rows_in = static_cast<const T*>(gate_up.data);
    for (int64_t r = 0; r < rows; ++r)
      swiglu_row(typed_out + r * width, rows_in + 2 * r * width, rows_in + (2 * r + 1) * width, width);
  });
}

void swiglu_backward(Stream, TypedPtr grad_gate_up, ConstTypedPtr grad_out, ConstTypedPtr gate_up, int64_t rows,
                     int64_t width) {
  with_elements(grad_gate_up, [&](auto* typed_grad) {
    using T = std::remove_pointer_t<decltype(typed_grad)>;
    const T* grads = static_cast<const T*>(grad_out.data);
    const T* rows_in = static_cast<const T*>(gate_up.data);
    for (int64_t r = 0; r < rows; ++r)
      swiglu_row_backward(typed_grad + 2 * r * width, typed_grad + (2 * r + 1) * width, grads + r * width,
                          rows_in + 2 * r * width, rows_in + (2 * r + 1) * width, width);
  });
}

}  // namespace trainctl::cpu
