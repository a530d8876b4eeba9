// The ops of the CUDA device table (cuda_device.cpp), each defined in the file of its op family:
// memory.cpp, blas.cu, elementwise.cu, loss.cu, optimizer.cu. Same signatures and semantics as
// the CPU reference (kernels/cpu/); each runs on the CUDA stream its Stream holds.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "device.h"

namespace trainctl::cuda_kernels {

// The seam's Stream as CUDA's: a null handle is the legacy default stream.
inline cudaStream_t cuda_stream(Stream stream) { return static_cast<cudaStream_t>(stream.handle); }

// memory.cpp
void bind_local(int local_rank, int local_size);
void* alloc(size_t bytes);
void release(void* pointer);
void upload(Stream stream, void* device_dst, const void* host_src, size_t bytes);
void download(Stream stream, void* host_dst, const void* device_src, size_t bytes);
void copy(Stream stream, void* device_dst, const void* device_src, size_t bytes);
void fill_zero(Stream stream, float* x, int64_t n);
void pin_host(void* host, size_t bytes);
void unpin_host(void* host);
double peak_flops(bool bf16);
int64_t peak_allocated_bytes();
// Copies `bytes` between host and device (either way) after the work before it on `stream`, and
// returns when the copy is done: waits for that stream only.
void copy_and_wait(cudaStream_t stream, void* dst, const void* src, size_t bytes);

// blas.cu
void gemm(Stream stream, const Gemm& gemm);
void gemm_bf16(Stream stream, const Gemm& gemm);

// elementwise.cu
void bias_act_forward(Stream stream, float* z, const float* bias, float* out, int64_t rows, int64_t cols,
                      Activation act);
void bias_act_backward(Stream stream, const float* grad_out, const float* z, const float* out, float* grad_z,
                       float* grad_bias, int64_t rows, int64_t cols, Activation act);
void add(Stream stream, float* out, const float* a, const float* b, int64_t n);

// loss.cu
void softmax_cross_entropy(Stream stream, const float* logits, const int32_t* labels, float* grad_logits,
                           int64_t rows, int64_t classes, float grad_scale, double* loss_sum, int64_t* correct);

// optimizer.cu
void sgd_step(Stream stream, float* param, const float* grad, float* momentum_buffer, int64_t n, double lr,
              double momentum, double weight_decay);
void adamw_step(Stream stream, float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                double lr, double beta1, double beta2, double eps, double weight_decay, int64_t step);
double sum_squares(Stream stream, const float* x, int64_t n);
void scale(Stream stream, float* x, int64_t n, float factor);

}  // namespace trainctl::cuda_kernels
