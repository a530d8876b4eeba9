// trainctl-launch's hang report (common/hang_report.h): on SIGQUIT, which the batch script's hang
// watchdog sends before it kills the ranks, it writes hang/R about the process it runs, whose own
// stack it cannot take: the process's state and the kernel function it sleeps in (/proc/PID/stat,
// /proc/PID/wchan), then the kernel stack of its main thread where the kernel lets it be read
// (/proc/PID/stack: root only, on most kernels). It does not pass SIGQUIT on to the program, whose
// default action would end it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "hang_report.h"
#include "run_layout.h"

namespace trainctl {

// The report's first line, "rank=R node=N phase=P pid=PID state=X wchan=W", "-" for what is not
// known. Async-signal-safe.
void format_program_line(SignalSafeText& line, int64_t rank, std::string_view node, std::string_view phase, pid_t pid,
                         std::string_view state, std::string_view wchan);

// Catches SIGQUIT; the reports go to `run`'s hang/<rank>.
void install_program_hang_report(const RunLayout& run, int64_t rank, const std::string& node);
// The process the report is about from now on, in `phase` ("node-check" while the device check
// runs in a child of its own, "program" once the program runs); a string that lives forever.
void report_on_process(pid_t pid, const char* phase);

}  // namespace trainctl
