// Counts of what the CPU implementation's device has been asked to do since the process started,
// for tests of the project's CUDA code that check how it uses the device (how many launches and
// matmuls a step queues, how often the host waits for the device, how much memory it holds at
// most), which a GPU's results cannot show. Only code linked into the same module as cuda_on_cpu
// sees them (kernels/cuda/ compiled against it, its own tests); a real CUDA build has no such
// header.
//
// What counts:
//   kernel_launches  work queued on a stream that is not a copy to or from host memory: every
//                    cudaLaunchKernelEx, cudaMemsetAsync and device-to-device cudaMemcpyAsync
//                    that returns cudaSuccess and queues work (a memset or copy of 0 bytes queues
//                    none). Copies between host and device memory are not counted, queued or not.
//   blas_calls       every cublasLtMatmul that returns CUBLAS_STATUS_SUCCESS (one queued product).
//   host_syncs       every call in which the host waits for device work: cudaStreamSynchronize,
//                    cudaDeviceSynchronize, cudaEventSynchronize, and a cudaMemcpyAsync of at
//                    least one byte to or from pageable host memory (which waits for its stream
//                    before it copies). Each counts once when it waits, even with nothing
//                    pending (the host called a blocking function); a call refused before it
//                    waits (a bad handle or range, a sticky error) does not count. cudaFree and
//                    cudaStreamDestroy, which also wait, are not counted. (There is no
//                    synchronous cudaMemcpy.)
//   upload_waits     the waits above that count here instead of in host_syncs: those whose
//                    stream's most recently queued work item (a launch, memset, copy, matmul, or
//                    a cudaStreamWaitEvent's wait), done or not, is a host-to-device copy (the
//                    batch's upload from registered memory, for one). For cudaEventSynchronize,
//                    the item queued last before the event was recorded (an event never
//                    recorded, or whose stream is gone: host_syncs); for a copy to or from
//                    pageable memory, the item queued last before the copy (which is itself
//                    done by the call, never queued). cudaDeviceSynchronize waits for no one
//                    stream and always counts in host_syncs.
//   peak_device_bytes  the most bytes of cudaMalloc'd memory held at once (registered host
//                    memory is not device memory).
//
// The queue log, the order of what is asked of the device (which counts cannot show: that a
// collective was issued before the compute it should overlap was queued, which buffers a step
// holds when): with TRAINCTL_CUDA_ON_CPU_QUEUE_LOG=PREFIX each process writes PREFIX.<pid>, a
// line per event, in the order the host made the calls:
//   alloc aN BYTES        a cudaMalloc (allocation N, counting from 1)
//   free aN               its cudaFree
//   KIND sS aN...         work queued on stream S (0 the legacy default stream, then the created
//                         ones in order): KIND kernel, matmul (cublasLtMatmul), copy (device to
//                         device), memset; or a collective issued on stream S, KIND its NCCL
//                         name (ncclBroadcast, ncclReduce, ncclAllReduce); then the allocations
//                         its device pointers fall in, in argument order.
#pragma once

#include <cstdint>

namespace cuda_on_cpu {

struct Activity {
  int64_t kernel_launches = 0;
  int64_t blas_calls = 0;
  int64_t host_syncs = 0;
  int64_t upload_waits = 0;
  int64_t peak_device_bytes = 0;
};

// The counts so far. Thread-safe: takes the device's lock.
Activity activity();

}  // namespace cuda_on_cpu
