// TRAINCTL_DEVICE_ACTIVITY=FILE (docs/runtime.md): rank 0 appends a JSON line per step to FILE
// with what the device did in it, where the device counts (the CPU implementation of CUDA): the
// launches, cuBLASLt calls and host waits of the step, and the peak of device memory so far.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "device.h"

namespace trainctl {

class DeviceActivityLog {
 public:
  // `writes`: this rank writes the file (rank 0).
  DeviceActivityLog(const Device& device, bool writes);

  // What the device has counted before a step; nothing when no file is named, or the device
  // does not count.
  std::optional<DeviceActivity> before_step() const;
  // Writes the step's line: what the device counted since `before`.
  void after_step(int64_t step, const DeviceActivity& before) const;

 private:
  const Device& device_;
  bool writes_;
  const std::string file_;  // empty when TRAINCTL_DEVICE_ACTIVITY is unset
};

}  // namespace trainctl
