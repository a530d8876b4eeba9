// The CUDA device table, made from the op list (device_table.h): the ops of kernels/cuda/ by family
// (cuda_ops.h), and the entry point of the backend library it is built into (libtrainctl-cuda.so
// with nvcc, libtrainctl-cuda-on-cpu.so with the host compiler; kernels/device.h), which also
// takes the loading program's check reporter for the library's CUDA_CHECKs. Each compute op runs
// on the CUDA stream its Stream holds.
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "check.h"
#include "cuda/cuda_ops.h"
#include "device_table.h"

namespace trainctl {

namespace {

BackendHost host{};

// Every family; the collectives where the library is built with NCCL (collectives.cpp), else it
// trains on one rank.
constexpr bool cuda_has(std::string_view family) {
#ifdef TRAINCTL_CUDA_COLLECTIVES
  static_cast<void>(family);
  return true;
#else
  return family != "collectives";
#endif
}

// A template, so that without NCCL the collectives' ops stand only in discarded branches
// (device_table.h).
template <bool = true>
constexpr Device cuda_table() {
  Device device{.name = "cuda"};
#define TRAINCTL_DEVICE_NAMESPACE cuda_kernels
#define TRAINCTL_DEVICE_HAS(family) cuda_has(family)
#include "device_table.inc"
#undef TRAINCTL_DEVICE_NAMESPACE
#undef TRAINCTL_DEVICE_HAS
  return device;
}

const Device kCudaDevice = cuda_table();

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
