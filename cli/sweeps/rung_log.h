// A scheduled sweep's record of its rungs, rungs.jsonl in the sweep directory: one line per trial
// and rung it reached, {"trial":3,"rung":1,"step":60,"value":0.8123} (null for a value that was
// not finite), in the order the trials reached them. The decisions are a function of these lines
// alone (rung_decisions.h). And the lock that its writers, and the manifest's, hold.
#pragma once

#include <vector>

#include "sweeps/rung_decisions.h"
#include "sweeps/sweep_dir.h"

namespace trainctl {

// flock(2) on the sweep directory's sweep.lock, held from construction to destruction: the one
// writer of rungs.jsonl and of the manifest at a time, on any node. The lock must hold across the
// nodes, as flock does on a local filesystem, on NFS (Linux takes it as a byte-range lock of the
// whole file, which the server arbitrates), on GPFS, and on Lustre mounted with -o flock (not
// -o localflock). Throws std::system_error when the file cannot be opened or locked.
class SweepLock {
 public:
  explicit SweepLock(const SweepDir& sweep);
  ~SweepLock();
  SweepLock(const SweepLock&) = delete;
  SweepLock& operator=(const SweepLock&) = delete;

 private:
  int fd_ = -1;
};

// The results in the order they were recorded; a line that does not parse (cut short by a crash)
// is skipped. Readers need no lock: lines are only appended, each by one write.
std::vector<RungResult> read_rung_log(const SweepDir& sweep);

// Appends `result` as a line and fsyncs it. The caller holds the SweepLock. A line a crash cut
// short is ended first, so that it stays a line of its own that readers skip.
void append_rung_result(const SweepDir& sweep, const RungResult& result);

}  // namespace trainctl
