// The trainctl subcommands, one file each (commands/cmd_<name>.cpp). Each adds itself to the app;
// its callback throws the typed errors of errors.h, which main maps to exit codes.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "config_file.h"
#include "render.h"
#include "runs/run_dir.h"

namespace trainctl {

// trainctl's whole command line, every command and option: main parses with it, and the build
// generates the bash completion and the man page's command reference from it
// (command_reference.h), so neither can drift from the commands.
std::unique_ptr<CLI::App> make_trainctl_app();

// The subcommands of `app` that --help lists (CLI11 hides those without a group), in its order.
std::vector<const CLI::App*> visible_subcommands(const CLI::App& app);

// What `trainctl` with no command prints: the version, each command with its description, and
// where to read more.
std::string overview(const CLI::App& app);

// The type names of the arguments that are paths: --help shows them, and the bash completion
// completes each kind from the file system (command_reference.cpp).
namespace path_kind {
inline constexpr const char* kConfig = "TOML";  // a config file
inline constexpr const char* kDirectory = "DIR";
inline constexpr const char* kFile = "FILE";
inline constexpr const char* kPath = "PATH";  // a file or a directory
}  // namespace path_kind

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
void add_eval_command(CLI::App& app);
void add_estimate_command(CLI::App& app);
void add_plot_command(CLI::App& app);
void add_notify_command(CLI::App& app);

// The batch script of `config` for `run_dir` (render shows it, submit submits it), excluding
// `excluded_nodes` beside job.exclude.
std::string batch_script(const Config& config, const RunDir& run_dir, const std::vector<std::string>& excluded_nodes = {});

// What srun starts on every slot for a config (its table): trainctl-launch for a [program],
// else trainctl-runtime.
RankCommand rank_command(const toml::table& config);

// This trainctl, by its absolute path: what a batch script runs as `trainctl notify` and `trainctl
// sweep rung`.
std::string trainctl_executable();

// For a config (its table) with [notify]: this trainctl, which the batch script runs as
// `trainctl notify` (RenderInputs::notifier); nullopt without one.
std::optional<std::string> notifier_executable(const toml::table& config);

// trainctl-runtime: $TRAINCTL_RUNTIME, else next to this executable (installed: the prefix's bin/,
// wherever that is), else in the build tree's runtime/ beside cli/. (trainctl-launch likewise:
// $TRAINCTL_LAUNCH, or program/.) Never looked up on PATH.
std::string runtime_executable();

}  // namespace trainctl
