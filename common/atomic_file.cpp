// Durable file replacement: see atomic_file.h.
#include "atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

namespace trainctl {

namespace {
[[noreturn]] void fail_io(const std::string& what, const std::string& path) {
  throw std::runtime_error(fmt::format("{} {}: {}", what, path, std::strerror(errno)));
}
}  // namespace

std::string temporary_path_for(const std::string& final_path) {
  std::filesystem::path path(final_path);
  return (path.parent_path() / fmt::format(".{}.tmp-{}", path.filename().string(), getpid())).string();
}

namespace {
// Opens `path` and hands its descriptor to fsync or syncfs.
void sync_through(const std::string& path, int (*sync)(int), const char* failure) {
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) fail_io("cannot open", path);
  int result = sync(fd);
  close(fd);
  if (result != 0) fail_io(failure, path);
}
}  // namespace

void fsync_path(const std::string& path) { sync_through(path, fsync, "cannot fsync"); }

void sync_filesystem(const std::string& path) { sync_through(path, syncfs, "cannot sync the filesystem of"); }

void publish_file(const std::string& temporary, const std::string& final_path) {
  fsync_path(temporary);
  if (std::rename(temporary.c_str(), final_path.c_str()) != 0) fail_io("cannot rename to", final_path);
  std::string directory = std::filesystem::path(final_path).parent_path().string();
  fsync_path(directory.empty() ? "." : directory);
}

void write_file_atomically(const std::string& path, const std::string& text) {
  std::string temporary = temporary_path_for(path);
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) fail_io("cannot write", temporary);
  }
  publish_file(temporary, path);
}

}  // namespace trainctl
