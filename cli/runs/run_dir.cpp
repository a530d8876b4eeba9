// The run directory: see run_dir.h.
#include "runs/run_dir.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "atomic_file.h"
#include "errors.h"

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
  const auto write = [&](const std::string& path, const std::string& text) {
    if (durability == Durability::kSynced) {
      write_file_atomically(path, text);
      return;
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!(out << text).flush()) throw Failure(fmt::format("cannot write {}", path));
  };
  if (files.params_json) write(params(), *files.params_json);
  write(config(), files.config);  // last: its presence marks a run directory (exists())
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
  std::ifstream in(this->outcome());
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("requeued")) text += line + "\n";
  write_file_atomically(this->outcome(), text);
}

std::optional<std::string> RunDir::job_id() const { return read_first_line(job_id_file()); }

std::vector<BlamedNode> RunDir::blamed_nodes() const {
  std::vector<BlamedNode> nodes;
  std::ifstream in(bad_nodes());
  for (std::string line; std::getline(in, line);) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos || tab == 0) continue;  // a line cut short by a crash
    const std::string node = line.substr(0, tab);
    auto known = std::find_if(nodes.begin(), nodes.end(), [&](const BlamedNode& blamed) { return blamed.node == node; });
    if (known == nodes.end()) known = nodes.insert(nodes.end(), BlamedNode{node, ""});
    known->reason = line.substr(tab + 1);
  }
  return nodes;
}

RunDir chosen_run_dir(const std::string& run_dir_option, const std::string& job_name) {
  return RunDir(run_dir_option.empty() ? (fs::path("runs") / job_name).string() : run_dir_option);
}

std::optional<std::string> read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

}  // namespace trainctl
