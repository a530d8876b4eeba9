// Counts as text: read as SLURM writes one into the environment (SLURM_PROCID,
// SLURM_RESTART_COUNT, ...), a non-negative decimal integer and nothing else, by the launcher and
// the runtime alike; and bytes written as people read them, by the CLI's estimate and the node
// check alike.
#pragma once

#include <charconv>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace trainctl {

inline std::optional<int64_t> parse_count(std::string_view text) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

// "512 bytes", "40.2 MiB", "4.0 TiB".
inline std::string size_text(int64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} bytes", bytes);
  auto value = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  for (; value >= 1024 && unit + 1 < std::size(kUnits); value /= 1024) ++unit;
  return fmt::format("{:.1f} {}", value, kUnits[unit]);
}

}  // namespace trainctl
