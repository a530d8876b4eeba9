// trainctl render CONFIG [-o FILE]: prints the batch script submit would write; no side effects.
#include <fstream>

#include <fmt/format.h>

#include "commands.h"
#include "config_file.h"
#include "errors.h"
#include "render.h"
#include "run_dir.h"

namespace trainctl {

std::string batch_script(const Config& config, const RunDir& run_dir) {
  return render_batch_script(config.job, {run_dir.path(), runtime_executable()});
}

void add_render_command(CLI::App& app) {
  auto* command = app.add_subcommand("render", "print the sbatch script that submit would submit");
  struct Options {
    std::string config, output, run_dir;
  };
  auto options = std::make_shared<Options>();
  command->add_option("config", options->config, "TOML config")->required();
  command->add_option("-o,--output", options->output, "write the script to FILE instead of stdout");
  command->add_option("--run-dir", options->run_dir, "run directory (default: runs/<job.name>)");
  command->callback([options] {
    const Config config = load_config(options->config);
    const RunDir run_dir = chosen_run_dir(options->run_dir, config.job.name);
    const std::string script = batch_script(config, run_dir);
    if (options->output.empty()) {
      fmt::print("{}", script);
      return;
    }
    std::ofstream out(options->output);
    if (!(out << script)) throw UsageError(fmt::format("cannot write {}", options->output));
  });
}

}  // namespace trainctl
