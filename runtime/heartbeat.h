// The heartbeat: rank 0 records the last finished step in heartbeat.step, so the batch script's
// hang watchdog (slurm/render.cpp) can tell a slow step from a hung one. The file is replaced by
// a rename, so the watchdog never reads half a number, but not fsynced: it is read on the node
// that writes it, and losing it in a crash costs nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace trainctl {

class Heartbeat {
 public:
  // Ranks other than 0 pass enabled = false: every rank takes part in each step's agreement, so
  // rank 0's progress is the job's.
  Heartbeat(std::string path, bool enabled);

  // Records `step` unless a beat was recorded less than a tenth of a second ago: a fast loop must
  // not turn into a stream of renames, and the step a hang is reported at lags by at most that.
  void beat(int64_t step);

 private:
  std::string path_;
  bool enabled_;
  std::optional<std::chrono::steady_clock::time_point> last_beat_;
};

}  // namespace trainctl
