// The CPU implementation's side of kernels/cuda/tensor_cores.cuh, which kernels call: the
// tensor-core instructions mma and ldmatrix (warp operations, as a shuffle is: the 32 lanes'
// fibers meet there), cp.async's copies (per thread, done at the thread's wait) and the launch's
// dynamic shared memory (execution.cpp runs them; matrix_fragments.h has the layouts and the
// arithmetic). An access that a GPU would fault on stops the launch with the GPU's error, sticky:
// cudaErrorMisalignedAddress for an address not aligned to its access, cudaErrorIllegalAddress
// for one outside the block's shared memory or outside device memory. tensor_cores.cuh's wrappers
// are inlined, so that each of these returns into the kernel and reports name the kernel's line.
#pragma once

#include <cstdint>

namespace cuda_on_cpu {

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, of all 32 lanes of the warp: each gives
// its fragments of A, B and C and gets its fragment of D (d may be c).
void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]);

// ldmatrix.sync.aligned.m8n8.x<matrices>{.trans}.shared.b16 (matrices: 1, 2 or 4), of all 32
// lanes of the warp: lane 8 m + r gives the address of row r of matrix m (16 bytes in shared
// memory, 16-byte aligned; the other lanes' addresses are not used); every lane gets its b32 of
// each matrix in fragments[0, matrices).
void load_matrices(uint32_t* fragments, int matrices, bool transposed, const void* row_address);

// cp.async.ca or .cg, .shared.global, of copy_bytes (4, 8 or 16, to which both addresses are
// aligned): the first source_bytes (0 to copy_bytes) from global_source, zeros after them. The
// copy joins the thread's uncommitted group and is done when the thread waits for that group,
// not before: until then the destination holds what it held (the poison, in a fresh block).
void copy_async(void* shared_destination, const void* global_source, int copy_bytes, int source_bytes);
// cp.async.commit_group: the thread's uncommitted copies (none, too) become its newest group.
void commit_async_copies();
// cp.async.wait_group pending_groups: the thread's committed groups but the newest
// pending_groups are done, in the order committed.
void wait_async_copies(int pending_groups);

// The launch's dynamic shared memory (cudaLaunchConfig_t::dynamicSmemBytes), 16-byte aligned,
// filled with 0xFF bytes before each block as static shared memory is; null when the launch
// asked for none.
void* dynamic_shared_memory();

}  // namespace cuda_on_cpu
