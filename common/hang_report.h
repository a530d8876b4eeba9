// Hang reports (docs/runtime.md, "Hang reports"): before the batch script's watchdog kills ranks
// that finished no step for job.hang_timeout seconds, it sends them SIGQUIT, and each rank writes
// hang/R from its signal handler: a first line of space-separated key=value fields, no spaces
// inside values, that the batch script reads, then free text (a stack). What is here runs in a
// signal handler, so it is async-signal-safe: text built in a fixed buffer with integers
// formatted by hand, and the file written with mkdir, open, write and close alone. The runtime
// (runtime/rank_activity.h) and trainctl-launch (program/program_hang_report.h) each fill in the
// fields they know.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "run_layout.h"

namespace trainctl {

// Text in a fixed buffer; what does not fit is dropped.
class SignalSafeText {
 public:
  SignalSafeText& text(std::string_view part);
  SignalSafeText& integer(int64_t value);
  // tenths / 10 with one decimal: 123 is "12.3".
  SignalSafeText& tenths(int64_t tenths);
  std::string_view view() const { return {buffer_, size_}; }
  // The text with a NUL after it, for a path.
  const char* c_str() {
    buffer_[size_] = '\0';
    return buffer_;
  }

 private:
  static constexpr size_t kCapacity = 512;
  char buffer_[kCapacity + 1];
  size_t size_ = 0;
};

// Where rank R's report goes, worked out before the handler may run: hang/ and hang/R.
struct HangReportPath {
  char directory[4096] = {};
  char file[4096] = {};
};
HangReportPath hang_report_path(const RunLayout& run, int64_t rank);

// Creates the directory where it is missing (the batch script removes it before each start),
// writes `first_line` and a line break over the file, and returns its descriptor for the rest of
// the report (write_all, then close), or -1 where it cannot be written.
int start_hang_report(const HangReportPath& path, std::string_view first_line);
// write(2) until all of `bytes` is written or it fails.
void write_all(int fd, std::string_view bytes);

}  // namespace trainctl
