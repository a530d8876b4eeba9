// The ops of the CUDA device table (cuda_device.cpp), declared from the op list, each defined in
// the file of its op family: memory.cpp (with info and streams), blas.cu, elementwise.cu, norm.cu,
// embedding.cu, attention.cu (with flash_attention.cu), rope.cu, loss.cu, optimizer.cu, collectives.cpp. Same
// signatures and semantics as the CPU reference (kernels/cpu/); each runs on the CUDA stream its Stream holds.
// Also what the files share beyond the ops.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>

#include "device.h"

namespace trainctl::cuda_kernels {

// The seam's Stream as CUDA's: a null handle is the legacy default stream.
inline cudaStream_t cuda_stream(Stream stream) { return static_cast<cudaStream_t>(stream.handle); }

// flash_attention.cu: causal attention in bf16 on tensor cores, multi-head or grouped-query, which
// the attention ops call where flash_attention_usable says the tensors suit it (bf16, head size 16,
// 32, 64 or 128, tensors 16-byte aligned); the same contracts as the ops'.
bool flash_attention_usable(ElementType type, const AttentionShape& shape, std::initializer_list<const void*> tensors);
void flash_attention_forward(cudaStream_t stream, __nv_bfloat16* out, float* lse, const __nv_bfloat16* qkv,
                             const AttentionShape& shape);
void flash_attention_backward(cudaStream_t stream, __nv_bfloat16* grad_qkv, const __nv_bfloat16* grad_out,
                              const __nv_bfloat16* qkv, const __nv_bfloat16* out, const float* lse,
                              const AttentionShape& shape);

// blas.cu: destroys the cached GEMM plans and the cuBLASLt handle (when the rank lets go of its
// device).
void release_gemm_plans();

// elementwise.cu: dst[i] = src[i] for i < n, between f32 and bf16 (memory.convert's kernel: a
// .cu file's, where memory.cpp is host code).
void convert_elements(cudaStream_t stream, TypedPtr dst, ConstTypedPtr src, int64_t n);

#include "device_declarations.inc"

}  // namespace trainctl::cuda_kernels
