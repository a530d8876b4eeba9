// The activations' arithmetic and SwiGLU's, defined once for both devices: the CPU's loops and the
// CUDA kernels compile these same functions (nvcc for the GPU, uncontracted: --fmad=false; the host
// compiler with -ffp-contract=off), so ReLU and the identity agree bitwise between them, and the
// GELUs and SwiGLU differ only by erff, expf and tanhf, which are not correctly rounded on either
// side. Each activation is a type, so a loop or kernel is compiled once per activation with no
// branch on it inside.
#pragma once

#include <cmath>
#include <type_traits>

#include "activation.h"

#if defined(__CUDACC__)
#define TRAINCTL_HOST_DEVICE __host__ __device__
#else
#define TRAINCTL_HOST_DEVICE
#endif

namespace trainctl::activations {

inline constexpr float kInvSqrt2 = 0.70710678118654752f;
inline constexpr float kInvSqrt2Pi = 0.39894228040143268f;
inline constexpr float kSqrt2OverPi = 0.79788456080286536f;
inline constexpr float kGeluTanhCubic = 0.044715f;

// Its derivative is 1, which needs neither z nor out (derivative_of).
struct Identity {
  TRAINCTL_HOST_DEVICE static float forward(float z) { return z; }
};
struct Relu {
  TRAINCTL_HOST_DEVICE static float forward(float z) { return z > 0.0f ? z : 0.0f; }
  TRAINCTL_HOST_DEVICE static float derivative(float z, float) { return z > 0.0f ? 1.0f : 0.0f; }
};
// The exact erf form, as torch.nn.GELU() computes by default: gelu(z) = z * cdf(z).
struct Gelu {
  TRAINCTL_HOST_DEVICE static float forward(float z) { return 0.5f * z * (1.0f + erff(z * kInvSqrt2)); }
  // gelu'(z) = cdf(z) + z * pdf(z), with cdf(z) = out / z recovered from the forward's output;
  // cdf(0) = 0.5, where out / z has no value. Selects rather than branches around the division,
  // so that a CPU loop vectorizes.
  TRAINCTL_HOST_DEVICE static float derivative(float z, float out) {
    const float ratio = out / (z != 0.0f ? z : 1.0f);
    const float cdf = z != 0.0f ? ratio : 0.5f;
    return cdf + z * kInvSqrt2Pi * expf(-0.5f * z * z);
  }
};
// GPT-2's tanh approximation, torch.nn.functional.gelu(z, approximate="tanh"), with PyTorch's
// order of operations: 0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3))). cuBLASLt's GELU epilogues
// compute this function too.
struct GeluTanh {
  TRAINCTL_HOST_DEVICE static float forward(float z) {
    const float inner = kSqrt2OverPi * (z + kGeluTanhCubic * (z * z * z));
    return 0.5f * z * (1.0f + tanhf(inner));
  }
  // From z alone (out is not enough to recover tanh): d/dz of the above.
  TRAINCTL_HOST_DEVICE static float derivative(float z, float) {
    const float z_squared = z * z;
    const float tanh_inner = tanhf(kSqrt2OverPi * (z + kGeluTanhCubic * (z_squared * z)));
    const float inner_derivative = kSqrt2OverPi * (1.0f + 3.0f * kGeluTanhCubic * z_squared);
    return 0.5f * (1.0f + tanh_inner) + 0.5f * z * (1.0f - tanh_inner * tanh_inner) * inner_derivative;
  }
};

// A Llama MLP's SwiGLU, silu(gate) * up, with PyTorch's order of operations (F.silu(gate) * up and
// its autograd): silu(z) = z / (1 + exp(-z)); its backward is silu_backward on grad * up,
// (grad * up * s) * (1 + gate * (1 - s)) with s = 1 / (1 + exp(-gate)), and grad * silu(gate) for up.
struct SwiGlu {
  TRAINCTL_HOST_DEVICE static float silu(float gate) { return gate / (1.0f + expf(-gate)); }
  TRAINCTL_HOST_DEVICE static float forward(float gate, float up) { return silu(gate) * up; }
  TRAINCTL_HOST_DEVICE static float gate_gradient(float grad, float gate, float up) {
    const float sigmoid = 1.0f / (1.0f + expf(-gate));
    return grad * up * sigmoid * (1.0f + gate * (1.0f - sigmoid));
  }
  TRAINCTL_HOST_DEVICE static float up_gradient(float grad, float gate) { return grad * silu(gate); }
};

// The activation's derivative at z (whose forward gave out), reading them only where it needs them.
template <typename Act>
TRAINCTL_HOST_DEVICE float derivative_of(float z, float out) {
  if constexpr (std::is_same_v<Act, Identity>)
    return 1.0f;
  else
    return Act::derivative(z, out);
}

// body(Act{}) for the activation `act` names.
template <typename Body>
void with_activation(Activation act, Body body) {
  switch (act) {
    case Activation::kRelu: body(Relu{}); break;
    case Activation::kGelu: body(Gelu{}); break;
    case Activation::kGeluTanh: body(GeluTanh{}); break;
    case Activation::kNone: body(Identity{}); break;
  }
}

}  // namespace trainctl::activations
