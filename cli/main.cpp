// trainctl: the command-line front end. It parses configs, renders and submits batch scripts,
// reads run directories and talks to SLURM; it links neither MPI nor CUDA. Errors are typed
// and caught here, once, and mapped to exit codes: 0 ok, 1 runtime failure, 2 bad input.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bad_input.h"
#include "checkpoint_file.h"
#include "commands.h"
#include "config_reader.h"
#include "errors.h"
#include "slurm_client.h"

int main(int argc, char** argv) {
  using namespace trainctl;
  CLI::App app{"trainctl: SLURM-native batch training launcher"};
  app.set_version_flag("--version", std::string("trainctl ") + TRAINCTL_VERSION);
  app.require_subcommand(1);
  add_validate_command(app);
  add_render_command(app);
  add_submit_command(app);
  add_status_command(app);
  add_logs_command(app);
  add_cancel_command(app);
  add_run_command(app);
  add_data_command(app);
  add_ckpt_command(app);
  add_sweep_command(app);
  add_export_command(app);
  add_sample_command(app);
  add_estimate_command(app);
  add_plot_command(app);

  auto fail = [](int code, const std::string& message) {
    fmt::print(stderr, "trainctl: {}\n", message);
    return code;
  };
  try {
    app.parse(argc, argv);
    return cli_exit::kOk;
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? cli_exit::kOk : cli_exit::kBadInput;
  } catch (const ConfigError& error) {
    return fail(cli_exit::kBadInput, error.what());
  } catch (const BadInput& error) {
    return fail(cli_exit::kBadInput, fmt::format("error: {}", error.what()));
  } catch (const UsageError& error) {
    return fail(cli_exit::kBadInput, fmt::format("error: {}", error.what()));
  } catch (const std::invalid_argument& error) {
    return fail(cli_exit::kBadInput, fmt::format("error: {}", error.what()));
  } catch (const std::exception& error) {
    return fail(cli_exit::kFailure, fmt::format("error: {}", error.what()));
  }
}
