// CPU reference implementation of the device seam: GEMM on OpenBLAS, the rest as plain loops
// that define what every other device must compute (within the stated tolerances).
#include <cblas.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "device.h"

// glibc's libmvec (x86-64, glibc >= 2.35) has vector variants of erff and expf, but <math.h>
// declares them only under -ffast-math, which would also license reassociation everywhere.
// Declaring them here lets the activation loops vectorize, with IEEE semantics kept elsewhere.
#if defined(__x86_64__) && defined(__GLIBC__) && __GLIBC_PREREQ(2, 35)
extern "C" __attribute__((simd("notinbranch"))) float erff(float) noexcept;
extern "C" __attribute__((simd("notinbranch"))) float expf(float) noexcept;
#endif

namespace trainctl {

namespace {

void cpu_bind_local(int, int) {}

void* cpu_alloc(size_t bytes) {
  // 64-byte alignment keeps OpenBLAS on its aligned paths; aligned_alloc needs a multiple of it.
  void* pointer = std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64));
  if (pointer == nullptr) throw std::bad_alloc();
  return pointer;
}

void cpu_release(void* pointer) { std::free(pointer); }

void cpu_copy(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

void cpu_fill_zero(float* x, int64_t n) { std::fill(x, x + n, 0.0f); }

void cpu_pin_host(void*, size_t) {}
void cpu_unpin_host(void*) {}

void cpu_gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
              const float* b, float beta, float* c) {
  const blasint lda = static_cast<blasint>(transpose_a ? m : k);
  const blasint ldb = static_cast<blasint>(transpose_b ? k : n);
  cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, lda, b, ldb, beta,
              c, static_cast<blasint>(n));
}

// fp32 -> bf16 -> fp32: keep the top 16 bits, rounding to nearest with ties to even, as
// __float2bfloat16_rn does. NaN stays NaN (quieted) instead of rounding into infinity.
float round_to_bf16(float x) {
  uint32_t bits = std::bit_cast<uint32_t>(x);
  if (std::isnan(x)) return std::bit_cast<float>((bits | 0x00400000u) & 0xFFFF0000u);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return std::bit_cast<float>(bits & 0xFFFF0000u);
}

void cpu_gemm_bf16(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                   const float* b, float beta, float* c) {
  // Reused between calls: a training step makes a handful of GEMMs of the same few shapes.
  thread_local std::vector<float> rounded_a, rounded_b;
  rounded_a.assign(a, a + m * k);
  rounded_b.assign(b, b + k * n);
  std::transform(rounded_a.begin(), rounded_a.end(), rounded_a.begin(), round_to_bf16);
  std::transform(rounded_b.begin(), rounded_b.end(), rounded_b.begin(), round_to_bf16);
  cpu_gemm(transpose_a, transpose_b, m, n, k, alpha, rounded_a.data(), rounded_b.data(), beta, c);
}

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

// Each activation is a type, so the loops below are compiled once per activation with no
// branch on it inside, and vectorize.
struct Identity {
  static float forward(float z) { return z; }
  static float derivative(float, float) { return 1.0f; }
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

template <typename Body>
void with_activation(Activation act, Body body) {
  switch (act) {
    case Activation::kRelu: body(Relu{}); break;
    case Activation::kGelu: body(Gelu{}); break;
    default: body(Identity{});
  }
}

// The loops are free functions taking plain arguments: restrict and the bounds survive into the
// vectorizer, which they do not through a lambda's captured references.
template <typename Act>
void bias_act_forward_rows(float* __restrict z, const float* __restrict bias, float* __restrict out, int64_t rows,
                           int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* z_row = z + r * cols;
    float* out_row = out + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      z_row[c] += bias[c];
      out_row[c] = Act::forward(z_row[c]);
    }
  }
}

// grad_z may be grad_out itself, which an element-by-element loop allows; nothing else aliases.
template <typename Act>
void bias_act_backward_rows(const float* grad_out, const float* __restrict z, const float* __restrict out,
                            float* grad_z, float* __restrict grad_bias, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* grad_out_row = grad_out + r * cols;
    const float* z_row = z + r * cols;
    const float* out_row = out + r * cols;
    float* grad_z_row = grad_z + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      const float g = grad_out_row[c] * Act::derivative(z_row[c], out_row[c]);
      grad_z_row[c] = g;
      grad_bias[c] += g;
    }
  }
}

void cpu_bias_act_forward(float* z, const float* bias, float* out, int64_t rows, int64_t cols, Activation act) {
  with_activation(act, [=](auto activation) {
    bias_act_forward_rows<decltype(activation)>(z, bias, out, rows, cols);
  });
}

void cpu_bias_act_backward(const float* grad_out, const float* z, const float* out, float* grad_z, float* grad_bias,
                           int64_t rows, int64_t cols, Activation act) {
  with_activation(act, [=](auto activation) {
    bias_act_backward_rows<decltype(activation)>(grad_out, z, out, grad_z, grad_bias, rows, cols);
  });
}

void cpu_softmax_cross_entropy(const float* logits, const int32_t* labels, float* grad_logits, int64_t rows,
                               int64_t classes, float grad_scale, double* loss_sum, int64_t* correct) {
  double loss = 0.0;
  int64_t hits = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits + r * classes;
    const int64_t argmax = std::max_element(row, row + classes) - row;
    const float max_logit = row[argmax];
    double denominator = 0.0;
    for (int64_t c = 0; c < classes; ++c) denominator += std::exp(static_cast<double>(row[c] - max_logit));
    const int32_t label = labels[r];
    loss += std::log(denominator) - static_cast<double>(row[label] - max_logit);
    hits += argmax == label ? 1 : 0;
    if (grad_logits == nullptr) continue;
    float* grad_row = grad_logits + r * classes;
    for (int64_t c = 0; c < classes; ++c) {
      const double probability = std::exp(static_cast<double>(row[c] - max_logit)) / denominator;
      grad_row[c] = static_cast<float>(probability - (c == label ? 1.0 : 0.0)) * grad_scale;
    }
  }
  *loss_sum = loss;
  *correct = hits;
}

void cpu_sgd_step(float* param, const float* grad, float* momentum_buffer, int64_t n, double lr, double momentum,
                  double weight_decay) {
  const auto lr_f = static_cast<float>(lr), momentum_f = static_cast<float>(momentum);
  const auto weight_decay_f = static_cast<float>(weight_decay);
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] + weight_decay_f * param[i];
    momentum_buffer[i] = momentum_f * momentum_buffer[i] + g;
    param[i] -= lr_f * momentum_buffer[i];
  }
}

void cpu_adamw_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n, double lr,
                    double beta1, double beta2, double eps, double weight_decay, int64_t step) {
  const auto decay = static_cast<float>(1.0 - lr * weight_decay);
  const auto beta1_f = static_cast<float>(beta1), one_minus_beta1 = static_cast<float>(1.0 - beta1);
  const auto beta2_f = static_cast<float>(beta2), one_minus_beta2 = static_cast<float>(1.0 - beta2);
  const auto step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, static_cast<double>(step))));
  const auto bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, static_cast<double>(step))));
  const auto eps_f = static_cast<float>(eps);
  for (int64_t i = 0; i < n; ++i) {
    param[i] *= decay;
    exp_avg[i] = beta1_f * exp_avg[i] + one_minus_beta1 * grad[i];
    exp_avg_sq[i] = beta2_f * exp_avg_sq[i] + one_minus_beta2 * grad[i] * grad[i];
    const float denominator = std::sqrt(exp_avg_sq[i]) / bias_correction2_sqrt + eps_f;
    param[i] -= step_size * exp_avg[i] / denominator;
  }
}

double cpu_sum_squares(const float* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

void cpu_scale(float* x, int64_t n, float factor) {
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

constexpr DeviceOps kCpuOps{
    .name = "cpu",
    .bind_local = cpu_bind_local,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_copy,
    .download = cpu_copy,
    .fill_zero = cpu_fill_zero,
    .pin_host = cpu_pin_host,
    .unpin_host = cpu_unpin_host,
    .gemm = cpu_gemm,
    .gemm_bf16 = cpu_gemm_bf16,
    .bias_act_forward = cpu_bias_act_forward,
    .bias_act_backward = cpu_bias_act_backward,
    .softmax_cross_entropy = cpu_softmax_cross_entropy,
    .sgd_step = cpu_sgd_step,
    .adamw_step = cpu_adamw_step,
    .sum_squares = cpu_sum_squares,
    .scale = cpu_scale,
};

}  // namespace

const DeviceOps& cpu_device() { return kCpuOps; }

}  // namespace trainctl
