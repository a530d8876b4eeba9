// trainctl cancel RUN: scancel the run's job.
#include <fmt/format.h>

#include "commands.h"
#include "errors.h"
#include "runs/run_dir.h"
#include "slurm_client.h"

namespace trainctl {

void add_cancel_command(CLI::App& app) {
  auto* command = app.add_subcommand("cancel", "cancel the run's SLURM job");
  auto run = std::make_shared<std::string>();
  command->add_option("run", *run, "run directory")->type_name(path_kind::kDirectory)->required();
  command->callback([run] {
    const RunDir run_dir(*run);
    const std::optional<std::string> job_id = run_dir.job_id();
    if (!job_id) throw UsageError(fmt::format("{} has no SLURM job (it was not submitted)", run_dir.path()));
    ProcessRunner runner;
    SlurmClient(runner).cancel(*job_id);
    fmt::print("cancelled job {}\n", *job_id);
  });
}

}  // namespace trainctl
