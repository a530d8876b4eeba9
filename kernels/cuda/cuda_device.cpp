// The CUDA device table: the ops of kernels/cuda/ by family (cuda_ops.h), and the entry point of
// the backend library it is built into (libtrainctl-cuda.so with nvcc, libtrainctl-cuda-on-cpu.so
// with the host compiler; kernels/device.h), which also takes the loading program's check
// reporter for the library's CUDA_CHECKs. Each compute op runs on the CUDA stream its Stream
// holds.
#include <cstdlib>
#include <cstring>

#include "check.h"
#include "cuda/cuda_ops.h"
#include "device.h"

namespace trainctl {

namespace {

BackendHost host{};

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
            .unbind = cuda_kernels::unbind,
        },
    .streams = {.create = cuda_kernels::create_stream, .destroy = cuda_kernels::destroy_stream},
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
    .norm =
        NormOps{
            .layernorm_forward = cuda_kernels::layernorm_forward,
            .layernorm_backward = cuda_kernels::layernorm_backward,
        },
    .embedding =
        EmbeddingOps{
            .embedding_forward = cuda_kernels::embedding_forward,
            .embedding_backward = cuda_kernels::embedding_backward,
        },
    .attention =
        AttentionOps{
            .attention_forward = cuda_kernels::attention_forward,
            .attention_backward = cuda_kernels::attention_backward,
        },
// Built with NCCL (collectives.cpp), or for one rank.
#ifdef TRAINCTL_CUDA_COLLECTIVES
    .collectives =
        CollectiveOps{
            .open = cuda_kernels::open_group,
            .close = cuda_kernels::close_group,
            .all_reduce_sum = cuda_kernels::all_reduce_sum,
            .reduce_scatter_sum = cuda_kernels::reduce_scatter_sum,
            .all_gather = cuda_kernels::all_gather,
            .wait_reductions = cuda_kernels::wait_reductions,
        },
#else
    .collectives = std::nullopt,
#endif
};

}  // namespace

void report_check_failure(const char* statement, const char* file, int line, const std::string& detail) {
  host.report_check_failure(statement, file, line, detail);
  // The host's reporter throws; should it return, there is no way on.
  std::abort();
}

}  // namespace trainctl

extern "C" [[gnu::visibility("default")]] const trainctl::Device* trainctl_backend_device(
    const char* trainctl_version, const trainctl::BackendHost& host) {
  if (std::strcmp(trainctl_version, TRAINCTL_VERSION) != 0) return nullptr;
  trainctl::host = host;
  return &trainctl::kCudaDevice;
}
