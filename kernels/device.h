// The device seam: the operations the models compute with, grouped by op family (memory, blas,
// elementwise, norm, embedding, attention, loss, optimizer). Each family is one file per device
// (kernels/cpu/<family>.cpp, kernels/cuda/<family>.cu). The CPU table is always built and is
// the reference: every op of another device has a CPU op with the same signature that tests
// compare it against. A CUDA table registers itself only when compiled in.
//
// Conventions: matrices are row-major; pointers are device pointers of the table's device,
// except host scalars (loss_sum, correct, the sum_squares result). Every compute op takes the
// Stream it is ordered on first. "Accumulates" means the op adds into its output (gradients
// summed over micro-batches and over the uses of a tensor); otherwise it overwrites.
//
// A family is either whole or absent: registration (find_device) refuses a table with an empty
// op in a family it has. The transformer families are optional (std::optional), so that a device
// can run the MLP before it has them; a model asks for what it needs (missing_families).
//
// The CPU table is built into every program. The CUDA table lives in a backend library that
// find_device("cuda") opens on first use (ggml's way), so that a CPU run maps no CUDA library:
// libtrainctl-cuda.so (nvcc, cuBLASLt, NCCL) or libtrainctl-cuda-on-cpu.so (the same sources
// built with the host compiler against cuda_on_cpu/, a CPU implementation of the CUDA they use).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "activation.h"

namespace trainctl {

// The queue an op is ordered on: a cudaStream_t on CUDA (null: the legacy default stream);
// unused on the CPU, where every op completes before it returns.
struct Stream {
  void* handle = nullptr;
};

// The device a config asks for cannot be used here (no GPU visible, fewer GPUs than ranks on the
// node): bad input for this machine, which the runtime reports with exit code 2.
class DeviceUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct MemoryOps {
  // Binds the calling process to its device as local rank `local_rank` of `local_size` ranks on
  // this node, and says which device that is, for the run's log. CUDA takes visible device
  // `local_rank` (CUDA_VISIBLE_DEVICES decides which are visible) and throws DeviceUnavailable
  // when there are fewer than `local_size`.
  std::string (*bind_local)(int local_rank, int local_size);
  void* (*alloc)(size_t bytes);
  void (*release)(void* pointer);
  // Host <-> device copies, ordered after earlier work on `stream`; complete when they return,
  // so the host buffer may be reused or read at once.
  void (*upload)(Stream stream, void* device_dst, const void* host_src, size_t bytes);
  void (*download)(Stream stream, void* host_dst, const void* device_src, size_t bytes);
  // Device to device, ordered on `stream` like a kernel.
  void (*copy)(Stream stream, void* device_dst, const void* device_src, size_t bytes);
  void (*fill_zero)(Stream stream, float* x, int64_t n);
  // Page-locks host memory that copies target again and again (checkpoint staging), so they run
  // at full speed; nothing to do on the CPU.
  void (*pin_host)(void* host, size_t bytes);
  void (*unpin_host)(void* host);
  // The dense peak of one rank's device in FLOP/s for fp32 or bf16 GEMMs (for MFU estimates);
  // 0 when unknown.
  double (*peak_flops)(bool bf16);
  // The most bytes this process has held allocated through `alloc` at once (scratch that ops keep
  // for themselves is not counted); 0 on the CPU, whose device memory is host memory and counts in
  // the process's resident set.
  int64_t (*peak_allocated_bytes)();
  // Releases what the table keeps for itself between calls (ops' scratch, cached GEMM plans,
  // library handles) once the caller's own buffers are released; the rank binds again before
  // computing on it again. Called before exit, while the device's libraries are still up.
  void (*unbind)();
};

struct StreamOps {
  // A queue of its own: ops on it run in order after each other, and synchronize with no other
  // stream (the legacy default stream, Stream{}, included).
  Stream (*create)();
  // After the work queued on it is done.
  void (*destroy)(Stream stream);
};

// One GEMM, or `batch` of them at fixed strides: for i < batch,
//   C_i[m,n] = alpha * op(A_i) op(B_i) + beta * C_i,  X_i = X + i * stride_x,
// where op(A) is [m,k] (A stored [k,m] when transpose_a) and op(B) is [k,n]; lda, ldb, ldc are
// the row strides (elements between rows) of A, B and C as stored.
struct Gemm {
  bool transpose_a = false, transpose_b = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f, beta = 0.0f;
  const float* a = nullptr;
  int64_t lda = 0, stride_a = 0;
  const float* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  float* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
  int64_t batch = 1;
};

// A single GEMM of packed (unstrided) matrices, the common case.
Gemm dense_gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                const float* b, float beta, float* c);

struct BlasOps {
  void (*gemm)(Stream stream, const Gemm& gemm);
  // gemm with A and B rounded to bfloat16 (to nearest, ties to even) and the products summed in
  // fp32 into fp32 C: the compute of precision = "bf16", whose weights stay fp32.
  void (*gemm_bf16)(Stream stream, const Gemm& gemm);
};

struct ElementwiseOps {
  // z[r,c] += bias[c], then out = act(z); z keeps the pre-activation for the backward pass.
  // `out` may be z itself (then only for kNone is the pre-activation lost, which needs none).
  void (*bias_act_forward)(Stream stream, float* z, const float* bias, float* out, int64_t rows, int64_t cols,
                           Activation act);
  // grad_z = grad_out * act'(z) (grad_z may alias grad_out); grad_bias[c] accumulates the sum
  // over rows of grad_z. `out` is the forward's act(z) (GELU's erf derivative reuses the cdf it
  // holds); for kNone, z and out are not read.
  void (*bias_act_backward)(Stream stream, const float* grad_out, const float* z, const float* out, float* grad_z,
                            float* grad_bias, int64_t rows, int64_t cols, Activation act);
  // out = a + b (out may be a or b): the residual connection, and gradient accumulation.
  void (*add)(Stream stream, float* out, const float* a, const float* b, int64_t n);
};

struct NormOps {
  // LayerNorm over the last dimension of x [rows, cols]:
  //   out = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var + eps) (biased variance);
  // saves mean [rows] and rstd [rows] for the backward pass.
  void (*layernorm_forward)(Stream stream, float* out, float* mean, float* rstd, const float* x, const float* weight,
                            const float* bias, int64_t rows, int64_t cols, float eps);
  // Accumulates grad_x, grad_weight and grad_bias from grad_out.
  void (*layernorm_backward)(Stream stream, float* grad_x, float* grad_weight, float* grad_bias,
                             const float* grad_out, const float* x, const float* weight, const float* mean,
                             const float* rstd, int64_t rows, int64_t cols);
};

struct EmbeddingOps {
  // out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:] for tokens [batch, seq], wte [vocab, channels],
  // wpe [>= seq, channels].
  void (*embedding_forward)(Stream stream, float* out, const int32_t* tokens, const float* wte, const float* wpe,
                            int64_t batch, int64_t seq, int64_t channels);
  // Accumulates grad_wte[tokens[b,t],:] += grad_out[b,t,:] and grad_wpe[t,:] += grad_out[b,t,:],
  // in a fixed order (deterministic).
  void (*embedding_backward)(Stream stream, float* grad_wte, float* grad_wpe, const float* grad_out,
                             const int32_t* tokens, int64_t batch, int64_t seq, int64_t channels);
};

struct AttentionOps {
  // Causal multi-head self-attention. qkv [batch, seq, 3*channels] holds q, k and v side by side
  // (GPT-2's c_attn output); head h of each is columns [h*d, (h+1)*d), d = channels / heads.
  // out [batch, seq, channels] = softmax(q k^T / sqrt(d), masked to j <= i) v, heads side by
  // side. Saves lse [batch, heads, seq], the log-sum-exp of each row of scaled scores, so that
  // backward recomputes the probabilities instead of keeping a seq x seq matrix per head.
  void (*attention_forward)(Stream stream, float* out, float* lse, const float* qkv, int64_t batch, int64_t seq,
                            int64_t channels, int64_t heads);
  // grad_qkv [batch, seq, 3*channels] (overwritten) from grad_out, given the forward's qkv, out
  // and lse.
  void (*attention_backward)(Stream stream, float* grad_qkv, const float* grad_out, const float* qkv,
                             const float* out, const float* lse, int64_t batch, int64_t seq, int64_t channels,
                             int64_t heads);
};

struct LossOps {
  // loss_sum = sum over rows of -log softmax(logits)[label]; correct = rows whose argmax is the
  // label. grad_logits (null for evaluation) = (softmax - onehot(label)) * grad_scale. A row is
  // row_stride logits of which the first `classes` count: the rest pad a vocabulary for the GEMMs
  // (GPT-2's 50257 to 50304), take no probability, and get a gradient of exactly 0.
  void (*softmax_cross_entropy)(Stream stream, const float* logits, const int32_t* labels, float* grad_logits,
                                int64_t rows, int64_t classes, int64_t row_stride, float grad_scale, double* loss_sum,
                                int64_t* correct);
};

struct OptimizerOps {
  // PyTorch SGD: g += wd * p; buf = momentum * buf + g; p -= lr * buf (buf starts at zero).
  // Hyperparameters are doubles, as PyTorch's are Python floats: derived scalars such as
  // 1 - beta2 are computed in double and rounded once, so the state matches torch.optim's.
  void (*sgd_step)(Stream stream, float* param, const float* grad, float* momentum_buffer, int64_t n, double lr,
                   double momentum, double weight_decay);
  // PyTorch AdamW (decoupled weight decay, bias-corrected); `step` counts from 1.
  void (*adamw_step)(Stream stream, float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                     double lr, double beta1, double beta2, double eps, double weight_decay, int64_t step);
  // The sum of squares in a fixed order (the gradient norm); a host value.
  double (*sum_squares)(Stream stream, const float* x, int64_t n);
  void (*scale)(Stream stream, float* x, int64_t n, float factor);
};

// One rank's membership in a group of ranks that reduce device memory together (an NCCL
// communicator on CUDA).
struct DeviceGroup;

// Collectives over device memory, on a stream of the group's own, so that a reduction overlaps
// the compute queued after it. Optional: a device whose memory is host memory leaves them to the
// runtime's MPI.
struct CollectiveOps {
  // Joins the group of `ranks` ranks as `rank`; every rank calls it at the same point. `share`
  // broadcasts rank 0's bytes to every rank (how the group's id reaches them).
  DeviceGroup* (*open)(int rank, int ranks, const std::function<void(void* bytes, size_t size)>& share);
  void (*close)(DeviceGroup* group);
  // Sums data[0, count) over the ranks in place, once the work queued on `after` so far is done;
  // the host does not wait.
  void (*all_reduce_sum)(DeviceGroup* group, Stream after, float* data, int64_t count);
  // For ZeRO-1, over a buffer split among the ranks: rank r's range is [bounds[r], bounds[r + 1]),
  // bounds holding ranks + 1 entries. Both start once the work queued on `after` so far is done,
  // as all_reduce_sum does. reduce_scatter_sum: this rank's range becomes the sum over the ranks
  // of theirs (the rest of `data` is undefined after it); all_gather: every rank's range becomes
  // that rank's values.
  void (*reduce_scatter_sum)(DeviceGroup* group, Stream after, float* data, const int64_t* bounds);
  void (*all_gather)(DeviceGroup* group, Stream after, float* data, const int64_t* bounds);
  // Work queued on `stream` from now on waits for every collective started so far; the host does
  // not wait.
  void (*wait_reductions)(DeviceGroup* group, Stream stream);
};

struct Device {
  const char* name;
  MemoryOps memory;
  StreamOps streams;
  BlasOps blas;
  ElementwiseOps elementwise;
  LossOps loss;
  OptimizerOps optimizer;
  // The transformer's families (optional: a device may not have them yet).
  std::optional<NormOps> norm;
  std::optional<EmbeddingOps> embedding;
  std::optional<AttentionOps> attention;
  std::optional<CollectiveOps> collectives;
};

// The op families a model can ask for, by name.
enum class OpFamily { kNorm, kEmbedding, kAttention };
const char* op_family_name(OpFamily family);
// The families of `needed` that `device` lacks.
std::vector<OpFamily> missing_families(const Device& device, const std::vector<OpFamily>& needed);

// Throws std::logic_error naming "<device>.<family>.<op>" for the first empty op of a family the
// table has: a table with a hole is a build defect, found at registration, never a null call.
void check_device_table(const Device& device);

// The table for `name`, "cpu" or "cuda"; null for another name. "cuda" opens its backend library
// on the first call: TRAINCTL_CUDA_BACKEND names it, "cuda" (the default) for
// libtrainctl-cuda.so, "cpu" for libtrainctl-cuda-on-cpu.so, or a path to a library file. Throws
// DeviceUnavailable saying why when it cannot be opened (not built, or a library it needs
// missing on this machine).
const Device* find_device(std::string_view name);

// What a backend library takes from the program that loads it: the program's check reporter
// (common/check.h), whose reports name the rank the program set, for its own CUDA_CHECKs.
struct BackendHost {
  void (*report_check_failure)(const char* statement, const char* file, int line, const std::string& detail);
};

// The entry point a backend library exports (extern "C"): its table, or null when the library was
// built for another trainctl version than `trainctl_version`, whose tables may differ.
using BackendEntry = const Device* (*)(const char* trainctl_version, const BackendHost& host);
inline constexpr const char* kBackendEntryName = "trainctl_backend_device";

// The CPU reference table, always present.
const Device& cpu_device();

}  // namespace trainctl
