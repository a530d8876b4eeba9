// The device seam: one table of the operations the runtime computes with. The CPU table
// (kernels/cpu, OpenBLAS) is always built; a CUDA table registers itself only when compiled in.
// Every op of a device has a CPU reference with the same signature, which is what tests compare
// against. All matrices are row-major; pointers are device pointers of that table's device,
// except the scalar outputs (loss_sum, correct, the sum_squares result), which are host values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "activation.h"

namespace trainctl {

// The device a config asks for cannot be used here (no GPU visible, fewer GPUs than ranks on the
// node): bad input for this machine, which the runtime reports with exit code 2.
class DeviceUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct DeviceOps {
  const char* name;

  // Binds the calling process to its device as local rank `local_rank` of `local_size` ranks on
  // this node. CUDA takes visible device `local_rank` (CUDA_VISIBLE_DEVICES decides which are
  // visible) and throws DeviceUnavailable when there are fewer than `local_size`; the CPU binds
  // to nothing.
  void (*bind_local)(int local_rank, int local_size);

  void* (*alloc)(size_t bytes);
  void (*release)(void* pointer);
  void (*upload)(void* device_dst, const void* host_src, size_t bytes);
  void (*download)(void* host_dst, const void* device_src, size_t bytes);
  void (*fill_zero)(float* x, int64_t n);
  // Page-locks host memory that device-to-host copies target again and again (the checkpoint
  // staging buffers), so the copies run at full speed; nothing to do on the CPU.
  void (*pin_host)(void* host, size_t bytes);
  void (*unpin_host)(void* host);

  // c[m,n] = alpha * op(a) * op(b) + beta * c, where op(a) is [m,k] and op(b) is [k,n].
  void (*gemm)(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
               const float* b, float beta, float* c);
  // gemm with a and b rounded to bfloat16 (to nearest, ties to even) and the products summed in
  // fp32 into fp32 c: the compute of precision = "bf16", whose weights stay fp32.
  void (*gemm_bf16)(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, const float* b, float beta, float* c);
  // z[r,c] += bias[c], then out = act(z); z keeps the pre-activation for the backward pass.
  void (*bias_act_forward)(float* z, const float* bias, float* out, int64_t rows, int64_t cols, Activation act);
  // grad_z = grad_out * act'(z) (grad_z may alias grad_out); grad_bias[c] += sum over rows of grad_z,
  // accumulating across micro-batches. `out` is the forward's act(z): GELU's derivative reuses
  // the normal CDF it holds (out = z * cdf(z)) instead of evaluating erf again.
  void (*bias_act_backward)(const float* grad_out, const float* z, const float* out, float* grad_z, float* grad_bias,
                            int64_t rows, int64_t cols, Activation act);
  // loss_sum = sum over rows of -log softmax(logits)[label]; correct = rows whose argmax is the label.
  // grad_logits (may be null for evaluation) = (softmax - onehot(label)) * grad_scale.
  void (*softmax_cross_entropy)(const float* logits, const int32_t* labels, float* grad_logits, int64_t rows,
                                int64_t classes, float grad_scale, double* loss_sum, int64_t* correct);
  // PyTorch SGD: g += wd * p; buf = momentum * buf + g; p -= lr * buf (buf starts at zero).
  // Hyperparameters are doubles, as PyTorch's are Python floats: derived scalars such as
  // 1 - beta2 are computed in double and rounded once, so the state matches torch.optim's.
  void (*sgd_step)(float* param, const float* grad, float* momentum_buffer, int64_t n, double lr, double momentum,
                   double weight_decay);
  // PyTorch AdamW (decoupled weight decay, bias-corrected); `step` counts from 1.
  void (*adamw_step)(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n, double lr,
                     double beta1, double beta2, double eps, double weight_decay, int64_t step);
  double (*sum_squares)(const float* x, int64_t n);
  void (*scale)(float* x, int64_t n, float factor);
};

// The table for `name` ("cpu", "cuda"), or null when this build does not have it.
const DeviceOps* find_device(std::string_view name);
std::vector<std::string> available_devices();

// The CPU reference table, always present.
const DeviceOps& cpu_device();

}  // namespace trainctl
