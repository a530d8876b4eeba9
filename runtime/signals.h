// Stop signals: SLURM announces the end of a job (time limit, preemption, scancel -s) with a
// signal. The handler only records it; the trainer polls at step boundaries, the ranks agree,
// and the job saves and exits for requeue.
#pragma once

namespace trainctl {

// Catches SIGTERM, SIGINT, SIGUSR1 and SIGUSR2.
void install_stop_signal_handlers();
// The first stop signal received, or 0.
int received_stop_signal();

}  // namespace trainctl
