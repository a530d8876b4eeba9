// The CUDA device table: the ops of kernels/cuda/ by family (cuda_ops.h). Each compute op runs on
// the CUDA stream its Stream holds. The norm, embedding and attention families are not on CUDA
// yet, so a model that needs them reports them missing on this device.
#include "cuda/cuda_ops.h"
#include "device.h"

namespace trainctl {

namespace {

constexpr Device kCudaDevice{
    .name = "cuda",
    .memory =
        {
            .bind_local = cuda_kernels::bind_local,
            .alloc = cuda_kernels::alloc,
            .release = cuda_kernels::release,
            .upload = cuda_kernels::upload,
            .download = cuda_kernels::download,
            .copy = cuda_kernels::copy,
            .fill_zero = cuda_kernels::fill_zero,
            .pin_host = cuda_kernels::pin_host,
            .unpin_host = cuda_kernels::unpin_host,
            .peak_flops = cuda_kernels::peak_flops,
            .peak_allocated_bytes = cuda_kernels::peak_allocated_bytes,
        },
    .blas = {.gemm = cuda_kernels::gemm, .gemm_bf16 = cuda_kernels::gemm_bf16},
    .elementwise =
        {
            .bias_act_forward = cuda_kernels::bias_act_forward,
            .bias_act_backward = cuda_kernels::bias_act_backward,
            .add = cuda_kernels::add,
        },
    .loss = {.softmax_cross_entropy = cuda_kernels::softmax_cross_entropy},
    .optimizer =
        {
            .sgd_step = cuda_kernels::sgd_step,
            .adamw_step = cuda_kernels::adamw_step,
            .sum_squares = cuda_kernels::sum_squares,
            .scale = cuda_kernels::scale,
        },
    .norm = std::nullopt,
    .embedding = std::nullopt,
    .attention = std::nullopt,
};

}  // namespace

const Device& cuda_device() { return kCudaDevice; }

}  // namespace trainctl
