// The ops of the CUDA device table (cuda_device.cpp), each defined in the file of its op family:
// memory.cpp, blas.cu, elementwise.cu, norm.cu, embedding.cu, attention.cu, loss.cu,
// optimizer.cu, collectives.cpp. Same signatures and semantics as the CPU reference
// (kernels/cpu/); each runs on the CUDA stream its Stream holds.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "device.h"

namespace trainctl::cuda_kernels {

// The seam's Stream as CUDA's: a null handle is the legacy default stream.
inline cudaStream_t cuda_stream(Stream stream) { return static_cast<cudaStream_t>(stream.handle); }

// memory.cpp
std::string bind_local(int local_rank, int local_size);
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
void unbind();
Stream create_stream();
void destroy_stream(Stream stream);
// Copies `bytes` between host and device (either way) after the work before it on `stream`, and
// returns when the copy is done: waits for that stream only.
void copy_and_wait(cudaStream_t stream, void* dst, const void* src, size_t bytes);

// blas.cu
void gemm(Stream stream, const Gemm& gemm);
void gemm_bf16(Stream stream, const Gemm& gemm);
// Destroys the cached GEMM plans and the cuBLASLt handle (unbind).
void release_gemm_plans();

// elementwise.cu
void bias_act_forward(Stream stream, float* z, const float* bias, float* out, int64_t rows, int64_t cols,
                      Activation act);
void bias_act_backward(Stream stream, const float* grad_out, const float* z, const float* out, float* grad_z,
                       float* grad_bias, int64_t rows, int64_t cols, Activation act);
void add(Stream stream, float* out, const float* a, const float* b, int64_t n);

// norm.cu
void layernorm_forward(Stream stream, float* out, float* mean, float* rstd, const float* x, const float* weight,
                       const float* bias, int64_t rows, int64_t cols, float eps);
void layernorm_backward(Stream stream, float* grad_x, float* grad_weight, float* grad_bias, const float* grad_out,
                        const float* x, const float* weight, const float* mean, const float* rstd, int64_t rows,
                        int64_t cols);

// embedding.cu
void embedding_forward(Stream stream, float* out, const int32_t* tokens, const float* wte, const float* wpe,
                       int64_t batch, int64_t seq, int64_t channels);
void embedding_backward(Stream stream, float* grad_wte, float* grad_wpe, const float* grad_out,
                        const int32_t* tokens, int64_t batch, int64_t seq, int64_t channels);

// attention.cu
void attention_forward(Stream stream, float* out, float* lse, const float* qkv, int64_t batch, int64_t seq,
                       int64_t channels, int64_t heads);
void attention_backward(Stream stream, float* grad_qkv, const float* grad_out, const float* qkv, const float* out,
                        const float* lse, int64_t batch, int64_t seq, int64_t channels, int64_t heads);

// loss.cu
void softmax_cross_entropy(Stream stream, const float* logits, const int32_t* labels, float* grad_logits,
                           int64_t rows, int64_t classes, int64_t row_stride, float grad_scale, double* loss_sum,
                           int64_t* correct);

// optimizer.cu
void sgd_step(Stream stream, float* param, const float* grad, float* momentum_buffer, int64_t n, double lr,
              double momentum, double weight_decay);
void adamw_step(Stream stream, float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                double lr, double beta1, double beta2, double eps, double weight_decay, int64_t step);
double sum_squares(Stream stream, const float* x, int64_t n);
void scale(Stream stream, float* x, int64_t n, float factor);

// collectives.cpp
DeviceGroup* open_group(int rank, int ranks, const std::function<void(void* bytes, size_t size)>& share);
void close_group(DeviceGroup* group);
void all_reduce_sum(DeviceGroup* group, Stream after, float* data, int64_t count);
void reduce_scatter_sum(DeviceGroup* group, Stream after, float* data, const int64_t* bounds);
void all_gather(DeviceGroup* group, Stream after, float* data, const int64_t* bounds);
void wait_reductions(DeviceGroup* group, Stream stream);

}  // namespace trainctl::cuda_kernels
