// Test hooks: environment variables that tests set to make a fault land at a known point
// (docs/runtime.md lists them). A run without them behaves as if they did not exist. They are
// read here, once, so the trainer only asks at its named points.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "rank_activity.h"

namespace trainctl {

// TRAINCTL_TEST_SIGNAL_AT_STEP: the step after which rank 0 raises SIGTERM on itself; -1 if unset.
int64_t test_signal_step();

// TRAINCTL_TEST_SAVE_INITIAL: save the freshly initialised weights as a step-0 checkpoint.
bool test_save_initial();

// TRAINCTL_TEST_PAUSE_IN="startup,step@60,eval@200,save@400": at the named phase (at that step;
// start-up has none; "step" is the start of that step on rank 0, while the other ranks go on
// into its gradient all-reduce), rank 0 writes <run dir>/test-paused.<entry> and waits until a
// stop signal arrives (at most two minutes), so that a test can send SLURM's signal, or cause
// any other outside event, while the run is held there, whatever the machine's speed. Each
// pause happens once per run directory: the marker file remembers it across requeues.
// TRAINCTL_TEST_PAUSE_TASK=<id> limits the pauses to that task of a job array.
void test_pause_point(const std::string& run_dir, std::string_view phase, int64_t step);

// Halfway through writing step `step`'s checkpoint file: the pause point "save", and
// TRAINCTL_TEST_KILL_DURING_SAVE=<step>, which SIGKILLs the writer there.
void test_midway_through_save(const std::string& run_dir, int64_t step);

// TRAINCTL_TEST_HANG="RANK:PHASE@STEP" ("1:forward@5"; "RANK:startup" and "RANK:node-check" take
// no step): rank RANK stops making progress in that phase at that step (the count of steps done,
// as its hang report counts them), as a hung GPU or a deadlocked thread would leave it. It sleeps there, handling
// signals (its hang report says where it is), until it is killed, or for ten minutes. Each hang
// happens once per run directory: a marker file, test-hung.<RANK>.<PHASE>[@STEP], remembers it
// across requeues.
struct HangRequest {
  int64_t rank = 0;
  Phase phase = Phase::kStartup;
  std::optional<int64_t> step;  // none for startup and node-check
};
// The request `text` makes; nullopt when it is not one (an unknown phase, "collective", a step
// missing or given where it does not belong).
std::optional<HangRequest> parse_hang_request(std::string_view text);
// Where the rank enters `phase` (at `step`, for the phases of a step): hangs there when
// TRAINCTL_TEST_HANG asks for it.
void test_hang_point(const std::string& run_dir, int64_t rank, Phase phase, int64_t step);

}  // namespace trainctl
