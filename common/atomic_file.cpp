// Durable file replacement: see atomic_file.h.
#include "atomic_file.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <utility>

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

void write_file_atomically(const std::string& path, const std::string& text, mode_t permissions) {
  AtomicFileWriter file(path, permissions);
  file.append(text);
  file.publish();
}

AtomicFileWriter::AtomicFileWriter(std::string path, mode_t permissions)
    : path_(std::move(path)), temporary_(temporary_path_for(path_)) {
  fd_ = open(temporary_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, permissions);
  if (fd_ < 0) fail_io("cannot write", path_);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) close(fd_);
  if (temporary_.empty()) return;  // published
  std::error_code ignored;
  std::filesystem::remove(temporary_, ignored);
}

void AtomicFileWriter::append(std::string_view bytes) { write_at(size_, bytes); }

// pwrite(2) rather than a stream: a failure keeps its errno (ENOSPC, EFBIG) to report.
void AtomicFileWriter::write_at(int64_t offset, std::string_view bytes) {
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t count = pwrite(fd_, bytes.data() + written, bytes.size() - written, offset + static_cast<off_t>(written));
    if (count < 0 && errno == EINTR) continue;
    if (count < 0) fail_io("cannot write", path_);
    written += static_cast<size_t>(count);
  }
  size_ = std::max(size_, offset + static_cast<int64_t>(bytes.size()));
}

void AtomicFileWriter::read_at(int64_t offset, std::span<char> bytes) const {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t count = pread(fd_, bytes.data() + done, bytes.size() - done, offset + static_cast<off_t>(done));
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) {
      if (count == 0) errno = EIO;  // the caller asked for bytes it never wrote
      fail_io("cannot read back", temporary_);
    }
    done += static_cast<size_t>(count);
  }
}

void AtomicFileWriter::truncate(int64_t size) {
  if (ftruncate(fd_, size) != 0) fail_io("cannot write", path_);
  size_ = size;
}

void AtomicFileWriter::publish() {
  const int fd = fd_;
  fd_ = -1;
  if (close(fd) != 0) fail_io("cannot write", path_);
  publish_file(temporary_, path_);
  temporary_.clear();
}

AtomicDirectoryWriter::AtomicDirectoryWriter(std::string path) : path_(std::move(path)) {
  while (path_.size() > 1 && path_.back() == '/') path_.pop_back();
  temporary_ = temporary_path_for(path_);
  std::filesystem::remove_all(temporary_);  // a crashed writer's of the same pid
  std::filesystem::create_directories(temporary_);
}

AtomicDirectoryWriter::~AtomicDirectoryWriter() {
  if (temporary_.empty()) return;  // published
  std::error_code ignored;
  std::filesystem::remove_all(temporary_, ignored);
}

void AtomicDirectoryWriter::publish() {
  sync_filesystem(temporary_);
  // rename(2) replaces an empty directory in one step; a full one is exchanged, then removed.
  std::string old;
  if (std::rename(temporary_.c_str(), path_.c_str()) != 0) {
    if (errno != ENOTEMPTY && errno != EEXIST) fail_io("cannot rename to", path_);
    old = temporary_;  // once exchanged, the old directory has the temporary's name
    if (renameat2(AT_FDCWD, temporary_.c_str(), AT_FDCWD, path_.c_str(), RENAME_EXCHANGE) != 0) {
      if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) fail_io("cannot rename to", path_);
      old = temporary_ + ".old";
      if (std::rename(path_.c_str(), old.c_str()) != 0) fail_io("cannot rename", path_);
      if (std::rename(temporary_.c_str(), path_.c_str()) != 0) fail_io("cannot rename to", path_);
    }
  }
  temporary_.clear();
  const std::string directory = std::filesystem::path(path_).parent_path().string();
  fsync_path(directory.empty() ? "." : directory);
  std::error_code ignored;  // the new one is in place: an old one left over is hidden by its dot name
  if (!old.empty()) std::filesystem::remove_all(old, ignored);
}

}  // namespace trainctl
