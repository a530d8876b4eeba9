// A scheduled sweep's record of its rungs, and its lock: see rung_log.h.
#include "sweeps/rung_log.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "json.h"
#include "run_files.h"

namespace trainctl {

namespace {
[[noreturn]] void fail_io(const char* what, const std::string& path) {
  throw std::system_error(errno, std::generic_category(), std::string(what) + " " + path);
}

// The result a line records, when it is one.
std::optional<RungResult> parse_rung_line(std::string_view text) {
  const Json line = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!line.is_object()) return std::nullopt;
  for (const char* key : {"trial", "rung", "step"})
    if (!line.contains(key) || !line[key].is_number_integer()) return std::nullopt;
  const Json& value = line.value("value", Json());
  if (!value.is_number() && !value.is_null()) return std::nullopt;
  return RungResult{line["trial"].get<int64_t>(), line["rung"].get<int64_t>(), line["step"].get<int64_t>(),
                    value.is_number() ? value.get<double>() : std::nan("")};
}
}  // namespace

SweepLock::SweepLock(const SweepDir& sweep) {
  fd_ = open(sweep.lock().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0) fail_io("cannot open", sweep.lock());
  while (flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int error = errno;
    close(fd_);
    errno = error;
    fail_io("cannot lock", sweep.lock());
  }
}

SweepLock::~SweepLock() { close(fd_); }

std::vector<RungResult> read_rung_log(const SweepDir& sweep) {
  std::vector<RungResult> results;
  // A line torn by a crash is no result (the next append starts a line of its own).
  for_each_run_file_line(sweep.rung_log(), run_file_limit::kLine, [&](std::string_view text, int64_t) {
    if (std::optional<RungResult> result = parse_rung_line(text)) results.push_back(*result);
  });
  return results;
}

void append_rung_result(const SweepDir& sweep, const RungResult& result) {
  const std::string& path = sweep.rung_log();
  std::string line = json_text(Json{{"trial", result.trial}, {"rung", result.rung}, {"step", result.step},
                                    {"value", result.value}}) +
                     "\n";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
  if (fd < 0) fail_io("cannot open", path);
  const off_t size = lseek(fd, 0, SEEK_END);
  char last = '\n';
  if (size > 0 && pread(fd, &last, 1, size - 1) != 1) last = '\n';
  if (last != '\n') line.insert(line.begin(), '\n');
  const bool written = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && fsync(fd) == 0;
  const int error = errno;
  close(fd);
  errno = error;
  if (!written) fail_io("cannot write", path);
}

}  // namespace trainctl
