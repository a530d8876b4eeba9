// The device of a run, bound to this rank: see device_binding.h.
#include "device_binding.h"

#include <cstdio>

#include <fmt/format.h>

#include "bad_input.h"
#include "registry.h"
#include "signals.h"

namespace trainctl {

namespace {

// step(), where the device cannot be used here (its backend library, its GPUs) is bad input:
// `Thrown`, BadInput or DeviceNotVisible.
template <typename Thrown, typename Step>
decltype(auto) usable(const RunSpec& spec, Step step) {
  try {
    return step();
  } catch (const DeviceUnavailable& error) {
    throw Thrown(fmt::format("train.device = \"{}\": {}", spec.train.device, error.what()));
  }
}

}  // namespace

DeviceBinding::DeviceBinding(const RunSpec& spec, const Comm& comm)
    : device_(usable<BadInput>(spec, [&]() -> const Device& { return *find_device(spec.train.device); })) {
  require_op_families(spec.model, device_);
  // The CUDA runtime starts threads of its own at its first call.
  const std::string bound = usable<DeviceNotVisible>(spec, [&] {
    std::string described;
    with_stop_signals_blocked([&] { described = device_.info.bind_local(comm.local_rank(), comm.local_size()); });
    return described;
  });
  if (&device_ != &cpu_device()) {
    fmt::print("trainctl-runtime: rank {} of {} on {}: {}\n", comm.rank(), comm.world_size(), comm.node_name(), bound);
    std::fflush(stdout);
  }
}

DeviceBinding::~DeviceBinding() {
  try {
    device_.info.unbind();
  } catch (const std::exception&) {
  }
}

}  // namespace trainctl
