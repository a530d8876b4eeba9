// trainctl-runtime: the per-rank training program that `srun --mpi=pmix` (or `trainctl run`)
// starts. It reads <run-dir>/config.toml, trains, checkpoints into the run directory, and
// exits with one of the codes in exit_codes.h, which the batch script turns into done,
// requeue or failure.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string_view>

#include "bad_input.h"
#include "check.h"
#include "comm.h"
#include "config_reader.h"
#include "exit_codes.h"
#include "metrics.h"
#include "node_records.h"
#include "rank_activity.h"
#include "rank_failure.h"
#include "registry.h"
#include "run_layout.h"
#include "run_record.h"
#include "signals.h"
#include "trainer.h"

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The config as every checkpoint records it: the run's, less [notify], which only the batch
// script's notifications read and whose webhook may be a secret that the run directory's
// config.toml keeps from all but its owner (mode 600), while checkpoints are copied and shared.
// The comments heading the file (where it was resolved from) stay.
std::string recorded_config_text(const std::string& text, const toml::table& table) {
  if (!table.contains("notify")) return text;
  toml::table recorded = table;
  recorded.erase("notify");
  std::ostringstream out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line) && line.starts_with('#');) out << line << "\n";
  out << recorded << "\n";
  return out.str();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace trainctl;
  // Before anything slow: a signal that arrives during start-up must still stop the run cleanly,
  // and a hang report be written.
  install_stop_signal_handlers();
  install_hang_report_handler();
  // Answered before MPI starts, which takes a second: trainctl submit and run ask at every start.
  if (argc == 2 && std::string_view(argv[1]) == "--version") {
    fmt::print("{}\n", runtime_version_text());
    return exit_code::kDone;
  }
  std::unique_ptr<Comm> started;
  try {
    started = std::make_unique<Comm>(&argc, &argv);
  } catch (const std::exception& error) {
    fmt::print(stderr, "trainctl-runtime: cannot start: {}\n", error.what());
    return exit_code::kBadConfig;
  }
  Comm& comm = *started;

  CLI::App app{"trainctl-runtime: one rank of a trainctl training run"};
  std::string run_dir;
  auto* run_dir_option = app.add_option("--run-dir", run_dir, "run directory holding config.toml");
  bool startup_memory = false;
  app.add_flag("--startup-memory", startup_memory,
               "print the bytes this process holds once started (libraries loaded, MPI up) and exit; "
               "trainctl estimate reads it")
      ->excludes(run_dir_option);
  try {
    app.parse(argc, argv);
    if (!startup_memory && run_dir.empty()) throw CLI::RequiredError("--run-dir");
  } catch (const CLI::ParseError& error) {
    if (comm.rank() == 0) app.exit(error);
    return error.get_exit_code() == 0 ? exit_code::kDone : exit_code::kBadConfig;
  }
  if (startup_memory) {
    fmt::print("{}\n", held_resident_bytes());
    return exit_code::kDone;
  }

  auto report = [&](const char* kind, const std::string& message) {
    fmt::print(stderr, "trainctl-runtime: {} (rank {} on {}): {}\n", kind, comm.rank(), this_host_name(), message);
  };
  try {
    const RunLayout layout(run_dir);
    report_hangs_to(layout, comm.rank(), comm.node_name());
    const std::string config_text = read_text(layout.config());
    record_rank_node(layout, comm.rank(), comm.node_name());
    const toml::table table = parse_config_text(config_text, layout.config());
    const RunSpec spec = parse_run_spec(table, layout.config());
    // A requeued job starts whatever runtime is installed then: one installed since the submission
    // would continue the run with other code than it began with.
    if (const std::optional<std::string> refusal = runtime_change_refusal(layout, runtime_version_text())) {
      if (comm.rank() == 0) report("runtime changed", *refusal);
      return exit_code::kBadConfig;
    }
    return train(spec, recorded_config_text(config_text, table), layout, comm);
  } catch (const ConfigError& error) {
    // Every rank reads the same file, so every rank exits here; rank 0 alone says why.
    if (comm.rank() == 0) report("bad config", error.what());
    return exit_code::kBadConfig;
  } catch (const FailedOnAnotherRank& error) {
    return error.exit_code;
  } catch (const BadNode& error) {
    fmt::print(stderr, "trainctl-runtime: {}\n", error.what());
    comm.abort(exit_code::kBadNode);
  } catch (const std::exception& error) {
    report(dynamic_cast<const BadInput*>(&error) != nullptr ? "bad input" : "error", error.what());
    comm.abort(exit_code_of(error));
  }
}
