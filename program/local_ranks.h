// `trainctl run`'s stand-in for srun, for a [program] config: its ranks on this machine, no
// SLURM, with the environment of the contract (MASTER_ADDR 127.0.0.1 and a free port).
#pragma once

#include <cstdint>

#include "run_layout.h"

namespace trainctl {

// Runs `ranks` ranks of the program in `run`, each a process (run_program_rank) in a process
// group of its own with its program, stdin /dev/null. A stop signal to this process (Ctrl-C, TERM, HUP, USR1,
// USR2) is passed to every rank's group, once. When a rank's program fails, the others get TERM,
// and KILL 10 s later, as under srun --kill-on-bad-exit. Returns 0 when every rank's program
// exited 0, else the code of the first that did not (128 + N for signal N).
int run_local_ranks(const RunLayout& run, int64_t ranks, int64_t restart);

}  // namespace trainctl
