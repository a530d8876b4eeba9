// How an error on some ranks ends a run of several. An error on one rank alone ends every rank
// at once (Comm::abort, MPI_Abort: the others may be waiting in a collective call). An error that
// every rank knows of ends them together, each exiting with the same code: many ranks calling
// MPI_Abort at once is what an error in the set-up every rank does alike (a device that cannot be
// used, a data file that does not fit) would otherwise cause, and Open MPI 4.1's mpirun can crash
// collecting their abort messages, which turns exit code 2 into 1.
#pragma once

#include <exception>
#include <functional>
#include <stdexcept>
#include <string>

#include "comm.h"

namespace trainctl {

// This rank's node failed the node check (node_check.h): an infrastructure fault, never the user's.
// what(): "node check failed on NODE: rank R (DEVICE): WHY".
class BadNode : public std::runtime_error {
 public:
  BadNode(const std::string& node, const std::string& failure);
};

// The runtime's exit code for an error: 76 for a node that failed its check, 2 for the config or
// input that does not fit the run, 1 for anything else.
int exit_code_of(const std::exception& error);

// Thrown by all_or_none on the ranks where its step succeeded but another rank's failed; that
// rank reports why.
class FailedOnAnotherRank : public std::runtime_error {
 public:
  FailedOnAnotherRank(int failed_rank, int exit_code);
  const int exit_code;
};

// Runs `step`, which must make no collective call, on this rank, then agrees with every rank on
// whether it failed anywhere. Where it did, the ranks that failed rethrow their error and the
// others throw FailedOnAnotherRank with the exit code of the lowest rank that failed, and
// Comm::abort then ends them together.
void all_or_none(Comm& comm, const std::function<void()>& step);

}  // namespace trainctl
