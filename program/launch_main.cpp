// trainctl-launch: the task srun starts on every slot of a [program] job, in place of
// trainctl-runtime. It records its node (rank.nodes/R), checks its device where the batch script
// asks for the node check (program_node_check.h), gives the user's command the rank's environment
// (from SLURM's task variables), runs it, and records how it ended for the batch script
// (program_rank.h); on SIGQUIT it writes a hang report about the program (program_hang_report.h).
// Exit code: the program's; 76 when the node check failed (bad.nodes names the node), 2 when the
// run directory's config cannot be run, 1 for another failure of its own, each recorded as the
// rank's end like a program's exit, so that the batch script does not take the other ranks'
// consequent ends for the cause.
#include <cstdlib>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bad_input.h"
#include "check.h"
#include "config_reader.h"
#include "exit_codes.h"
#include "node_records.h"
#include "program_hang_report.h"
#include "program_node_check.h"
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
  RankPlace place;
  try {
    place = rank_place_under_slurm(std::getenv);
  } catch (const BadInput& error) {
    fmt::print(stderr, "trainctl-launch: {}\n", error.what());
    return 2;
  }
  const RunLayout run(run_dir);
  const auto failed = [&](int code, const std::string& message) {
    fmt::print(stderr, "trainctl-launch: rank {}: {}\n", place.rank, message);
    try {
      record_rank_end(run, place.rank, ProcessEnd::exited(code));
    } catch (const std::exception& error) {
      fmt::print(stderr, "trainctl-launch: rank {}: {}\n", place.rank, error.what());
    }
    return code;
  };
  try {
    const std::string node = this_node_name();
    install_program_hang_report(run, place.rank, node);
    record_rank_node(run, place.rank, node);
    if (const std::optional<int64_t> seconds = node_check_timeout_seconds()) {
      if (const std::optional<std::string> failure = check_program_node(place, node, *seconds)) {
        try {
          blame_node(run, node, "node check: " + *failure);
        } catch (const std::exception& error) {
          fmt::print(stderr, "trainctl-launch: rank {}: {}\n", place.rank, error.what());
        }
        return failed(exit_code::kBadNode, fmt::format("node check failed on {}: {}", node, *failure));
      }
    }
    return run_program_rank(run, place);
  } catch (const ConfigError& error) {
    return failed(2, fmt::format("bad config: {}", error.what()));
  } catch (const BadInput& error) {
    return failed(2, error.what());
  } catch (const std::exception& error) {
    return failed(1, fmt::format("error: {}", error.what()));
  }
}
