// trainctl logs RUN [-f]: the run's SLURM log, one file across requeues; with -f, followed until
// the job has ended (requeues included), so that a script can wait on it. What stands at the log's
// path is read as a run file (run_files.h): a FIFO there is refused, not waited on.
#include <chrono>
#include <iostream>
#include <thread>

#include <fmt/format.h>

#include "commands.h"
#include "errors.h"
#include "run_files.h"
#include "runs/run_dir.h"
#include "runs/run_status.h"

namespace trainctl {

namespace {

// Prints the log as it grows (it appears once a pending job starts) until SLURM's view and the
// run's record say the job has ended, then what the last poll left, and how it ended on stderr.
void follow_until_ended(const RunDir& run_dir, const std::string& log) {
  ProcessRunner runner;
  SlurmClient slurm(runner);
  int64_t printed = 0;
  const auto print_new = [&] { printed += copy_run_file_from(log, printed, std::cout).value_or(0); };
  for (;;) {
    const RunStatus status = read_run_status(run_dir, slurm);
    print_new();
    if (!is_active_state(status.state)) {
      fmt::print(stderr, "trainctl: job {} ended: {}\n", status.job_id, status.state);
      return;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

}  // namespace

void add_logs_command(CLI::App& app) {
  auto* command = app.add_subcommand("logs", "show the run's log");
  struct Options {
    std::string run;
    bool follow = false;
  };
  auto options = std::make_shared<Options>();
  command->add_option("run", options->run, "run directory")->type_name(path_kind::kDirectory)->required();
  command->add_flag("-f,--follow", options->follow, "keep printing what is appended until the job has ended");
  command->callback([options] {
    const RunDir run_dir(options->run);
    const std::optional<std::string> job_id = run_dir.job_id();
    if (!job_id) throw UsageError(fmt::format("{} has no SLURM job (it was not submitted)", run_dir.path()));
    const std::string log = run_dir.log(*job_id);
    if (options->follow) {
      follow_until_ended(run_dir, log);
      return;
    }
    if (!copy_run_file_from(log, 0, std::cout))
      throw UsageError(fmt::format("no log yet at {} (is job {} still pending?)", log, *job_id));
  });
}

}  // namespace trainctl
