// The CPU reference table: every family, the transformer's included. GEMM runs on OpenBLAS, the
// rest as plain loops that define what every other device must compute (within the tolerances
// its tests state).
#include "cpu_ops.h"

namespace trainctl {

namespace {

const Device kCpuDevice{
    .name = "cpu",
    .memory = {.bind_local = cpu::bind_local,
               .alloc = cpu::alloc,
               .release = cpu::release,
               .upload = cpu::copy,
               .download = cpu::copy,
               .copy = cpu::copy,
               .fill_zero = cpu::fill_zero,
               .pin_host = cpu::pin_host,
               .unpin_host = cpu::unpin_host,
               .peak_flops = cpu::peak_flops,
               .peak_allocated_bytes = cpu::peak_allocated_bytes,
               .unbind = cpu::unbind},
    .streams = {.create = cpu::create_stream, .destroy = cpu::destroy_stream},
    .blas = {.gemm = cpu::gemm, .gemm_bf16 = cpu::gemm_bf16},
    .elementwise = {.bias_act_forward = cpu::bias_act_forward,
                    .bias_act_backward = cpu::bias_act_backward,
                    .add = cpu::add},
    .loss = {.softmax_cross_entropy = cpu::softmax_cross_entropy},
    .optimizer = {.sgd_step = cpu::sgd_step,
                  .adamw_step = cpu::adamw_step,
                  .sum_squares = cpu::sum_squares,
                  .scale = cpu::scale},
    .norm = NormOps{.layernorm_forward = cpu::layernorm_forward, .layernorm_backward = cpu::layernorm_backward},
    .embedding = EmbeddingOps{.embedding_forward = cpu::embedding_forward,
                              .embedding_backward = cpu::embedding_backward},
    .attention = AttentionOps{.attention_forward = cpu::attention_forward,
                              .attention_backward = cpu::attention_backward},
    // Host memory is averaged by the runtime's MPI (runtime/grad_sync.h).
    .collectives = std::nullopt,
};

}  // namespace

const Device& cpu_device() { return kCpuDevice; }

}  // namespace trainctl
