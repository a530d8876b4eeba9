// Durable file replacement: see atomic_file.h.
#include "atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

namespace trainctl {

namespace {
// A system_error keeps errno for callers that word their own message; what() is "what path: reason".
[[noreturn]] void fail_io(const std::string& what, const std::string& path) {
  throw std::system_error(errno, std::generic_category(), fmt::format("{} {}", what, path));
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
  const std::string temporary = temporary_path_for(path);
  try {
    // write(2) rather than a stream: a failure keeps its errno (ENOSPC, EFBIG) to report.
    const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) fail_io("cannot write", path);
    size_t written = 0;
    while (written < text.size()) {
      const ssize_t count = write(fd, text.data() + written, text.size() - written);
      if (count < 0 && errno == EINTR) continue;
      if (count < 0) {
        const int write_error = errno;
        close(fd);
        errno = write_error;
        fail_io("cannot write", path);
      }
      written += static_cast<size_t>(count);
    }
    if (close(fd) != 0) fail_io("cannot write", path);
    publish_file(temporary, path);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw;
  }
}

}  // namespace trainctl
