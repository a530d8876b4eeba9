// Hang reports, async-signal-safe: see hang_report.h.
#include "hang_report.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

namespace trainctl {

SignalSafeText& SignalSafeText::text(std::string_view part) {
  const size_t taken = std::min(part.size(), kCapacity - size_);
  std::copy_n(part.data(), taken, buffer_ + size_);
  size_ += taken;
  return *this;
}

SignalSafeText& SignalSafeText::integer(int64_t value) {
  char digits[24];
  size_t count = 0;
  // In unsigned arithmetic, so that INT64_MIN negates.
  uint64_t magnitude = value < 0 ? 0 - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
  do {
    digits[sizeof(digits) - ++count] = static_cast<char>('0' + magnitude % 10);
    magnitude /= 10;
  } while (magnitude != 0);
  if (value < 0) digits[sizeof(digits) - ++count] = '-';
  return text({digits + sizeof(digits) - count, count});
}

SignalSafeText& SignalSafeText::tenths(int64_t tenths) {
  if (tenths < 0) {
    text("-");
    tenths = -tenths;
  }
  const char decimal[2] = {'.', static_cast<char>('0' + tenths % 10)};
  return integer(tenths / 10).text({decimal, 2});
}

HangReportPath hang_report_path(const RunLayout& run, int64_t rank) {
  HangReportPath path;
  std::snprintf(path.directory, sizeof(path.directory), "%s", run.hang().c_str());
  std::snprintf(path.file, sizeof(path.file), "%s/%lld", run.hang().c_str(), static_cast<long long>(rank));
  return path;
}

int start_hang_report(const HangReportPath& path, std::string_view first_line) {
  // EEXIST, or a failure that the open below reports as well.
  mkdir(path.directory, 0777);
  const int fd = open(path.file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return -1;
  write_all(fd, first_line);
  write_all(fd, "\n");
  return fd;
}

void write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t written = write(fd, bytes.data(), bytes.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;
    bytes.remove_prefix(static_cast<size_t>(written));
  }
}

}  // namespace trainctl
