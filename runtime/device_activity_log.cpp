// The device's activity per step: see device_activity_log.h.
#include "device_activity_log.h"

#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

namespace trainctl {

namespace {

std::string device_activity_file() {
  const char* file = std::getenv("TRAINCTL_DEVICE_ACTIVITY");
  return file != nullptr ? file : "";
}

}  // namespace

DeviceActivityLog::DeviceActivityLog(const Device& device, bool writes)
    : device_(device), writes_(writes), file_(device_activity_file()) {}

std::optional<DeviceActivity> DeviceActivityLog::before_step() const {
  if (file_.empty()) return std::nullopt;
  return device_.info.activity();
}

void DeviceActivityLog::after_step(int64_t step, const DeviceActivity& before) const {
  const std::optional<DeviceActivity> after = device_.info.activity();
  if (!after || !writes_) return;
  std::ofstream out(file_, std::ios::app);
  out << fmt::format("{{\"step\":{},\"kernel_launches\":{},\"blas_calls\":{},\"host_syncs\":{},"
                     "\"upload_waits\":{},\"peak_device_bytes\":{}}}",
                     step, after->kernel_launches - before.kernel_launches, after->blas_calls - before.blas_calls,
                     after->host_syncs - before.host_syncs, after->upload_waits - before.upload_waits,
                     after->peak_device_bytes)
      << '\n';
  if (!out) throw std::runtime_error(fmt::format("{}: cannot append to it", file_));
}

}  // namespace trainctl
