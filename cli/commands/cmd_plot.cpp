// trainctl plot RUN_OR_SWEEP [-o FILE.png|FILE.svg] [--width W] [--height H]: a run's loss and
// learning rate, or a sweep's tasks overlaid, drawn from the metrics files alone (no SLURM).
#include <fmt/format.h>

#include "commands.h"
#include "errors.h"
#include "loss_plot.h"

namespace trainctl {

void add_plot_command(CLI::App& app) {
  auto* command = app.add_subcommand(
      "plot", "draw a run's training and validation loss and learning rate, or a sweep's tasks, to PNG or SVG");
  struct Options {
    std::string path;
    std::string output;
    int width = 900;
    int height = 500;
  };
  auto options = std::make_shared<Options>();
  command->add_option("path", options->path, "run directory or sweep directory")->type_name(path_kind::kDirectory)->required();
  command->add_option("-o,--output", options->output, "FILE.png or FILE.svg (default: PATH/loss.png)")->type_name(path_kind::kFile);
  command->add_option("--width", options->width, "pixels")->capture_default_str()->check(CLI::Range(400, 10000));
  command->add_option("--height", options->height, "pixels")->capture_default_str()->check(CLI::Range(250, 10000));
  command->callback([options] {
    const std::string output = options->output.empty() ? default_loss_plot(options->path) : options->output;
    const std::optional<ImageFormat> format = image_format_of(output);
    if (!format) throw UsageError(fmt::format("-o {}: plot writes .png or .svg files", output));
    const SweepDir sweep(options->path);
    const RunDir run(options->path);
    LineChart chart;
    if (sweep.exists())
      chart = sweep_loss_chart(sweep, options->path);
    else if (run.exists())
      chart = run_loss_chart(run, options->path);
    else
      throw UsageError(fmt::format("{} is neither a run directory (no {}) nor a sweep directory (no manifest.toml)",
                                   options->path, run_file::kConfig));
    render_chart(chart, output, *format, options->width, options->height);
    fmt::print("wrote {}\n", output);
  });
}

}  // namespace trainctl
