// The CPU reference ops, one family per file (memory.cpp, blas.cpp, elementwise.cpp, norm.cpp,
// embedding.cpp, attention.cpp, loss.cpp, optimizer.cpp), declared here for cpu_device.cpp,
// which assembles them into the table. Private to kernels/cpu/: everything else reaches them
// through cpu_device().
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "device.h"

// glibc's libmvec (x86-64, glibc >= 2.35) has vector variants of erff, expf and tanhf, but
// <math.h> declares them only under -ffast-math, which would also license reassociation
// everywhere. Declaring them here lets the activation and softmax loops vectorize, with IEEE
// semantics kept elsewhere.
#if defined(__x86_64__) && defined(__GLIBC__) && __GLIBC_PREREQ(2, 35)
extern "C" __attribute__((simd("notinbranch"))) float erff(float) noexcept;
extern "C" __attribute__((simd("notinbranch"))) float expf(float) noexcept;
extern "C" __attribute__((simd("notinbranch"))) float tanhf(float) noexcept;
#endif

namespace trainctl::cpu {

// Reduces term(0), ..., term(n - 1) with `combine` in a fixed order that vectorizes: kLanes
// interleaved partial results, combined at the end. One running result would be a chain of
// dependent operations that IEEE semantics forbid the compiler to reorder; this order is just
// as fixed (the same result on every call) but has kLanes independent chains.
template <typename Value, typename Term, typename Combine>
Value lane_reduce(int64_t n, Value identity, Term term, Combine combine) {
  constexpr int64_t kLanes = 8;
  Value partial[kLanes];
  std::fill(partial, partial + kLanes, identity);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t lane = 0; lane < kLanes; ++lane) partial[lane] = combine(partial[lane], term(i + lane));
  for (int64_t lane = 0; i < n; ++i, ++lane) partial[lane] = combine(partial[lane], term(i));
  Value total = identity;
  for (const Value value : partial) total = combine(total, value);
  return total;
}

template <typename Value, typename Term>
Value lane_sum(int64_t n, Term term) {
  return lane_reduce(n, Value{0}, term, [](Value a, Value b) { return a + b; });
}

// A parameter gradient summed over a call's rows (a bias, a LayerNorm weight) is collected in
// this zeroed scratch first and added to the gradient once (add_column_sums): each micro-batch
// contributes one partial sum, so 1 rank x grad_accum 2 and 2 ranks x grad_accum 1 add the same
// partial sums in the same order, and a small sum is never rounded against a large running one.
// `slot` tells apart the scratches one op uses at once.
float* zeroed_column_sums(int slot, int64_t cols);
void add_column_sums(float* gradient, const float* sums, int64_t cols);

// memory.cpp
std::string bind_local(int local_rank, int local_size);
void* alloc(size_t bytes);
void release(void* pointer);
// Host and device memory are the same memory: upload, download and copy are all this.
void copy(Stream stream, void* dst, const void* src, size_t bytes);
void fill_zero(Stream stream, float* x, int64_t n);
void pin_host(void* host, size_t bytes);
void unpin_host(void* host);
double peak_flops(bool bf16);
int64_t peak_allocated_bytes();
void unbind();
// Every op completes before it returns, so there is nothing to queue: every stream is Stream{}.
Stream create_stream();
void destroy_stream(Stream stream);

// blas.cpp
void gemm(Stream stream, const Gemm& gemm);
void gemm_bf16(Stream stream, const Gemm& gemm);

// elementwise.cpp
void bias_act_forward(Stream stream, float* z, const float* bias, float* out, int64_t rows, int64_t cols,
                      Activation act);
void bias_act_backward(Stream stream, const float* grad_out, const float* z, const float* out, float* grad_z,
                       float* grad_bias, int64_t rows, int64_t cols, Activation act);
void add(Stream stream, float* out, const float* a, const float* b, int64_t n);

// norm.cpp
void layernorm_forward(Stream stream, float* out, float* mean, float* rstd, const float* x, const float* weight,
                       const float* bias, int64_t rows, int64_t cols, float eps);
void layernorm_backward(Stream stream, float* grad_x, float* grad_weight, float* grad_bias, const float* grad_out,
                        const float* x, const float* weight, const float* mean, const float* rstd, int64_t rows,
                        int64_t cols);

// embedding.cpp
void embedding_forward(Stream stream, float* out, const int32_t* tokens, const float* wte, const float* wpe,
                       int64_t batch, int64_t seq, int64_t channels);
void embedding_backward(Stream stream, float* grad_wte, float* grad_wpe, const float* grad_out,
                        const int32_t* tokens, int64_t batch, int64_t seq, int64_t channels);

// attention.cpp
void attention_forward(Stream stream, float* out, float* lse, const float* qkv, int64_t batch, int64_t seq,
                       int64_t channels, int64_t heads);
void attention_backward(Stream stream, float* grad_qkv, const float* grad_out, const float* qkv, const float* out,
                        const float* lse, int64_t batch, int64_t seq, int64_t channels, int64_t heads);

// loss.cpp
void softmax_cross_entropy(Stream stream, const float* logits, const int32_t* labels, float* grad_logits,
                           int64_t rows, int64_t classes, int64_t row_stride, float grad_scale, double* loss_sum,
                           int64_t* correct);

// optimizer.cpp
void sgd_step(Stream stream, float* param, const float* grad, float* momentum_buffer, int64_t n, double lr,
              double momentum, double weight_decay);
void adamw_step(Stream stream, float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                double lr, double beta1, double beta2, double eps, double weight_decay, int64_t step);
double sum_squares(Stream stream, const float* x, int64_t n);
void scale(Stream stream, float* x, int64_t n, float factor);

}  // namespace trainctl::cpu
