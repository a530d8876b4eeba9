// Stop signals: SLURM announces the end of a job (time limit, preemption, scancel -s) with a
// signal. The handler only records it; the trainer polls at step boundaries, the ranks agree,
// and the job saves and exits for requeue.
#pragma once

#include <functional>

namespace trainctl {

// Catches SIGTERM, SIGINT, SIGUSR1 and SIGUSR2.
void install_stop_signal_handlers();
// The first stop signal received, or 0.
int received_stop_signal();

// Runs `start` (a library start-up that spawns threads: the CUDA runtime, NCCL) with the stop
// signals blocked, so every thread it creates inherits a mask that blocks them and a stop signal
// always lands on a trainctl thread, whose handler records it. Handlers the library may have
// installed for them are replaced by trainctl's again.
void with_stop_signals_blocked(const std::function<void()>& start);

}  // namespace trainctl
