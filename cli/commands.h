// The trainctl subcommands, one file each (cmd_<name>.cpp). Each adds itself to the app;
// its callback throws the typed errors of errors.h, which main maps to exit codes.
#pragma once

#include <CLI/CLI.hpp>

#include "config_file.h"
#include "render.h"
#include "run_dir.h"

namespace trainctl {

void add_validate_command(CLI::App& app);
void add_render_command(CLI::App& app);
void add_submit_command(CLI::App& app);
void add_status_command(CLI::App& app);
void add_logs_command(CLI::App& app);
void add_cancel_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_data_command(CLI::App& app);
void add_ckpt_command(CLI::App& app);
void add_sweep_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_sample_command(CLI::App& app);
void add_estimate_command(CLI::App& app);
void add_plot_command(CLI::App& app);

// The batch script of `config` for `run_dir` (render shows it, submit submits it).
std::string batch_script(const Config& config, const RunDir& run_dir);

// What srun starts on every slot for a config (its table): trainctl-launch for a [program],
// else trainctl-runtime.
RankCommand rank_command(const toml::table& config);

// trainctl-runtime: $TRAINCTL_RUNTIME, else next to this executable (installed), else in the
// build tree's runtime/ beside cli/. (trainctl-launch likewise: $TRAINCTL_LAUNCH, or program/.)
std::string runtime_executable();

}  // namespace trainctl
