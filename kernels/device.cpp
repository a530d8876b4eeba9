// The device registry: the CPU table always, a CUDA table when it was compiled in.
#include "device.h"

namespace trainctl {

#ifdef TRAINCTL_HAVE_CUDA
const DeviceOps& cuda_device();
#endif

namespace {
std::vector<const DeviceOps*> registered_devices() {
  std::vector<const DeviceOps*> devices{&cpu_device()};
#ifdef TRAINCTL_HAVE_CUDA
  devices.push_back(&cuda_device());
#endif
  return devices;
}
}  // namespace

const DeviceOps* find_device(std::string_view name) {
  for (const DeviceOps* device : registered_devices())
    if (name == device->name) return device;
  return nullptr;
}

std::vector<std::string> available_devices() {
  std::vector<std::string> names;
  for (const DeviceOps* device : registered_devices()) names.emplace_back(device->name);
  return names;
}

}  // namespace trainctl
