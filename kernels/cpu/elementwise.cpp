// The CPU's elementwise family: activations forward and backward and the residual add, as plain
// loops over each element type that the compiler vectorizes, on the activations' shared
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

}  // namespace trainctl::cpu
