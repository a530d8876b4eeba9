// The device registry (the CPU table built in, the CUDA table from the backend library that
// TRAINCTL_CUDA_BACKEND names, opened on first use), the checks that a table has no hole, and the
// families a model can ask a device for.
#include <dlfcn.h>

#include <fmt/format.h>

#include <cstdlib>
#include <initializer_list>
#include <mutex>
#include <string>

#include "check.h"
#include "device.h"

namespace trainctl {

namespace {

struct OpSlot {
  const char* name;
  bool filled;
};

void require_filled(const Device& device, const char* family, std::initializer_list<OpSlot> ops) {
  for (const OpSlot& op : ops)
    if (!op.filled)
      throw std::logic_error(
          fmt::format("{}.{}.{} is empty: a device table must fill every op of each family it has", device.name,
                      family, op.name));
}

bool has_family(const Device& device, OpFamily family) {
  switch (family) {
    case OpFamily::kNorm: return device.norm.has_value();
    case OpFamily::kEmbedding: return device.embedding.has_value();
    case OpFamily::kAttention: return device.attention.has_value();
  }
  return false;
}

// The library file TRAINCTL_CUDA_BACKEND names. A bare file name is looked for where the
// programs' run path points: the build's kernels/ directory, or the installed library directory.
std::string cuda_backend_file() {
  const char* chosen = std::getenv("TRAINCTL_CUDA_BACKEND");
  const std::string backend = chosen != nullptr && *chosen != '\0' ? chosen : "cuda";
  if (backend == "cuda") return "libtrainctl-cuda.so";
  if (backend == "cpu") return "libtrainctl-cuda-on-cpu.so";
  if (backend.find('/') != std::string::npos) return backend;
  throw DeviceUnavailable(fmt::format(
      "TRAINCTL_CUDA_BACKEND=\"{}\": expected \"cuda\", \"cpu\" or the path of a backend library", backend));
}

// Opens the backend library once and keeps it for the process (its table must outlive every
// caller); a failure is remembered and reported again on every later call.
const Device& cuda_backend() {
  static std::once_flag opened;
  static const Device* table = nullptr;
  static std::string failure;
  std::call_once(opened, [] {
    try {
      const std::string file = cuda_backend_file();
      void* library = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (library == nullptr)
        throw DeviceUnavailable(fmt::format("cannot open the CUDA backend: {}", dlerror()));
      const auto entry = reinterpret_cast<BackendEntry>(dlsym(library, kBackendEntryName));
      if (entry == nullptr)
        throw DeviceUnavailable(fmt::format("{} is not a trainctl backend (no {})", file, kBackendEntryName));
      table = entry(TRAINCTL_VERSION, BackendHost{report_check_failure});
      if (table == nullptr)
        throw DeviceUnavailable(
            fmt::format("{} was built for another trainctl version than this one ({})", file, TRAINCTL_VERSION));
      check_device_table(*table);
    } catch (const DeviceUnavailable& error) {
      failure = error.what();
    }
  });
  if (table == nullptr) throw DeviceUnavailable(failure);
  return *table;
}

}  // namespace

Gemm dense_gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                const float* b, float beta, float* c) {
  return Gemm{.transpose_a = transpose_a, .transpose_b = transpose_b, .m = m, .n = n, .k = k, .alpha = alpha,
              .beta = beta, .a = a, .lda = transpose_a ? m : k, .b = b, .ldb = transpose_b ? k : n, .c = c, .ldc = n};
}

const char* op_family_name(OpFamily family) {
  switch (family) {
    case OpFamily::kNorm: return "norm";
    case OpFamily::kEmbedding: return "embedding";
    case OpFamily::kAttention: return "attention";
  }
  return "unknown";
}

std::vector<OpFamily> missing_families(const Device& device, const std::vector<OpFamily>& needed) {
  std::vector<OpFamily> missing;
  for (const OpFamily family : needed)
    if (!has_family(device, family)) missing.push_back(family);
  return missing;
}

// Names each op once: the slot's name is the member's own, spelled by the preprocessor.
#define TRAINCTL_OP_SLOT(ops, op) OpSlot{#op, (ops).op != nullptr}

void check_device_table(const Device& device) {
  const MemoryOps& memory = device.memory;
  require_filled(device, "memory",
                 {TRAINCTL_OP_SLOT(memory, bind_local), TRAINCTL_OP_SLOT(memory, alloc),
                  TRAINCTL_OP_SLOT(memory, release), TRAINCTL_OP_SLOT(memory, upload),
                  TRAINCTL_OP_SLOT(memory, download), TRAINCTL_OP_SLOT(memory, copy),
                  TRAINCTL_OP_SLOT(memory, fill_zero), TRAINCTL_OP_SLOT(memory, pin_host),
                  TRAINCTL_OP_SLOT(memory, unpin_host), TRAINCTL_OP_SLOT(memory, peak_flops),
                  TRAINCTL_OP_SLOT(memory, peak_allocated_bytes), TRAINCTL_OP_SLOT(memory, unbind)});
  require_filled(device, "streams",
                 {TRAINCTL_OP_SLOT(device.streams, create), TRAINCTL_OP_SLOT(device.streams, destroy)});
  require_filled(device, "blas", {TRAINCTL_OP_SLOT(device.blas, gemm), TRAINCTL_OP_SLOT(device.blas, gemm_bf16)});
  const ElementwiseOps& elementwise = device.elementwise;
  require_filled(device, "elementwise",
                 {TRAINCTL_OP_SLOT(elementwise, bias_act_forward), TRAINCTL_OP_SLOT(elementwise, bias_act_backward),
                  TRAINCTL_OP_SLOT(elementwise, add)});
  require_filled(device, "loss", {TRAINCTL_OP_SLOT(device.loss, softmax_cross_entropy)});
  const OptimizerOps& optimizer = device.optimizer;
  require_filled(device, "optimizer",
                 {TRAINCTL_OP_SLOT(optimizer, sgd_step), TRAINCTL_OP_SLOT(optimizer, adamw_step),
                  TRAINCTL_OP_SLOT(optimizer, sum_squares), TRAINCTL_OP_SLOT(optimizer, scale)});
  if (device.norm)
    require_filled(device, "norm",
                   {TRAINCTL_OP_SLOT(*device.norm, layernorm_forward),
                    TRAINCTL_OP_SLOT(*device.norm, layernorm_backward)});
  if (device.embedding)
    require_filled(device, "embedding",
                   {TRAINCTL_OP_SLOT(*device.embedding, embedding_forward),
                    TRAINCTL_OP_SLOT(*device.embedding, embedding_backward)});
  if (device.attention)
    require_filled(device, "attention",
                   {TRAINCTL_OP_SLOT(*device.attention, attention_forward),
                    TRAINCTL_OP_SLOT(*device.attention, attention_backward)});
  if (device.collectives)
    require_filled(device, "collectives",
                   {TRAINCTL_OP_SLOT(*device.collectives, open), TRAINCTL_OP_SLOT(*device.collectives, close),
                    TRAINCTL_OP_SLOT(*device.collectives, all_reduce_sum),
                    TRAINCTL_OP_SLOT(*device.collectives, reduce_scatter_sum),
                    TRAINCTL_OP_SLOT(*device.collectives, all_gather),
                    TRAINCTL_OP_SLOT(*device.collectives, wait_reductions)});
}

#undef TRAINCTL_OP_SLOT

const Device* find_device(std::string_view name) {
  if (name == "cpu") return &cpu_device();
  if (name == "cuda") return &cuda_backend();
  return nullptr;
}

}  // namespace trainctl
