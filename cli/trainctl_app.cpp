// trainctl's command line (make_trainctl_app) and the overview it prints without a command: see
// commands.h.
#include <algorithm>

#include <fmt/format.h>

#include "build_version.h"
#include "commands.h"

namespace trainctl {

std::unique_ptr<CLI::App> make_trainctl_app() {
  auto app = std::make_unique<CLI::App>("SLURM-native batch training launcher", "trainctl");
  app->set_version_flag("--version", "trainctl " + build_version());
  // No command is not a mistake: main prints the overview.
  app->require_subcommand(0, 1);
  add_validate_command(*app);
  add_render_command(*app);
  add_submit_command(*app);
  add_status_command(*app);
  add_logs_command(*app);
  add_cancel_command(*app);
  add_run_command(*app);
  add_data_command(*app);
  add_ckpt_command(*app);
  add_sweep_command(*app);
  add_export_command(*app);
  add_sample_command(*app);
  add_eval_command(*app);
  add_estimate_command(*app);
  add_plot_command(*app);
  add_notify_command(*app);
  return app;
}

std::vector<const CLI::App*> visible_subcommands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App* command) { return !command->get_group().empty(); });
}

std::string overview(const CLI::App& app) {
  const std::vector<const CLI::App*> commands = visible_subcommands(app);
  size_t width = 0;
  for (const CLI::App* command : commands) width = std::max(width, command->get_name().size());
  std::string text = fmt::format("{}: {}\n\nCommands:\n", app.version(), app.get_description());
  for (const CLI::App* command : commands)
    text += fmt::format("  {:<{}}  {}\n", command->get_name(), width, command->get_description());
  text += "\n`trainctl COMMAND --help` shows a command's arguments and options; `man trainctl` shows every "
          "command's.\n";
  return text;
}

}  // namespace trainctl
