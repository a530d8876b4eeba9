// What this rank is doing, for its hang report: the step, the phase of it, and the collective it
// waits in and since when, kept in lock-free atomics that the trainer and Comm set at their
// transitions (a store or two each); and the SIGQUIT handler that writes them with the native
// stack into hang/R (common/hang_report.h, docs/runtime.md "Hang reports"). The batch script's
// hang watchdog sends SIGQUIT before it kills the ranks. It is not a stop signal: the handler
// returns and the rank goes on waiting where it was.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "hang_report.h"
#include "run_layout.h"

namespace trainctl {

// Where the rank is; while it waits in a collective, its phase reads "collective" instead.
enum class Phase : uint8_t { kStartup, kNodeCheck, kData, kForward, kBackward, kOptimizer, kEval, kCheckpoint };
// As reports name it: "startup", "node-check", "data", "forward", "backward", "optimizer", "eval",
// "checkpoint".
const char* phase_name(Phase phase);
std::optional<Phase> phase_named(std::string_view name);

enum class Collective : uint8_t { kNone, kAllReduce, kAllGather, kReduceScatter, kBroadcast, kBarrier, kGather };
// "-" (none), "all-reduce", "all-gather", "reduce-scatter", "broadcast", "barrier", "gather".
const char* collective_name(Collective collective);

// The count of steps done, as heartbeat.step counts them: a rank in step 4's forward pass is at
// step 3, and so is one evaluating after step 3; -1 before training.
void note_step(int64_t step);
void note_phase(Phase phase);

// The rank waits in `collective` while this lives.
class InCollective {
 public:
  explicit InCollective(Collective collective);
  ~InCollective();
  InCollective(const InCollective&) = delete;
  InCollective& operator=(const InCollective&) = delete;

 private:
  Collective outer_;
  int64_t outer_since_;
};

struct RankActivity {
  int64_t step = -1;
  Phase phase = Phase::kStartup;
  Collective collective = Collective::kNone;
  int64_t waited_tenths = 0;  // in the collective, in tenths of a second
};
// Now; async-signal-safe.
RankActivity current_activity();

// The report's first line, "rank=R node=N step=S phase=P collective=C waited_s=W": S is "-" before
// training, P "collective" while in one, C "-" and W "-" outside one. Async-signal-safe.
void format_activity_line(SignalSafeText& line, int64_t rank, std::string_view node, const RankActivity& activity);

// Catches SIGQUIT, early (before MPI or CUDA start threads, and before anything slow). Until
// report_hangs_to() says where, a report is dropped. The signal is taken to the thread that
// installed the handler, the one whose stack tells where the rank is.
void install_hang_report_handler();
void report_hangs_to(const RunLayout& run, int64_t rank, const std::string& node);

}  // namespace trainctl
