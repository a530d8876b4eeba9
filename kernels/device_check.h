// The check of a bound device before a job trains on it: that it computes a GEMM as the CPU does,
// and that it has the free memory the run will allocate. A bad GPU (a faulty SM, failing memory, a
// driver that lost it) shows here, in a second, rather than as a NaN or a crash hours into a run.
// The runtime's node check (runtime/node_check.h) and trainctl-launch's for a [program] run it on
// each rank's device.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "device.h"

namespace trainctl {

struct DeviceCheck {
  // The bytes the run will allocate on the device; nullopt where they are not known (a [program]),
  // and free memory goes unchecked.
  std::optional<int64_t> needed_bytes;
  // Test hook (TRAINCTL_TEST_FAIL_NODE_CHECK): an element of the GEMM's output is changed in the
  // device's memory after the device computed it, as a bad GPU would get it wrong, so that the
  // real comparison fails.
  bool perturb_gemm = false;
};

// How a failure names the device: "cpu", or "cuda device 1" for a GPU, the index among the visible
// ones that local rank 1 binds to.
std::string device_label(std::string_view device_name, int local_rank);

// Why the device failed, naming the check, for people: "GEMM differs from the CPU's (worst element
// 17: 3.5 vs 1.25)", "1.2 GiB free, the run needs 3.4 GiB"; nullopt when it passed. The GEMM runs
// on the device bound to this process (InfoOps::bind_local, before) and is compared with a plain
// loop on the host.
std::optional<std::string> check_device(const Device& device, const DeviceCheck& check);

}  // namespace trainctl
