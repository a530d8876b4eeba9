// One rank of a [program] job: see program_rank.h.
#include "program_rank.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <limits>

#include <fmt/format.h>

#include "atomic_file.h"
#include "check.h"
#include "config_reader.h"
#include "program_hang_report.h"
#include "program_spec.h"
#include "run_files.h"
#include "step_budget.h"

extern char** environ;

namespace trainctl {

namespace {

// This process must not die of a stop signal before its program has ended: a handler that does
// nothing (unlike SIG_IGN) is reset to the default by exec, so the program gets them as usual.
void outlive_stop_signals() {
  struct sigaction action {};
  action.sa_handler = [](int) {};
  sigemptyset(&action.sa_mask);
  for (int signal : kStopSignals) sigaction(signal, &action, nullptr);
}

// "NAME=value" for the inherited environment with `added` put over it.
std::vector<std::string> environment_with(const std::vector<std::pair<std::string, std::string>>& added) {
  std::vector<std::string> entries;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const std::string_view name = text.substr(0, text.find('='));
    const bool replaced = std::any_of(added.begin(), added.end(), [&](const auto& pair) { return pair.first == name; });
    if (!replaced) entries.emplace_back(text);
  }
  for (const auto& [name, value] : added) entries.push_back(name + "=" + value);
  return entries;
}

// The step the program last recorded in progress.step, 0 when it recorded none. The program wrote
// that file itself, so damage there is reported and does not cost the record of its success.
int64_t recorded_step(const RunLayout& run) {
  try {
    return read_run_file_count(run.progress(), std::numeric_limits<int64_t>::max()).value_or(0);
  } catch (const DamagedRunFile& damage) {
    fmt::print(stderr, "trainctl: {}; the run is recorded as completed at step 0\n", damage.what());
    return 0;
  }
}

}  // namespace

void record_rank_end(const RunLayout& run, int64_t rank, const ProcessEnd& end) {
  const auto ended = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  std::filesystem::create_directories(run.rank_exits());
  write_file_atomically(run.rank_exits() + "/" + std::to_string(rank),
                        fmt::format("{} {} {}\n", end.how == ProcessEnd::How::kExited ? "exit" : "signal", end.number,
                                    ended.count()));
}

int run_program_rank(const RunLayout& run, const RankPlace& place) {
  const ProgramSpec program = parse_program_spec(parse_config_file(run.config()), run.config());
  const std::vector<std::string> argv = program_argv(program, run, budget_steps_from_environment());
  outlive_stop_signals();
  ProcessEnd end;
  try {
    const Child running = start(
        {.argv = argv, .environment = environment_with(rank_environment(place, run)), .workdir = program.workdir});
    report_on_process(running.pid(), "program");
    end = running.wait();
    if (end != ProcessEnd::exited(0))
      fmt::print(stderr, "trainctl-launch: rank {} on {}: {} {}\n", place.rank, this_host_name(), argv[0],
                 end.description());
  } catch (const CannotStart& error) {
    fmt::print(stderr, "trainctl-launch: rank {} on {}: {}\n", place.rank, this_host_name(), error.what());
    // As a shell would have reported it, for the batch script and srun alike.
    end = ProcessEnd::exited(error.shell_code());
  }
  record_rank_end(run, place.rank, end);
  if (end == ProcessEnd::exited(0) && place.rank == 0) write_file_atomically(run.completed(), fmt::format("{}\n", recorded_step(run)));
  return end.shell_code();
}

}  // namespace trainctl
