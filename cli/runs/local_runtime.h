// trainctl-runtime on this machine, without SLURM: one process, or ranks under mpirun. `trainctl
// run` trains with it; `trainctl estimate --measure` times a few steps with it.
#pragma once

#include <cstdint>
#include <string>

#include "child_process.h"
#include "job_spec.h"
#include "runs/run_dir.h"

namespace trainctl {

// Exports the thread counts the batch script exports (OMP_NUM_THREADS and OPENBLAS_NUM_THREADS,
// job.cpus_per_rank each), unless the caller's environment already chose them.
void export_thread_counts(const JobSpec& job);

// Runs trainctl-runtime on `run_dir` and waits for it: one process, or `ranks` under mpirun.
// With an `output` path, its stdout and stderr go to that file. Returns how it ended; throws
// CannotStart when it (or mpirun) cannot be run.
ProcessEnd run_runtime_locally(const RunDir& run_dir, int ranks, const std::string& output = "");

// The memory trainctl-runtime holds once started, its libraries loaded and MPI up
// (trainctl-runtime --startup-memory): the part of every rank's memory that depends on how it was
// built. A build with CUDA holds about 150 MiB more for cuBLAS and NCCL, on the CPU too.
int64_t runtime_startup_resident_bytes();

}  // namespace trainctl
