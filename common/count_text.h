// A count as SLURM writes one into the environment (SLURM_PROCID, SLURM_RESTART_COUNT, ...): a
// non-negative decimal integer and nothing else, read by the launcher and the runtime alike.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace trainctl {

inline std::optional<int64_t> parse_count(std::string_view text) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

}  // namespace trainctl
