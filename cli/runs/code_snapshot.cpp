// A [program]'s code frozen at submit: see code_snapshot.h.
#include "runs/code_snapshot.h"

#include <fnmatch.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "atomic_file.h"
#include "child_process.h"
#include "config_reader.h"
#include "errors.h"
#include "regular_file.h"
#include "runs/run_dir.h"
#include "sweeps/sweep_dir.h"

namespace trainctl {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kMegabyte = 1024 * 1024;

// `git -C dir ARGS...`'s standard output, or nothing when git fails or is missing. No optional
// locks: a snapshot reads the repository and must not rewrite the index under the user's git.
std::optional<std::string> git_output(const std::string& dir, std::vector<std::string> args) {
  std::vector<std::string> argv{"git", "--no-optional-locks", "-C", dir};
  argv.insert(argv.end(), args.begin(), args.end());
  try {
    CapturedRun run = run_capturing(argv);
    if (run.end != ProcessEnd::exited(0)) return std::nullopt;
    return std::move(run.out);
  } catch (const CannotStart&) {
    return std::nullopt;
  }
}

std::string without_trailing_newline(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

std::vector<std::string> nul_separated(const std::string& text) {
  std::vector<std::string> parts;
  for (size_t start = 0; start < text.size();) {
    const size_t end = text.find('\0', start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return parts;
}

bool included(const std::string& relative_to_workdir, const std::vector<std::string>& patterns) {
  return std::any_of(patterns.begin(), patterns.end(), [&](const std::string& pattern) {
    return fnmatch(pattern.c_str(), relative_to_workdir.c_str(), 0) == 0;
  });
}

// `path` (relative to the snapshot's source) relative to the workdir, or nothing outside it.
std::optional<std::string> under_workdir(const std::string& path, const std::string& workdir_in_source) {
  if (workdir_in_source.empty()) return path;
  if (!path.starts_with(workdir_in_source + "/")) return std::nullopt;
  return path.substr(workdir_in_source.size() + 1);
}

// A file's bytes as copied: a symbolic link is copied as a link.
int64_t copied_bytes(const fs::path& path) {
  std::error_code error;
  const fs::file_status status = fs::symlink_status(path, error);
  if (error || !fs::is_regular_file(status)) return 0;
  return static_cast<int64_t>(fs::file_size(path));
}

// A run or sweep directory holds what jobs wrote, not code: this run's own directory among them,
// when it stands under the workdir (runs/ beside the config, by default).
bool holds_trainctl_output(const fs::path& dir) {
  const RunLayout run(dir.string());
  return (fs::exists(run.config()) && fs::exists(run.metrics())) || SweepDir(dir.string()).exists();
}

// Whether `path`, relative to `source`, lies in a run or sweep directory there; `verdicts`
// remembers each directory's.
bool in_trainctl_output(const std::string& source, const std::string& path, std::map<std::string, bool>& verdicts) {
  for (size_t slash = path.find('/'); slash != std::string::npos; slash = path.find('/', slash + 1)) {
    const auto [known, added] = verdicts.try_emplace(path.substr(0, slash), false);
    if (added) known->second = holds_trainctl_output(fs::path(source) / known->first);
    if (known->second) return true;
  }
  return false;
}

// `top`: the work tree's top, as `git rev-parse --show-toplevel` printed it, or nothing outside one.
// The tracked files, those of checked-out submodules included, and the untracked ones the patterns
// name that git does not ignore; nothing of a run or sweep directory.
void git_plan(SnapshotPlan& plan, const ProgramSpec& program, const std::string& workdir,
              const std::optional<std::string>& top) {
  if (!top)
    throw UsageError(fmt::format("program.snapshot = \"git\": {} is not in a git work tree; use snapshot = "
                                 "\"files\", or pass --no-snapshot to run it in place",
                                 workdir));
  plan.record.source = without_trailing_newline(*top);
  const std::optional<std::string> commit = git_output(plan.record.source, {"rev-parse", "--verify", "HEAD"});
  if (!commit)
    throw UsageError(fmt::format("program.snapshot = \"git\": {} has no commit yet; commit the program, or pass "
                                 "--no-snapshot",
                                 plan.record.source));
  plan.record.commit = without_trailing_newline(*commit);
  plan.diff = git_output(plan.record.source, {"diff", "HEAD", "--binary"}).value_or("");
  plan.record.dirty = !plan.diff.empty();
  plan.workdir_in_copy = fs::path(workdir).lexically_relative(plan.record.source).lexically_normal().string();
  if (plan.workdir_in_copy == ".") plan.workdir_in_copy.clear();
  std::map<std::string, bool> verdicts;
  // The tracked files as they are in the work tree; one deleted there is absent from the copy too.
  for (std::string& path :
       nul_separated(git_output(plan.record.source, {"ls-files", "-z", "--recurse-submodules"}).value_or(""))) {
    const fs::file_status status = fs::symlink_status(fs::path(plan.record.source) / path);
    if (!fs::exists(status) || in_trainctl_output(plan.record.source, path, verdicts)) continue;
    // A submodule that is not checked out stands as its empty directory.
    if (fs::is_directory(status))
      throw UsageError(printable(fmt::format("program snapshot: {} in {} is a submodule that is not checked out, so "
                                             "the snapshot cannot hold its files; run `git submodule update --init` "
                                             "there, or pass --no-snapshot",
                                             path, plan.record.source)));
    plan.files.push_back(std::move(path));
  }
  const std::vector<std::string> patterns = program.snapshot_include.value_or(std::vector<std::string>{});
  if (patterns.empty()) return;
  for (std::string& path : nul_separated(
           git_output(plan.record.source, {"ls-files", "-z", "--others", "--exclude-standard"}).value_or(""))) {
    const std::optional<std::string> relative = under_workdir(path, plan.workdir_in_copy);
    if (!relative || !included(*relative, patterns) || in_trainctl_output(plan.record.source, path, verdicts)) continue;
    plan.record.untracked.push_back(path);
    plan.files.push_back(std::move(path));
  }
}

void files_plan(SnapshotPlan& plan, const ProgramSpec& program, const std::string& workdir) {
  plan.record.source = workdir;
  const std::vector<std::string> patterns = program.snapshot_include.value_or(std::vector<std::string>{"*"});
  std::error_code error;
  for (auto entry = fs::recursive_directory_iterator(workdir, fs::directory_options::skip_permission_denied, error);
       entry != fs::recursive_directory_iterator(); entry.increment(error)) {
    if (error) throw UsageError(fmt::format("program snapshot: cannot read {}: {}", workdir, error.message()));
    if (entry->is_directory(error) && !entry->is_symlink()) {
      if (holds_trainctl_output(entry->path())) entry.disable_recursion_pending();
      continue;
    }
    const std::string relative = entry->path().lexically_relative(workdir).string();
    if (included(relative, patterns)) plan.files.push_back(relative);
  }
  std::sort(plan.files.begin(), plan.files.end());
}

// What a copy cannot hold: a FIFO, a socket or a device (copying one would block, or read without
// end), or a name that run.json, in JSON, cannot record. Refused before anything is created.
void refuse_uncopyable(const SnapshotPlan& plan) {
  for (const std::string& path : plan.files) {
    struct stat info {};
    if (lstat((fs::path(plan.record.source) / path).c_str(), &info) == 0 && !S_ISREG(info.st_mode) &&
        !S_ISLNK(info.st_mode))
      throw UsageError(printable(fmt::format("program snapshot: {} in {} is {}, which a copy of the code cannot hold; "
                                             "remove it, leave it out of program.snapshot_include, or pass "
                                             "--no-snapshot",
                                             path, plan.record.source, file_kind(info.st_mode))));
    if (const std::optional<std::string> problem = utf8_problem(path))
      throw UsageError(printable(fmt::format("program snapshot: the name of {} in {} is not UTF-8 ({}), and run.json, "
                                             "in JSON, cannot record it; rename it, leave it out of "
                                             "program.snapshot_include, or pass --no-snapshot",
                                             path, plan.record.source, *problem)));
  }
}

void refuse_oversized(const SnapshotPlan& plan, const ProgramSpec& program) {
  if (plan.record.bytes <= program.snapshot_max_mb * kMegabyte) return;
  std::vector<std::pair<int64_t, std::string>> sizes;
  for (const std::string& path : plan.files) sizes.emplace_back(copied_bytes(fs::path(plan.record.source) / path), path);
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  std::string biggest;
  for (size_t i = 0; i < std::min<size_t>(sizes.size(), 3); ++i)
    biggest += fmt::format("{}{} ({:.1f} MB)", i > 0 ? ", " : "", sizes[i].second,
                           static_cast<double>(sizes[i].first) / kMegabyte);
  throw UsageError(fmt::format("the program's code snapshot of {} files from {} is {:.1f} MB, more than "
                               "program.snapshot_max_mb ({}); the biggest: {}. Leave data out of it (narrow "
                               "program.snapshot_include), raise program.snapshot_max_mb, or pass --no-snapshot",
                               plan.files.size(), plan.record.source, static_cast<double>(plan.record.bytes) / kMegabyte,
                               program.snapshot_max_mb, biggest));
}

}  // namespace

std::optional<SnapshotPlan> plan_code_snapshot(const ProgramSpec& program, const std::string& workdir) {
  if (program.snapshot == "none") return std::nullopt;
  const std::optional<std::string> top = program.snapshot == "files"
                                             ? std::nullopt
                                             : git_output(workdir, {"rev-parse", "--show-toplevel"});
  const std::string kind = program.snapshot.value_or(top ? "git" : "files");
  SnapshotPlan plan;
  plan.record.kind = kind;
  plan.record.workdir = workdir;
  if (kind == "git")
    git_plan(plan, program, workdir, top);
  else
    files_plan(plan, program, workdir);
  refuse_uncopyable(plan);
  plan.record.files = static_cast<int64_t>(plan.files.size());
  for (const std::string& path : plan.files) plan.record.bytes += copied_bytes(fs::path(plan.record.source) / path);
  refuse_oversized(plan, program);
  return plan;
}

std::optional<SnapshotPlan> plan_config_snapshot(const Config& config) {
  if (!config.program) return std::nullopt;
  return plan_code_snapshot(*config.program,
                            absolute_program_workdir(config.table, fs::absolute(config.path).parent_path().string()));
}

std::string snapshot_workdir(const SnapshotPlan& plan, const RunLayout& run) {
  return plan.workdir_in_copy.empty() ? run.code() : (fs::path(run.code()) / plan.workdir_in_copy).string();
}

void write_code_snapshot(const SnapshotPlan& plan, const RunLayout& run) {
  const fs::path copy = run.code() + ".new";
  fs::remove_all(copy);
  for (const std::string& path : plan.files) {
    const fs::path from = fs::path(plan.record.source) / path;
    const fs::path to = copy / path;
    fs::create_directories(to.parent_path());
    if (fs::is_symlink(from))
      fs::copy_symlink(from, to);
    else
      fs::copy_file(from, to);
  }
  fs::create_directories(copy / plan.workdir_in_copy);
  fs::remove_all(run.code());
  fs::rename(copy, run.code());
  if (plan.record.commit)
    write_file_atomically(run.code_diff(), plan.diff);
  else
    fs::remove(run.code_diff());
}

}  // namespace trainctl
