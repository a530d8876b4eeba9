// The device registry (the CPU table built in, the CUDA table from the backend library that
// TRAINCTL_CUDA_BACKEND names, opened on first use), the check that a table has no hole, and the
// families a model can ask a device for: the last two made from the op list, device_ops.def.
#include <dlfcn.h>

#include <fmt/format.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "check.h"
#include "device.h"

namespace trainctl {

namespace {

// A family's struct in the table, or null for an optional family the table lacks.
template <typename Ops>
const Ops* present(const Ops& ops) {
  return &ops;
}
template <typename Ops>
const Ops* present(const std::optional<Ops>& ops) {
  return ops ? &*ops : nullptr;
}

void require_filled(const Device& device, const char* family, const char* op, bool filled) {
  if (!filled)
    throw std::logic_error(fmt::format(
        "{}.{}.{} is empty: a device table must fill every op of each family it has", device.name, family, op));
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

Gemm dense_gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, ConstTypedPtr a,
                ConstTypedPtr b, float beta, TypedPtr c) {
  return Gemm{.transpose_a = transpose_a, .transpose_b = transpose_b, .m = m, .n = n, .k = k, .alpha = alpha,
              .beta = beta, .a = a, .lda = transpose_a ? m : k, .b = b, .ldb = transpose_b ? k : n, .c = c, .ldc = n};
}

const char* optional_family_name(OptionalFamily family) {
  switch (family) {
#define TRAINCTL_FAMILY(family, Type, presence) TRAINCTL_NAME_CASE_##presence(family)
#define TRAINCTL_NAME_CASE_required(family)
#define TRAINCTL_NAME_CASE_optional(family) \
  case OptionalFamily::family:              \
    return #family;
#define TRAINCTL_OP(family, op, Return, parameters)
#define TRAINCTL_END_FAMILY(family)
#include "device_ops.def"
#undef TRAINCTL_NAME_CASE_required
#undef TRAINCTL_NAME_CASE_optional
  }
  return "unknown";
}

std::vector<OptionalFamily> missing_families(const Device& device, const std::vector<OptionalFamily>& needed) {
  std::vector<OptionalFamily> missing;
  for (const OptionalFamily family : needed) {
    bool has = true;
    switch (family) {
#define TRAINCTL_FAMILY(family, Type, presence) TRAINCTL_HAS_CASE_##presence(family)
#define TRAINCTL_HAS_CASE_required(family)
#define TRAINCTL_HAS_CASE_optional(family) \
  case OptionalFamily::family:             \
    has = device.family.has_value();       \
    break;
#define TRAINCTL_OP(family, op, Return, parameters)
#define TRAINCTL_END_FAMILY(family)
#include "device_ops.def"
#undef TRAINCTL_HAS_CASE_required
#undef TRAINCTL_HAS_CASE_optional
    }
    if (!has) missing.push_back(family);
  }
  return missing;
}

void check_device_table(const Device& device) {
#define TRAINCTL_FAMILY(family, Type, presence) if (const Type* ops = present(device.family)) {
#define TRAINCTL_OP(family, op, Return, parameters) require_filled(device, #family, #op, ops->op != nullptr);
#define TRAINCTL_END_FAMILY(family) }
#include "device_ops.def"
}

const Device* find_device(std::string_view name) {
  if (name == "cpu") return &cpu_device();
  if (name == "cuda") return &cuda_backend();
  return nullptr;
}

}  // namespace trainctl
