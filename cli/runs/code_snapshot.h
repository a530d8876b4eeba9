// A [program]'s code frozen at submit: the files are copied into the run directory's code/, and
// every start of the job (requeues included) runs from that copy, so that an edit made while the
// job waits or between two requeues does not change the experiment (docs/programs.md, "Frozen
// code"). In a git work tree the copy is the tracked files as they are (the commit plus the diff,
// which code.diff keeps) and the untracked files program.snapshot_include names; elsewhere the
// files under program.workdir that it names. A snapshot bigger than program.snapshot_max_mb is
// refused, naming the biggest files, rather than copying a data set.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config_file.h"
#include "program_spec.h"
#include "run_layout.h"
#include "run_record.h"

namespace trainctl {

struct SnapshotPlan {
  CodeSnapshot record;              // what run.json tells of it
  std::vector<std::string> files;   // to copy, relative to record.source
  std::string diff;                 // git: `git diff HEAD --binary`
  std::string workdir_in_copy;      // program.workdir relative to record.source ("" for itself)
};

// What a snapshot of `program`, whose workdir is the absolute `workdir`, takes; nothing for
// snapshot = "none". Reads the files' sizes and nothing more. Throws UsageError (exit 2) for a
// snapshot over the size limit, a git snapshot outside a git work tree or without a commit, a
// submodule that is not checked out, a FIFO, socket or device among the files, or a file whose
// name is not UTF-8: before anything is created.
std::optional<SnapshotPlan> plan_code_snapshot(const ProgramSpec& program, const std::string& workdir);

// The snapshot of `config`'s [program], whose workdir is relative to the config file; nothing for
// the built-in runtime. What `submit` takes, and `validate` checks.
std::optional<SnapshotPlan> plan_config_snapshot(const Config& config);

// program.workdir inside `run`'s copy.
std::string snapshot_workdir(const SnapshotPlan& plan, const RunLayout& run);

// Copies the plan into `run`'s code/ (replacing an earlier snapshot whole, only once the new one
// is complete) and, for git, writes code.diff.
void write_code_snapshot(const SnapshotPlan& plan, const RunLayout& run);

}  // namespace trainctl
