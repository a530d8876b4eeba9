// One rank of a [program] job: the process srun starts on every slot (trainctl-launch), or one
// of `trainctl run`'s ranks. It starts the user's command with the rank's environment and
// outlives it, to record how it ended where the batch script can read it.
#pragma once

#include <csignal>
#include <cstdint>

#include "child_process.h"
#include "rank_environment.h"
#include "run_layout.h"

namespace trainctl {

// The signals that ask a job to stop: SLURM's --signal choices, Ctrl-C and a hangup.
inline constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2};

// Records how rank `rank`'s program ended, in rank.exits/<rank>: "exit C T" or "signal N T",
// T the time it ended (ns since the epoch), by which the batch script orders the ranks' ends.
// One file per rank, each written atomically: appends to one file from several nodes can
// overwrite each other on NFS.
void record_rank_end(const RunLayout& run, int64_t rank, const ProcessEnd& end);

// Reads `run`'s config.toml and runs its command (placeholders filled in) in its workdir with
// rank_environment(place, run) added, no shell between. The job's stop signal reaches the
// program itself (SLURM signals every process of a step; `trainctl run` each rank's process
// group); this process only waits. Then it records the end (record_rank_end) and, when rank 0's
// program exits 0, writes completed.step. Returns the program's exit code, 128 + N for signal N,
// 127 when the command is not found and 126 when it cannot be executed. Throws ConfigError or
// BadInput for a config it cannot run.
int run_program_rank(const RunLayout& run, const RankPlace& place);

}  // namespace trainctl
