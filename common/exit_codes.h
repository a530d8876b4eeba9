// The runtime's exit codes: the contract between trainctl-runtime and the batch script that
// srun's it (slurm/render.cpp), documented in docs/runtime.md.
#pragma once

namespace trainctl::exit_code {
constexpr int kDone = 0;         // training reached train.steps, or this start's step budget (step_budget.h)
constexpr int kFailed = 1;       // a runtime failure (I/O, MPI, a NaN loss, ...)
constexpr int kBadConfig = 2;    // the config or a checkpoint does not fit this run
// EX_TEMPFAIL: saved after a signal; requeue me to continue. Also a [program]'s word, given to it
// as TRAINCTL_EXIT_REQUEUE (docs/programs.md).
constexpr int kSavedRequeue = 75;
// The node check before step 0 failed or timed out (runtime/node_check.h): an infrastructure fault,
// never the user's; requeue the job elsewhere. Every rank exits with it, so srun's code is 76 too.
constexpr int kBadNode = 76;
}  // namespace trainctl::exit_code
