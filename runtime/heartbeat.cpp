// The heartbeat: see heartbeat.h.
#include "heartbeat.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "atomic_file.h"

namespace trainctl {

Heartbeat::Heartbeat(std::string path, bool enabled) : path_(std::move(path)), enabled_(enabled) {}

void Heartbeat::beat(int64_t step) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (last_beat_ && now - *last_beat_ < std::chrono::milliseconds(100)) return;
  last_beat_ = now;
  const std::string temporary = temporary_path_for(path_);
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << step << '\n';
    if (!out.flush())
      throw std::runtime_error(fmt::format("cannot write {}: {}", temporary, std::strerror(errno)));
  }
  if (std::rename(temporary.c_str(), path_.c_str()) != 0)
    throw std::runtime_error(fmt::format("cannot rename {} to {}: {}", temporary, path_, std::strerror(errno)));
}

}  // namespace trainctl
