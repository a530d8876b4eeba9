// trainctl-launch: the task srun starts on every slot of a [program] job, in place of
// trainctl-runtime. It gives the user's command the rank's environment (from SLURM's task
// variables), runs it, and records how it ended for the batch script (program_rank.h).
// Exit code: the program's; 2 when the run directory's config cannot be run.
#include <cstdlib>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bad_input.h"
#include "config_reader.h"
#include "program_rank.h"

int main(int argc, char** argv) {
  using namespace trainctl;
  CLI::App app{"trainctl-launch: one rank of a trainctl [program] job, started by srun"};
  std::string run_dir;
  app.add_option("--run-dir", run_dir, "run directory holding config.toml")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : 2;
  }
  try {
    return run_program_rank(RunLayout(run_dir), rank_place_under_slurm(std::getenv));
  } catch (const ConfigError& error) {
    fmt::print(stderr, "trainctl-launch: bad config: {}\n", error.what());
    return 2;
  } catch (const BadInput& error) {
    fmt::print(stderr, "trainctl-launch: {}\n", error.what());
    return 2;
  } catch (const std::exception& error) {
    fmt::print(stderr, "trainctl-launch: error: {}\n", error.what());
    return 1;
  }
}
