// The CUDA device table: binding a rank to its GPU, device memory and copies, and the compute ops
// of the .cu files (ops_cuda.h). Everything runs on the legacy default stream, so each op is
// ordered after the previous one, and the runtime orders its NCCL stream against it with events.
#include <cuda_runtime.h>

#include <cstdlib>
#include <exception>
#include <string>

#include <fmt/format.h>

#include "cuda/cuda_check.h"
#include "cuda/ops_cuda.h"
#include "device.h"

namespace trainctl {

namespace {

std::string visible_devices() {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  return visible != nullptr ? fmt::format("CUDA_VISIBLE_DEVICES=\"{}\"", visible) : "CUDA_VISIBLE_DEVICES unset";
}

void cuda_bind_local(int local_rank, int local_size) {
  int count = 0;
  // Not CUDA_CHECK: no usable GPU is a fact about this machine (DeviceUnavailable, bad input for
  // the run), not a failed call.
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess)
    throw DeviceUnavailable(fmt::format("no usable CUDA device: cudaGetDeviceCount failed with {} ({}); {}",
                                        cudaGetErrorName(status), cudaGetErrorString(status), visible_devices()));
  if (count == 0) throw DeviceUnavailable(fmt::format("no CUDA device visible; {}", visible_devices()));
  if (count < local_size)
    throw DeviceUnavailable(fmt::format("{} ranks on this node but only {} GPUs visible ({}); each rank needs a GPU",
                                        local_size, count, visible_devices()));
  CUDA_CHECK(cudaSetDevice(local_rank));
}

void* cuda_alloc(size_t bytes) {
  void* pointer = nullptr;
  CUDA_CHECK(cudaMalloc(&pointer, bytes));
  return pointer;
}

// release and unpin_host run in destructors, also while a CheckFailure unwinds the stack. After a
// device fault every later call fails too; reporting that again would throw out of a destructor
// during unwinding and terminate before the first failure is reported, so it is dropped there.
void cuda_release(void* pointer) {
  if (std::uncaught_exceptions() > 0) {
    static_cast<void>(cudaFree(pointer));
    return;
  }
  CUDA_CHECK(cudaFree(pointer));
}

void cuda_upload(void* device_dst, const void* host_src, size_t bytes) {
  CUDA_CHECK(cudaMemcpy(device_dst, host_src, bytes, cudaMemcpyHostToDevice));
}

void cuda_download(void* host_dst, const void* device_src, size_t bytes) {
  CUDA_CHECK(cudaMemcpy(host_dst, device_src, bytes, cudaMemcpyDeviceToHost));
}

// All-zero bytes are 0.0f.
void cuda_fill_zero(float* x, int64_t n) {
  CUDA_CHECK(cudaMemsetAsync(x, 0, static_cast<size_t>(n) * sizeof(float), 0));
}

void cuda_pin_host(void* host, size_t bytes) { CUDA_CHECK(cudaHostRegister(host, bytes, cudaHostRegisterDefault)); }

void cuda_unpin_host(void* host) {
  if (std::uncaught_exceptions() > 0) {
    static_cast<void>(cudaHostUnregister(host));
    return;
  }
  CUDA_CHECK(cudaHostUnregister(host));
}

constexpr DeviceOps kCudaOps{
    .name = "cuda",
    .bind_local = cuda_bind_local,
    .alloc = cuda_alloc,
    .release = cuda_release,
    .upload = cuda_upload,
    .download = cuda_download,
    .fill_zero = cuda_fill_zero,
    .pin_host = cuda_pin_host,
    .unpin_host = cuda_unpin_host,
    .gemm = cuda_kernels::gemm,
    .gemm_bf16 = cuda_kernels::gemm_bf16,
    .bias_act_forward = cuda_kernels::bias_act_forward,
    .bias_act_backward = cuda_kernels::bias_act_backward,
    .softmax_cross_entropy = cuda_kernels::softmax_cross_entropy,
    .sgd_step = cuda_kernels::sgd_step,
    .adamw_step = cuda_kernels::adamw_step,
    .sum_squares = cuda_kernels::sum_squares,
    .scale = cuda_kernels::scale,
};

}  // namespace

const DeviceOps& cuda_device() { return kCudaOps; }

}  // namespace trainctl
