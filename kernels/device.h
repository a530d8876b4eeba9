// The device seam: the operations the models compute with, grouped by op family. The op list is
// declared once, in device_ops.def, with what each op computes; this header makes the table
// structs and the Device from it, device_table.h each device's declarations and table, and
// device.cpp the check that a table has no hole. Each family is one file per device
// (kernels/cpu/<family>.cpp, kernels/cuda/<family>.cu). The CPU table is always built and is the
// reference: every op of another device has a CPU op with the same signature that tests compare it
// against, in each element type it takes.
//
// The CPU table is built into every program. The CUDA table lives in a backend library that
// find_device("cuda") opens on first use (ggml's way), so that a CPU run maps no CUDA library:
// libtrainctl-cuda.so (nvcc, cuBLASLt, NCCL) or libtrainctl-cuda-on-cpu.so (the same sources built
// with the host compiler against cuda_on_cpu/, a CPU implementation of the CUDA they use).
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
#include "element_type.h"

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

// What a device has done since the process started, where it counts (info.activity): the launches
// queued (kernels, memsets and device-to-device copies), the cuBLASLt matmuls, the times the host
// waited for the device (a wait for a batch's transfer to the device counted apart), and the most
// device memory held at once, the ops' own scratch included.
struct DeviceActivity {
  int64_t kernel_launches = 0;
  int64_t blas_calls = 0;
  int64_t host_syncs = 0;
  int64_t upload_waits = 0;
  int64_t peak_device_bytes = 0;
};

// cuBLASLt's workspace, which the CUDA table's GEMMs keep from their first call on (room for the
// split-K and stream-K algorithms its heuristic may choose): device memory a GPU rank holds
// beside its buffers, which `trainctl estimate` counts.
constexpr int64_t kGpuGemmWorkspaceBytes = int64_t{32} << 20;

// What runs after a GEMM's product, in the same call (cuBLASLt's epilogues), in row-major terms:
// with P = alpha op(A) op(B) + beta C,
//   kBias:         C = P + bias[j]
//   kGeluBias:     aux = P + bias[j], C = gelu(aux)   (GPT-2's tanh GELU; aux in C's type)
//   kGeluGrad:     C = P * gelu'(aux)                  (aux: the forward's kGeluBias aux)
//   kBiasGradA:    C = P, bias_grad[i] += sum over k of op(A)[i, k]    (m sums)
//   kBiasGradB:    C = P, bias_grad[j] += sum over k of op(B)[k, j]    (n sums)
// The bias has C's element type; bias_grad is float and accumulates, so a bias-gradient epilogue
// takes a float C. The epilogue works on the fp32 result, which is rounded once into C.
enum class Epilogue { kNone, kBias, kGeluBias, kGeluGrad, kBiasGradA, kBiasGradB };

// One GEMM, or `batch` of them at fixed strides: for i < batch,
//   C_i[m,n] = epilogue(alpha * op(A_i) op(B_i) + beta * C_i),  X_i = X + i * stride_x,
// where op(A) is [m,k] (A stored [k,m] when transpose_a) and op(B) is [k,n]; lda, ldb, ldc are the
// row strides (elements between rows) of A, B and C as stored. A and B have one element type, f32
// or bf16; C is f32, or bf16 with bf16 operands. Products are summed in fp32. An epilogue needs
// batch 1.
struct Gemm {
  bool transpose_a = false, transpose_b = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f, beta = 0.0f;
  ConstTypedPtr a{};
  int64_t lda = 0, stride_a = 0;
  ConstTypedPtr b{};
  int64_t ldb = 0, stride_b = 0;
  TypedPtr c{};
  int64_t ldc = 0, stride_c = 0;
  int64_t batch = 1;
  Epilogue epilogue = Epilogue::kNone;
  ConstTypedPtr bias{};  // kBias, kGeluBias: n values of C's type
  TypedPtr aux{};        // kGeluBias (written), kGeluGrad (read): [m, n], row stride ld_aux
  int64_t ld_aux = 0;    // a multiple of 8, at least n (cuBLASLt's condition; both devices check it)
  float* bias_grad = nullptr;  // kBiasGradA, kBiasGradB
};

// Throws std::logic_error for a GEMM that breaks the rules above (every device refuses the same
// ones): operands of two element types, a bf16 C from f32 operands, an epilogue over a batch, a
// bias gradient into a bf16 C, a bias or GELU input of another type than C's, or a GELU input's
// row stride that is not a multiple of 8 of at least n (cuBLASLt's EPILOGUE_AUX_LD).
inline void require_valid_gemm(const Gemm& g) {
  if (g.a.type != g.b.type) throw std::logic_error("GEMM: A and B of different element types");
  if (g.c.type == ElementType::kBf16 && g.a.type != ElementType::kBf16)
    throw std::logic_error("GEMM: a bf16 C needs bf16 operands");
  if (g.epilogue != Epilogue::kNone && g.batch != 1) throw std::logic_error("GEMM: an epilogue needs batch 1");
  const bool bias_grad = g.epilogue == Epilogue::kBiasGradA || g.epilogue == Epilogue::kBiasGradB;
  if (bias_grad && g.c.type != ElementType::kF32) throw std::logic_error("GEMM: a bias gradient needs a float C");
  if ((g.epilogue == Epilogue::kBias || g.epilogue == Epilogue::kGeluBias) && g.bias.type != g.c.type)
    throw std::logic_error("GEMM: the bias has C's element type");
  const bool gelu = g.epilogue == Epilogue::kGeluBias || g.epilogue == Epilogue::kGeluGrad;
  if (gelu && g.aux.type != g.c.type) throw std::logic_error("GEMM: the GELU input has C's element type");
  if (gelu && (g.ld_aux % 8 != 0 || g.ld_aux < g.n))
    throw std::logic_error("GEMM: the GELU input's row stride ld_aux (" + std::to_string(g.ld_aux) +
                           ") must be a multiple of 8 and at least n (" + std::to_string(g.n) + ")");
}

// A single GEMM of packed (unstrided) matrices of one element type, the common case.
Gemm dense_gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, ConstTypedPtr a,
                ConstTypedPtr b, float beta, TypedPtr c);

// The shape of a causal self-attention (the attention family): `heads` query heads and `kv_heads`
// key/value heads of `head_size` columns each, over `seq` positions of `batch` sequences. Query
// head h reads key/value head h / (heads / kv_heads) (Hugging Face's repeat_kv order): kv_heads
// == heads is multi-head attention (GPT-2's), fewer is grouped-query attention (Llama's).
struct AttentionShape {
  int64_t batch, seq, heads, kv_heads, head_size;

  // qkv's row: the query heads, then the key heads, then the value heads.
  int64_t qkv_width() const { return (heads + 2 * kv_heads) * head_size; }
  // out's row: the query heads' outputs side by side.
  int64_t out_width() const { return heads * head_size; }
  // The query heads that share one key/value head.
  int64_t group_size() const { return heads / kv_heads; }
};

// Throws std::invalid_argument for a shape every device refuses: a negative size, no heads, no
// key/value head, or kv_heads not dividing heads.
inline void require_valid_attention(const AttentionShape& s) {
  if (s.batch < 0 || s.seq < 0 || s.head_size < 0 || s.heads <= 0 || s.kv_heads <= 0 || s.heads % s.kv_heads != 0)
    throw std::invalid_argument("attention: batch " + std::to_string(s.batch) + ", seq " + std::to_string(s.seq) +
                                ", " + std::to_string(s.heads) + " heads of " + std::to_string(s.head_size) + ", " +
                                std::to_string(s.kv_heads) +
                                " key/value heads: sizes must not be negative and kv_heads must divide heads");
}

// One optimizer step's target: elements [0, n) of the flat buffers from `parameters` on (a whole
// model's, or a ZeRO-1 shard's), in parameter groups. Group g covers [group_ends[g - 1],
// group_ends[g]) (from 0 for the first) and takes weight_decay where group_decays[g] is 1, none
// where it is 0 (device arrays of `groups` entries). The gradient is clipped first, as
// torch.nn.utils.clip_grad_norm_ does: with max_norm > 0 and norm = sqrt(the sum of
// shard_squares[0, shards) in order), it is multiplied by max_norm / (norm + 1e-6) where that is
// below 1 (shard_squares: device doubles, the optimizer family's sums of squares). Where
// compute_copy is given (the bf16 version the GEMMs read), the step writes it too, in the same pass.
struct ParameterUpdate {
  float* parameters = nullptr;
  const float* gradients = nullptr;
  TypedPtr compute_copy{};
  int64_t n = 0;
  const int64_t* group_ends = nullptr;
  const uint8_t* group_decays = nullptr;
  int64_t groups = 0;
  double weight_decay = 0.0;
  const double* shard_squares = nullptr;
  int64_t shards = 0;
  double max_norm = 0.0;
};

// One rank's membership in a group of ranks that reduce device memory together (an NCCL
// communicator on CUDA).
struct DeviceGroup;

// The family structs: one function pointer per op of device_ops.def.
#define TRAINCTL_FAMILY(family, Type, presence) struct Type {
#define TRAINCTL_OP(family, op, Return, parameters) Return(*op) parameters = nullptr;
#define TRAINCTL_END_FAMILY(family) };
#include "device_ops.def"

// The families a device may lack, by name; a model asks for those it needs (missing_families).
enum class OptionalFamily {
#define TRAINCTL_FAMILY(family, Type, presence) TRAINCTL_OPTIONAL_ENUMERATOR_##presence(family)
#define TRAINCTL_OPTIONAL_ENUMERATOR_required(family)
#define TRAINCTL_OPTIONAL_ENUMERATOR_optional(family) family,
#define TRAINCTL_OP(family, op, Return, parameters)
#define TRAINCTL_END_FAMILY(family)
#include "device_ops.def"
#undef TRAINCTL_OPTIONAL_ENUMERATOR_required
#undef TRAINCTL_OPTIONAL_ENUMERATOR_optional
};

// A table: each required family, and each optional one it has.
struct Device {
  const char* name = nullptr;
#define TRAINCTL_FAMILY(family, Type, presence) TRAINCTL_FAMILY_MEMBER_##presence(Type, family)
#define TRAINCTL_FAMILY_MEMBER_required(Type, family) Type family{};
#define TRAINCTL_FAMILY_MEMBER_optional(Type, family) std::optional<Type> family{};
#define TRAINCTL_OP(family, op, Return, parameters)
#define TRAINCTL_END_FAMILY(family)
#include "device_ops.def"
#undef TRAINCTL_FAMILY_MEMBER_required
#undef TRAINCTL_FAMILY_MEMBER_optional
};

const char* optional_family_name(OptionalFamily family);
// The families of `needed` that `device` lacks.
std::vector<OptionalFamily> missing_families(const Device& device, const std::vector<OptionalFamily>& needed);

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
