// Tensor-core instructions and asynchronous copies for the CUDA kernels, as device functions: the
// warp's bf16 matrix multiply-accumulate with fp32 accumulators (mma.sync m16n8k16), the warp's
// loads of 8 x 8 matrices of 16-bit elements from shared memory into mma's fragments (ldmatrix,
// plain and transposed), a thread's copies from global to shared memory that land at its wait
// (cp.async, with commit and wait groups), and the launch's dynamic shared memory. Under nvcc each
// is its PTX instruction (sm_80 and newer); under the host compiler (cuda_on_cpu/'s builds, where
// __CUDACC__ is not defined) each calls the CPU implementation (cuda_on_cpu/tensor_cores.h),
// which follows the PTX ISA's layouts and rules, and shows what a GPU leaves undefined: a read of
// a copy's destination before the wait reads the shared-memory poison (docs/runtime.md, "CUDA on
// the CPU").
//
// Fragments (PTX ISA 9.7.14.5.8), with lane the thread's place in its warp (threadIdx.x % 32 in a
// one-dimensional block), g = lane / 4, t = lane % 4; a b32 holds two bf16, the lower-indexed
// element in its low 16 bits:
//   A, 16 x 16 (m x k):  a[0] = A[g][2t, 2t+1]     a[1] = A[g+8][2t, 2t+1]
//                        a[2] = A[g][2t+8, 2t+9]   a[3] = A[g+8][2t+8, 2t+9]
//   B, 16 x 8 (k x n):   b[0] = B[2t, 2t+1][g]     b[1] = B[2t+8, 2t+9][g]
//   C and D, 16 x 8:     c[0], c[1] = C[g][2t, 2t+1]      c[2], c[3] = C[g+8][2t, 2t+1]
// ldmatrix (9.7.14.5.15): lane 8m + r gives the address of row r of matrix m (8 elements, 16
// bytes, 16-byte aligned, in shared memory); lane l gets, of matrix m, row l/4's elements 2(l%4)
// and 2(l%4)+1, or with .trans, those of column l/4 in rows 2(l%4) and 2(l%4)+1. So:
//   A from a row-major tile: ldmatrix<4>, lane l giving row l%8 + 8((l/8)%2), column 8(l/16);
//   B from a tile stored n-major (B[k][n] at row n, column k, as keys are): ldmatrix<2>, lane l
//   giving row l%8, column 8((l/8)%2);
//   B from a tile stored k-major (row k, column n, as values are): ldmatrix_transposed<2>, lane
//   l < 16 giving row l.
// The fp32 sums of mma are formed in an order that the PTX ISA leaves open; a result that depends
// on it needs a tolerance (the CPU implementation adds in a fixed order, of k from 0).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#ifndef __CUDACC__
#include <cuda_on_cpu/tensor_cores.h>
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "tensor_cores.cuh: bf16 mma.sync and cp.async need sm_80 or newer"
#endif

namespace trainctl::cuda_kernels {

#ifdef __CUDACC__
// The .shared state space's address of a generic pointer into shared memory, as PTX's .shared
// instructions take it.
__device__ __forceinline__ uint32_t shared_state_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}
#endif

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: D = A B + C, reached by all 32 lanes of
// the warp (the same instruction, none of them exited), each with its fragments; d may be c.
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                  const float (&c)[4]) {
#ifdef __CUDACC__
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
        "f"(c[3]));
#else
  cuda_on_cpu::mma_m16n8k16_bf16(d, a, b, c);
#endif
}

// ldmatrix.sync.aligned.m8n8.x<kMatrices>.shared.b16 (kMatrices 1, 2 or 4), reached by all 32
// lanes of the warp; only lanes below 8 kMatrices give a row address, the others' is not used.
template <int kMatrices>
__device__ __forceinline__ void ldmatrix(uint32_t (&fragments)[kMatrices], const void* row_address) {
  static_assert(kMatrices == 1 || kMatrices == 2 || kMatrices == 4);
#ifdef __CUDACC__
  const uint32_t row = shared_state_address(row_address);
  if constexpr (kMatrices == 1)
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(fragments[0]) : "r"(row) : "memory");
  else if constexpr (kMatrices == 2)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(fragments[0]), "=r"(fragments[1])
                 : "r"(row)
                 : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(fragments[0]), "=r"(fragments[1]), "=r"(fragments[2]), "=r"(fragments[3])
                 : "r"(row)
                 : "memory");
#else
  cuda_on_cpu::load_matrices(fragments, kMatrices, false, row_address);
#endif
}

// The same with .trans: each matrix's transpose.
template <int kMatrices>
__device__ __forceinline__ void ldmatrix_transposed(uint32_t (&fragments)[kMatrices], const void* row_address) {
  static_assert(kMatrices == 1 || kMatrices == 2 || kMatrices == 4);
#ifdef __CUDACC__
  const uint32_t row = shared_state_address(row_address);
  if constexpr (kMatrices == 1)
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
                 : "=r"(fragments[0])
                 : "r"(row)
                 : "memory");
  else if constexpr (kMatrices == 2)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(fragments[0]), "=r"(fragments[1])
                 : "r"(row)
                 : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(fragments[0]), "=r"(fragments[1]), "=r"(fragments[2]), "=r"(fragments[3])
                 : "r"(row)
                 : "memory");
#else
  cuda_on_cpu::load_matrices(fragments, kMatrices, true, row_address);
#endif
}

// cp.async.cg.shared.global of 16 bytes (cached in L2 only), both addresses 16-byte aligned: it
// joins the thread's uncommitted copies, and its destination may be read only after the thread's
// wait that covers it (by other threads, after a barrier that follows that wait).
__device__ __forceinline__ void cp_async_16(void* shared_destination, const void* global_source) {
#ifdef __CUDACC__
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_state_address(shared_destination)),
               "l"(__cvta_generic_to_global(global_source)));
#else
  cuda_on_cpu::copy_async(shared_destination, global_source, 16, 16);
#endif
}

// The same copying only the first source_bytes (0 to 16) and filling the rest of the 16 with
// zeros: the rows past a matrix's end, read as zeros (with source_bytes 0 nothing is read).
__device__ __forceinline__ void cp_async_16_zero_fill(void* shared_destination, const void* global_source,
                                                      int source_bytes) {
#ifdef __CUDACC__
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_state_address(shared_destination)),
               "l"(__cvta_generic_to_global(global_source)), "r"(source_bytes));
#else
  cuda_on_cpu::copy_async(shared_destination, global_source, 16, source_bytes);
#endif
}

// cp.async.ca.shared.global of kBytes (4, 8 or 16; cached in L1 too), both addresses aligned to it.
template <int kBytes>
__device__ __forceinline__ void cp_async_ca(void* shared_destination, const void* global_source) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16);
#ifdef __CUDACC__
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(shared_state_address(shared_destination)),
               "l"(__cvta_generic_to_global(global_source)), "n"(kBytes));
#else
  cuda_on_cpu::copy_async(shared_destination, global_source, kBytes, kBytes);
#endif
}

// cp.async.commit_group: the thread's uncommitted copies (none, too) become its newest group.
__device__ __forceinline__ void cp_async_commit_group() {
#ifdef __CUDACC__
  asm volatile("cp.async.commit_group;\n" ::);
#else
  cuda_on_cpu::commit_async_copies();
#endif
}

// cp.async.wait_group kPendingGroups: waits until every group the thread committed but the newest
// kPendingGroups has landed.
template <int kPendingGroups>
__device__ __forceinline__ void cp_async_wait_group() {
  static_assert(kPendingGroups >= 0);
#ifdef __CUDACC__
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPendingGroups) : "memory");
#else
  cuda_on_cpu::wait_async_copies(kPendingGroups);
#endif
}

// cp.async.wait_all: commits the thread's uncommitted copies and waits for every group.
__device__ __forceinline__ void cp_async_wait_all() {
#ifdef __CUDACC__
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#else
  cuda_on_cpu::commit_async_copies();
  cuda_on_cpu::wait_async_copies(0);
#endif
}

// The launch's dynamic shared memory (cudaLaunchConfig_t::dynamicSmemBytes; over 48 KiB only for a
// kernel given cudaFuncAttributeMaxDynamicSharedMemorySize), 16-byte aligned. Its contents are
// undefined at the block's start (the CPU implementation fills it with 0xFF bytes).
template <typename T>
__device__ __forceinline__ T* dynamic_shared_memory() {
  static_assert(alignof(T) <= 16);
#ifdef __CUDACC__
  extern __shared__ __align__(16) unsigned char dynamic_shared_bytes[];
  return reinterpret_cast<T*>(dynamic_shared_bytes);
#else
  return static_cast<T*>(cuda_on_cpu::dynamic_shared_memory());
#endif
}

}  // namespace trainctl::cuda_kernels
