// One rank of a [program] job: the process srun starts on every slot (trainctl-launch), or one
// of `trainctl run`'s ranks. It starts the user's command with the rank's environment and
// outlives it, to record how it ended where the batch script can read it.
#pragma once

#include "rank_environment.h"
#include "run_layout.h"

namespace trainctl {

// Reads `run`'s config.toml, writes params.json, and runs the command (placeholders filled in)
// in its workdir with rank_environment(place, run) added, no shell between. The job's stop
// signal reaches the program itself (SLURM signals every process of a step; `trainctl run` each
// rank's process group); this process only waits. Then it appends "rank R exit C" or
// "rank R signal N" to program.exits, and, when rank 0's program exits 0, writes completed.step.
// Returns the program's exit code, 128 + N for signal N, 127 when it cannot be started.
// Throws ConfigError or BadInput for a config it cannot run.
int run_program_rank(const RunLayout& run, const RankPlace& place);

}  // namespace trainctl
