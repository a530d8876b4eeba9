// trainctl logs RUN [-f]: the run's SLURM log, one file across requeues.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "commands.h"
#include "errors.h"
#include "run_dir.h"

namespace trainctl {

void add_logs_command(CLI::App& app) {
  auto* command = app.add_subcommand("logs", "show the run's log");
  struct Options {
    std::string run;
    bool follow = false;
  };
  auto options = std::make_shared<Options>();
  command->add_option("run", options->run, "run directory")->type_name(path_kind::kDirectory)->required();
  command->add_flag("-f,--follow", options->follow, "keep printing what is appended (Ctrl-C to stop)");
  command->callback([options] {
    const RunDir run_dir(options->run);
    const std::optional<std::string> job_id = run_dir.job_id();
    if (!job_id) throw UsageError(fmt::format("{} has no SLURM job (it was not submitted)", run_dir.path()));
    const std::string log = run_dir.log(*job_id);
    if (options->follow) {
      // tail -F also waits for a log that a pending job has not created yet.
      execlp("tail", "tail", "-n", "+1", "-F", log.c_str(), static_cast<char*>(nullptr));
      throw Failure(fmt::format("cannot run tail: {}", std::strerror(errno)));
    }
    std::ifstream in(log);
    if (!in) throw UsageError(fmt::format("no log yet at {} (is job {} still pending?)", log, *job_id));
    std::cout << in.rdbuf();
  });
}

}  // namespace trainctl
