// The CPU implementation's stand-in for the toolkit's cuda_runtime.h, found first on the include
// path when kernels/cuda/ builds with the host compiler. It keeps the toolkit's own declarations
// (cuda_runtime_api.h: cudaMalloc, cudaStream_t, cudaLaunchConfig_t, dim3, ...), which this
// project's cuda_on_cpu/ defines, and replaces only what the host compiler cannot take from the
// toolkit: CUDA's templated cudaLaunchKernelEx, which the toolkit's header turns into a
// type-erased call that no CPU could run, and what kernels use on the device (kernel_api.h).
#pragma once

#ifdef __CUDA_RUNTIME_H__
#error "the toolkit's cuda_runtime.h was included before cuda_on_cpu's: include <cuda_runtime.h> first"
#endif
// The toolkit's cuda_runtime.h, should a toolkit header include it later, is then left out.
#define __CUDA_RUNTIME_H__

#include "cuda_on_cpu/kernel_api.h"
