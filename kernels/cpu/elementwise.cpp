// The CPU's elementwise family: the fused bias + activation (forward and backward) and the
// residual add, as plain loops that the compiler vectorizes.
#include <cmath>

#include <type_traits>
#include <vector>

#include "cpu_ops.h"

namespace trainctl::cpu {

namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kGeluTanhCubic = 0.044715f;

// Each activation is a type, so the loops below are compiled once per activation with no
// branch on it inside, and vectorize.
// Its derivative is 1, which needs neither z nor out: they may be null (derivative_at).
struct Identity {
  static float forward(float z) { return z; }
};
struct Relu {
  static float forward(float z) { return z > 0.0f ? z : 0.0f; }
  static float derivative(float z, float) { return z > 0.0f ? 1.0f : 0.0f; }
};
// The exact erf form, as torch.nn.GELU() computes by default: gelu(z) = z * cdf(z).
struct Gelu {
  static float forward(float z) { return 0.5f * z * (1.0f + erff(z * kInvSqrt2)); }
  // gelu'(z) = cdf(z) + z * pdf(z), with cdf(z) = out / z recovered from the forward's output.
  static float derivative(float z, float out) {
    // Selects rather than a branch around the division, so that the loop vectorizes.
    const float ratio = out / (z != 0.0f ? z : 1.0f);
    const float cdf = z != 0.0f ? ratio : 0.5f;
    return cdf + z * kInvSqrt2Pi * expf(-0.5f * z * z);
  }
};
// GPT-2's tanh approximation, torch.nn.functional.gelu(z, approximate="tanh"), with PyTorch's
// order of operations: 0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3))).
struct GeluTanh {
  static float forward(float z) {
    const float inner = kSqrt2OverPi * (z + kGeluTanhCubic * (z * z * z));
    return 0.5f * z * (1.0f + tanhf(inner));
  }
  // From z alone (out is not enough to recover tanh): d/dz of the above.
  static float derivative(float z, float) {
    const float z_squared = z * z;
    const float tanh_inner = tanhf(kSqrt2OverPi * (z + kGeluTanhCubic * (z_squared * z)));
    const float inner_derivative = kSqrt2OverPi * (1.0f + 3.0f * kGeluTanhCubic * z_squared);
    return 0.5f * (1.0f + tanh_inner) + 0.5f * z * (1.0f - tanh_inner * tanh_inner) * inner_derivative;
  }
};

// The activation's derivative at element i, reading z and out only where it needs them.
template <typename Act>
float derivative_at(const float* __restrict z, const float* __restrict out, int64_t i) {
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

// The loops are free functions taking plain arguments: restrict and the bounds survive into the
// vectorizer, which they do not through a lambda's captured references.
// out may be z itself, which an element-by-element loop allows; bias aliases neither.
template <typename Act>
void bias_act_forward_rows(float* z, const float* __restrict bias, float* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* z_row = z + r * cols;
    float* out_row = out + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      const float pre_activation = z_row[c] + bias[c];
      z_row[c] = pre_activation;
      out_row[c] = Act::forward(pre_activation);
    }
  }
}

// grad_z may be grad_out itself, which an element-by-element loop allows; nothing else aliases.
template <typename Act>
void bias_act_backward_rows(const float* grad_out, const float* __restrict z, const float* __restrict out,
                            float* grad_z, float* __restrict grad_bias, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t row = r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      const float g = grad_out[row + c] * derivative_at<Act>(z, out, row + c);
      grad_z[row + c] = g;
      grad_bias[c] += g;
    }
  }
}

}  // namespace

void bias_act_forward(Stream, float* z, const float* bias, float* out, int64_t rows, int64_t cols, Activation act) {
  with_activation(act, [=](auto activation) {
    bias_act_forward_rows<decltype(activation)>(z, bias, out, rows, cols);
  });
}

void bias_act_backward(Stream, const float* grad_out, const float* z, const float* out, float* grad_z,
                       float* grad_bias, int64_t rows, int64_t cols, Activation act) {
  float* bias_sums = zeroed_column_sums(0, cols);
  with_activation(act, [=](auto activation) {
    bias_act_backward_rows<decltype(activation)>(grad_out, z, out, grad_z, bias_sums, rows, cols);
  });
  add_column_sums(grad_bias, bias_sums, cols);
}

float* zeroed_column_sums(int slot, int64_t cols) {
  thread_local std::vector<float> scratch[2];
  std::vector<float>& sums = scratch[slot];
  sums.assign(static_cast<size_t>(cols), 0.0f);
  return sums.data();
}

void add_column_sums(float* gradient, const float* sums, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c) gradient[c] += sums[c];
}

void add(Stream, float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

}  // namespace trainctl::cpu
