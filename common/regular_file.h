// Reading a file that should be a regular one when anything may stand at its path (a run
// directory's files, a config, a webhook's secret): opening a FIFO for reading waits for a writer,
// and a device may never end. The path is stat'ed before it is opened, the open itself does not
// wait (O_NONBLOCK), what was opened is fstat'ed again in case the path changed in between, and
// every read is bounded by its caller.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

namespace trainctl {

// Why a path could not be read as a regular file; what() is the problem alone ("does not exist",
// "is a FIFO, not a regular file", "is larger than 4096 bytes"), for the caller to put after
// the path in words of its own.
class RegularFileError : public std::runtime_error {
 public:
  enum class Reason { kMissing, kDirectory, kNotRegular, kUnreadable, kTooLarge };
  RegularFileError(Reason reason, const std::string& problem) : std::runtime_error(problem), reason_(reason) {}
  Reason reason() const { return reason_; }

 private:
  Reason reason_;
};

// What a stat mode is, as messages name it: "a FIFO", "a character device", "a directory", ...
const char* file_kind(mode_t mode);

// An open regular file (a symbolic link to one is followed). Throws RegularFileError.
class RegularFile {
 public:
  explicit RegularFile(const std::string& path);
  ~RegularFile();
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;

  // Its permission bits, as fstat saw them.
  mode_t permissions() const { return mode_ & 07777; }
  // Moves to byte `offset`: a file that grows (a job's log) is read on from where it was left.
  void seek(int64_t offset);
  // Up to buffer.size() bytes from where the last read ended; 0 at the end of the file.
  size_t read(std::span<char> buffer);
  // The rest of the file; RegularFileError kTooLarge when it is more than `max_bytes`.
  std::string read_all(size_t max_bytes);

 private:
  int fd_ = -1;
  mode_t mode_ = 0;
};

// The whole file at `path`; RegularFileError kTooLarge when it holds more than `max_bytes`.
std::string read_regular_file(const std::string& path, size_t max_bytes);

}  // namespace trainctl
