// trainctl: the command-line front end. It parses configs, renders and submits batch scripts,
// reads run directories and talks to SLURM; it links neither MPI nor CUDA. Errors are typed
// and caught here, once, and mapped to exit codes: 0 ok, 1 runtime failure, 2 bad input. Without
// a command it prints the overview.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bad_input.h"
#include "commands.h"
#include "config_reader.h"
#include "errors.h"
#include "slurm_client.h"

int main(int argc, char** argv) {
  using namespace trainctl;
  const std::unique_ptr<CLI::App> app = make_trainctl_app();

  auto fail = [](int code, const std::string& message) {
    fmt::print(stderr, "trainctl: {}\n", message);
    return code;
  };
  try {
    app->parse(argc, argv);
    if (app->get_subcommands().empty()) fmt::print("{}", overview(*app));
    return cli_exit::kOk;
  } catch (const CLI::ParseError& error) {
    const int code = app->exit(error);
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
