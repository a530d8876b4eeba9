// The device a run trains on, bound to this rank for the run's lifetime: the one the config asks
// for (train.device), once it is known to have the ops the model needs; local rank r takes
// visible GPU r. Devices other than the CPU say which one each rank took.
#pragma once

#include "comm.h"
#include "device.h"
#include "train_spec.h"

namespace trainctl {

class DeviceBinding {
 public:
  // Throws BadInput (exit code 2) where the device cannot be used here: its backend library, its
  // GPUs, the ops the model needs.
  DeviceBinding(const RunSpec& spec, const Comm& comm);
  // Errors are dropped here: a device that failed has been reported already, and unbinding
  // after that only fails again.
  ~DeviceBinding();
  DeviceBinding(const DeviceBinding&) = delete;
  DeviceBinding& operator=(const DeviceBinding&) = delete;

  const Device& device() const { return device_; }

 private:
  const Device& device_;
};

}  // namespace trainctl
