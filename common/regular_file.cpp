// Reading a file that should be a regular one: see regular_file.h.
#include "regular_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace trainctl {

namespace {

[[noreturn]] void refuse_unreadable_file(int error) {
  if (error == ENOENT || error == ENOTDIR) throw RegularFileError(RegularFileError::Reason::kMissing, "does not exist");
  throw RegularFileError(RegularFileError::Reason::kUnreadable,
                         fmt::format("cannot be read: {}", std::strerror(error)));
}

void require_regular_mode(mode_t mode) {
  if (S_ISREG(mode)) return;
  throw RegularFileError(S_ISDIR(mode) ? RegularFileError::Reason::kDirectory : RegularFileError::Reason::kNotRegular,
                         fmt::format("is {}, not a regular file", file_kind(mode)));
}

}  // namespace

const char* file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "a special file";
}

RegularFile::RegularFile(const std::string& path) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) refuse_unreadable_file(errno);
  require_regular_mode(info.st_mode);
  fd_ = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) refuse_unreadable_file(errno);
  if (fstat(fd_, &info) != 0) {
    const int error = errno;
    close(fd_);
    refuse_unreadable_file(error);
  }
  mode_ = info.st_mode;
  if (!S_ISREG(mode_)) {
    close(fd_);
    require_regular_mode(mode_);
  }
}

RegularFile::~RegularFile() { close(fd_); }

void RegularFile::seek(int64_t offset) {
  if (lseek(fd_, static_cast<off_t>(offset), SEEK_SET) < 0) refuse_unreadable_file(errno);
}

size_t RegularFile::read(std::span<char> buffer) {
  ssize_t count = 0;
  do {
    count = ::read(fd_, buffer.data(), buffer.size());
  } while (count < 0 && errno == EINTR);
  if (count < 0) refuse_unreadable_file(errno);
  return static_cast<size_t>(count);
}

std::string read_regular_file(const std::string& path, size_t max_bytes) {
  return RegularFile(path).read_all(max_bytes);
}

std::string RegularFile::read_all(size_t max_bytes) {
  std::string text;
  char buffer[65536];
  while (const size_t count = read(buffer)) {
    if (text.size() + count > max_bytes)
      throw RegularFileError(RegularFileError::Reason::kTooLarge, fmt::format("is larger than {} bytes", max_bytes));
    text.append(buffer, count);
  }
  return text;
}

}  // namespace trainctl
