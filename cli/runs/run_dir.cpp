// The run directory: see run_dir.h.
#include "runs/run_dir.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "atomic_file.h"
#include "errors.h"
#include "run_files.h"
#include "run_record.h"
#include "utf8.h"

namespace trainctl {

namespace fs = std::filesystem;

namespace {
std::string absolute_without_trailing_slash(const std::string& path) {
  std::string absolute = fs::absolute(path).lexically_normal().string();
  while (absolute.size() > 1 && absolute.back() == '/') absolute.pop_back();
  return absolute;
}
}  // namespace

RunDir::RunDir(const std::string& path) : RunLayout(absolute_without_trailing_slash(path)) {}

bool RunDir::exists() const { return fs::exists(config()); }

void RunDir::prepare(const RunFiles& files, bool resume, Durability durability) const {
  if (exists() && !resume)
    throw UsageError(fmt::format("run directory {} already holds a run; pass --resume to continue it, or choose "
                                 "another --run-dir",
                                 path()));
  if (!exists() && resume) throw UsageError(fmt::format("--resume: {} holds no run to resume", path()));
  reset_submission_record();
  fs::create_directories(logs());
  fs::create_directories(checkpoints());
  const auto write = [&](const std::string& path, const std::string& text, mode_t permissions) {
    // A secret is written only through a file created for its owner alone.
    if (durability == Durability::kSynced || permissions != kSharedFile) {
      write_file_atomically(path, text, permissions);
      return;
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!(out << text).flush()) throw Failure(fmt::format("cannot write {}", path));
  };
  if (files.params_json) write(params(), *files.params_json, kSharedFile);
  // Last: its presence marks a run directory (exists()).
  write(config(), files.config, files.secret ? kOwnerOnlyFile : kSharedFile);
  std::ofstream(metrics(), std::ios::app);
}

void RunDir::reset_submission_record() const {
  fs::remove(outcome());
  fs::remove(requeue_stalls());
  fs::remove(requeue_count());
  fs::remove(completed());
}

void RunDir::record_outcome(const std::string& outcome) const {
  std::string text = outcome + "\n";
  for_each_run_file_line(this->outcome(), run_file_limit::kLines, [&](std::string_view line, int64_t) {
    if (line.starts_with("requeued")) text += std::string(line) + "\n";
  });
  write_file_atomically(this->outcome(), text);
}

std::optional<std::string> RunDir::job_id() const {
  std::optional<std::string> job = read_run_file_line(job_id_file());
  if (job && !is_job_id(*job))
    throw DamagedRunFile(job_id_file(), fmt::format("holds {:?}, not a SLURM job id", job->substr(0, 64)));
  return job;
}

PredecessorChain RunDir::predecessor_chain() const {
  PredecessorChain chain{{path()}};
  std::set<std::string> seen{path()};
  for (RunDir run = *this;;) {
    const std::optional<RunRecord> record = load_run_record(run);
    if (!record || !record->after || record->after->run.empty()) return chain;
    run = RunDir(record->after->run);
    if (!run.exists()) return chain;
    chain.runs.push_back(run.path());
    if (!seen.insert(run.path()).second) {
      chain.loops = true;
      return chain;
    }
  }
}

std::string PredecessorChain::loop_text() const {
  const auto first = std::find(runs.begin(), runs.end(), runs.back());
  if (first + 2 == runs.end()) return fmt::format("{} waits for itself", *first);
  std::string text;
  for (auto run = first; run != runs.end(); ++run)
    text += run == first ? *run : fmt::format("{}{}", run == first + 1 ? " waits for " : ", which waits for ", *run);
  return text;
}

std::vector<BlamedNode> RunDir::blamed_nodes() const {
  std::vector<BlamedNode> nodes;
  for_each_run_file_line(bad_nodes(), run_file_limit::kLines, [&](std::string_view line, int64_t) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos || tab == 0) return;  // a line cut short by a crash
    const std::string node(line.substr(0, tab));
    auto known = std::find_if(nodes.begin(), nodes.end(), [&](const BlamedNode& blamed) { return blamed.node == node; });
    if (known == nodes.end()) known = nodes.insert(nodes.end(), BlamedNode{node, ""});
    known->reason = line.substr(tab + 1);
  });
  return nodes;
}

RunDir chosen_run_dir(const std::string& run_dir_option, const std::string& job_name) {
  RunDir run(run_dir_option.empty() ? (fs::path("runs") / job_name).string() : run_dir_option);
  if (const std::optional<std::string> problem = utf8_problem(run.path()))
    throw UsageError(fmt::format("run directory {}: {}; run.json and the notifications name it, in JSON, which holds "
                                 "only UTF-8: choose another --run-dir",
                                 run.path(), *problem));
  return run;
}

std::optional<std::string> utf8_problem(std::string_view name) {
  const size_t bad = first_invalid_utf8(name);
  if (bad == std::string_view::npos) return std::nullopt;
  return fmt::format("byte {} (0x{:02x}) is not UTF-8", bad + 1, static_cast<unsigned char>(name[bad]));
}

}  // namespace trainctl
