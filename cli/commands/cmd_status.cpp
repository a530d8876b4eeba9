// trainctl status [RUN...] [--json]: the state of runs, from SLURM and their run directories.
#include <filesystem>

#include <fmt/format.h>

#include "commands.h"
#include "config_reader.h"
#include "errors.h"
#include "loss_plot.h"
#include "runs/run_status.h"

namespace trainctl {

namespace {
std::vector<std::string> runs_under(const std::string& parent) {
  std::vector<std::string> runs;
  if (!std::filesystem::is_directory(parent)) return runs;
  for (const auto& entry : std::filesystem::directory_iterator(parent))
    if (RunDir(entry.path().string()).exists()) runs.push_back(entry.path().string());
  std::sort(runs.begin(), runs.end());
  return runs;
}

// Runs under the working directory are shown relative to it, as the user named them.
std::string shown_path(const std::string& path) {
  const std::filesystem::path relative = std::filesystem::path(path).lexically_relative(std::filesystem::current_path());
  return relative.empty() || relative.native().starts_with("..") ? path : relative.string();
}

std::string optional_text(const std::optional<double>& value) {
  return value ? fmt::format("{:.4f}", *value) : "-";
}

// A line of the table or under it, with the control characters that run files may hold (run.json,
// job.outcome, the metrics of a [program]) escaped, as `trainctl logs` shows them.
void print_line(const std::string& line) { fmt::print("{}\n", printable(line)); }
}  // namespace

void add_status_command(CLI::App& app) {
  auto* command = app.add_subcommand("status", "state, requeues, step and loss of runs (default: every run in runs/)");
  struct Options {
    std::vector<std::string> runs;
    bool json = false;
  };
  auto options = std::make_shared<Options>();
  command->add_option("runs", options->runs, "run directories")->type_name(path_kind::kDirectory);
  command->add_flag("--json", options->json, "print a JSON array instead of a table");
  command->callback([options] {
    std::vector<std::string> runs = options->runs.empty() ? runs_under("runs") : options->runs;
    for (const std::string& run : runs)
      if (!RunDir(run).exists())
        throw UsageError(fmt::format("{} is not a run directory (no {})", run, run_file::kConfig));
    ProcessRunner runner;
    SlurmClient slurm(runner);
    std::vector<RunStatus> statuses;
    for (const std::string& run : runs) statuses.push_back(read_run_status(RunDir(run), slurm));
    if (options->json) {
      std::vector<Json> records;
      for (const RunStatus& status : statuses) add_run_status(records.emplace_back(Json::object()), status);
      fmt::print("{}", json_records_text(records));
      return;
    }
    constexpr std::string_view kRow = "{:<32} {:>8} {:<10} {:>8} {:>8} {:>10} {:>10}  {}";
    print_line(fmt::format(kRow, "RUN", "JOB", "STATE", "REQUEUES", "STEP", "LOSS", "VAL_LOSS", "NOTE"));
    for (const RunStatus& status : statuses)
      print_line(fmt::format(kRow, shown_path(status.run_dir), status.job_id, status.state, status.restarts,
                             status.step ? std::to_string(*status.step) : "-", optional_text(status.loss),
                             optional_text(status.val_loss), status_note(status)));
    for (const RunStatus& status : statuses) {
      const std::string prefix = statuses.size() == 1 ? "" : shown_path(status.run_dir) + ": ";
      if (!status.excluded_nodes.empty())
        print_line(fmt::format("{}excluded nodes: {}", prefix, excluded_nodes_text(status.excluded_nodes)));
      if (status.submission && status.submission->code && status.submission->code->commit)
        print_line(fmt::format("{}code: {} at {}{}", prefix, status.submission->code->source,
                               *status.submission->code->commit,
                               status.submission->code->dirty ? " with uncommitted changes" : ""));
      if (!status.followers.empty()) print_line(fmt::format("{}then: {}", prefix, followers_text(status.followers)));
    }
    if (!statuses.empty())
      fmt::print("{}\n", loss_plot_hint(statuses.size() == 1 ? shown_path(statuses.front().run_dir) : "RUN"));
  });
}

}  // namespace trainctl
