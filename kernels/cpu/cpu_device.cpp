// The CPU reference table: every family but the collectives, the transformer's included, made from
// the op list (device_table.h). GEMM runs on OpenBLAS, the rest as plain loops that define what
// every other device must compute (within the tolerances its tests state).
#include <string_view>

#include "cpu_ops.h"
#include "device_table.h"

namespace trainctl {

namespace {

// Host memory is averaged by the runtime's MPI (runtime/grad_sync.h): no collectives of its own.
constexpr bool cpu_has(std::string_view family) { return family != "collectives"; }

// A template, so that the collectives' ops stand only in discarded branches (device_table.h).
template <bool = true>
constexpr Device cpu_table() {
  Device device{.name = "cpu"};
#define TRAINCTL_DEVICE_NAMESPACE cpu
#define TRAINCTL_DEVICE_HAS(family) cpu_has(family)
#include "device_table.inc"
#undef TRAINCTL_DEVICE_NAMESPACE
#undef TRAINCTL_DEVICE_HAS
  return device;
}

const Device kCpuDevice = cpu_table();

}  // namespace

const Device& cpu_device() { return kCpuDevice; }

}  // namespace trainctl
