// The ops of the CUDA device table (ops_cuda.cpp) that run kernels or cuBLASLt, each defined in
// the .cu file of its concern. Same signatures and semantics as the CPU reference
// (kernels/cpu/ops_cpu.cpp); all of them run on the legacy default stream.
#pragma once

#include <cstdint>

#include "device.h"

namespace trainctl::cuda_kernels {

// gemm.cu
void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c);
void gemm_bf16(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
               const float* b, float beta, float* c);

// activation.cu
void bias_act_forward(float* z, const float* bias, float* out, int64_t rows, int64_t cols, Activation act);
void bias_act_backward(const float* grad_out, const float* z, const float* out, float* grad_z, float* grad_bias,
                       int64_t rows, int64_t cols, Activation act);

// softmax_cross_entropy.cu
void softmax_cross_entropy(const float* logits, const int32_t* labels, float* grad_logits, int64_t rows,
                           int64_t classes, float grad_scale, double* loss_sum, int64_t* correct);

// optimizer.cu
void sgd_step(float* param, const float* grad, float* momentum_buffer, int64_t n, double lr, double momentum,
              double weight_decay);
void adamw_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n, double lr,
                double beta1, double beta2, double eps, double weight_decay, int64_t step);
double sum_squares(const float* x, int64_t n);
void scale(float* x, int64_t n, float factor);

}  // namespace trainctl::cuda_kernels
