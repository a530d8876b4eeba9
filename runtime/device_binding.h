// The device a run trains on, bound to this rank for the run's lifetime: the one the config asks
// for (train.device), once it is known to have the ops the model needs; local rank r takes
// visible GPU r. Devices other than the CPU say which one each rank took.
#pragma once

#include "bad_input.h"
#include "comm.h"
#include "device.h"
#include "train_spec.h"

namespace trainctl {

// The device's GPUs are not there for this rank (none visible, fewer than the node's ranks, a
// driver that does not answer): bad input for the run as configured, but a failed node check where
// the batch script asked for one (node_check.h).
class DeviceNotVisible : public BadInput {
 public:
  using BadInput::BadInput;
};

class DeviceBinding {
 public:
  // Throws BadInput (exit code 2) where the device cannot be used here: its backend library, the
  // ops the model needs, its GPUs (DeviceNotVisible).
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
