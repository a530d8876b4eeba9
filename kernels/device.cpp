// The device registry (the CPU table always, a CUDA table when it was compiled in), the
// checks that a table has no hole, and the families a model can ask a device for.
#include <fmt/format.h>

#include <initializer_list>

#include "device.h"

namespace trainctl {

#ifdef TRAINCTL_HAVE_CUDA
const Device& cuda_device();
#endif

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

// Every table this build has, each checked the first time any is looked up.
const std::vector<const Device*>& registered_devices() {
  static const std::vector<const Device*> devices = [] {
    std::vector<const Device*> tables{&cpu_device()};
#ifdef TRAINCTL_HAVE_CUDA
    tables.push_back(&cuda_device());
#endif
    for (const Device* table : tables) check_device_table(*table);
    return tables;
  }();
  return devices;
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
                  TRAINCTL_OP_SLOT(memory, peak_allocated_bytes)});
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
}

#undef TRAINCTL_OP_SLOT

const Device* find_device(std::string_view name) {
  for (const Device* device : registered_devices())
    if (name == device->name) return device;
  return nullptr;
}

std::vector<std::string> available_devices() {
  std::vector<std::string> names;
  for (const Device* device : registered_devices()) names.emplace_back(device->name);
  return names;
}

}  // namespace trainctl
