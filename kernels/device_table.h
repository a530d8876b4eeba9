// How a device makes its table from the op list (device_ops.def): its .cpp defines
// TRAINCTL_DEVICE_NAMESPACE (where its ops are, declared by including device_declarations.inc in it) and
// TRAINCTL_DEVICE_HAS(family), true for each family it has (every required one, and the optional
// ones it implements), and includes device_table.inc in the body of a function template that
// fills a Device named `device`. The template matters: an op of a family the device lacks stands
// in a discarded `if constexpr` branch there, which is never instantiated, so the device need not
// define it.
#pragma once

#include <optional>

#include "device.h"

namespace trainctl {

// A family's struct in the table, made present if it is an optional one.
template <typename Ops>
constexpr Ops& family_ops(Ops& ops) {
  return ops;
}
template <typename Ops>
constexpr Ops& family_ops(std::optional<Ops>& ops) {
  if (!ops) ops.emplace();
  return *ops;
}

}  // namespace trainctl
