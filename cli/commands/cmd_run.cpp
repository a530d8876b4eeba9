// trainctl run CONFIG [--ranks N]: the same training with no SLURM, for laptops and debugging:
// one process, or N ranks under mpirun; for a [program], N ranks of it with the environment of
// the contract. The run directory is the one submit would use.
#include <fmt/format.h>

#include "commands.h"
#include "config_file.h"
#include "errors.h"
#include "exit_codes.h"
#include "local_ranks.h"
#include "preflight.h"
#include "runs/local_runtime.h"
#include "runs/run_dir.h"
#include "runs/submission.h"

namespace trainctl {

void add_run_command(CLI::App& app) {
  auto* command = app.add_subcommand("run", "train without SLURM: one process, or --ranks N (mpirun for the runtime)");
  struct Options {
    std::string config, run_dir;
    int ranks = 1;
    bool resume = false;
    bool allow_runtime_change = false;
  };
  auto options = std::make_shared<Options>();
  command->add_option("config", options->config, "TOML config")->type_name(path_kind::kConfig)->required();
  command->add_option("--ranks", options->ranks, "number of ranks")
      ->check(CLI::Range(1, 4096));
  command->add_option("--run-dir", options->run_dir, "run directory (default: runs/<job.name>)")->type_name(path_kind::kDirectory);
  command->add_flag("--resume", options->resume, "continue the run in an existing run directory");
  command->add_flag("--allow-runtime-change", options->allow_runtime_change,
                    "with --resume: continue the run under this trainctl-runtime even though it began under another "
                    "version")
      ->needs("--resume");
  const auto no_preflight = add_no_preflight_flag(*command);
  command->callback([options, no_preflight] {
    const Config config = load_config(options->config);
    if (config.sweep)
      throw UsageError(fmt::format("{} has a [sweep]; submit it, then run one task with `trainctl run "
                                   "SWEEP/tasks/N/config.toml`",
                                   options->config));
    if (!*no_preflight) preflight_data(config);
    const RunDir run_dir = chosen_run_dir(options->run_dir, config.job.name);
    const RunRecord record = new_run_record(config, run_dir, options->resume, options->allow_runtime_change);
    run_dir.prepare(run_files(config.table, config.path), options->resume);
    save_run_record(run_dir, record);

    export_thread_counts(config.job);
    const std::optional<ProcessEnd> runtime_end =
        config.program ? std::nullopt : std::optional(run_runtime_locally(run_dir, options->ranks));
    // A resumed program is told it is not on its first run, as after a requeue.
    const int code = runtime_end ? runtime_end->shell_code()
                                 : run_local_ranks(run_dir, options->ranks, options->resume ? 1 : 0);
    if (code == exit_code::kDone) {
      fmt::print("run complete: {}\n", run_dir.path());
      return;
    }
    if (code == exit_code::kSavedRequeue)
      throw Failure(fmt::format("stopped by a signal after saving; continue with: trainctl run {} --run-dir {} "
                                "--resume{}",
                                options->config, run_dir.path(),
                                options->ranks > 1 ? fmt::format(" --ranks {}", options->ranks) : ""));
    if (config.program) throw Failure(fmt::format("the program failed with exit code {} (see above)", code));
    if (code == exit_code::kBadConfig) throw UsageError("the runtime rejected its input (see above)");
    throw Failure(fmt::format("the runtime {}", runtime_end->description()));
  });
}

}  // namespace trainctl
