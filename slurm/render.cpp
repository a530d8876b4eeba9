// Batch-script rendering: see render.h.
// Every config value in the script is either held to a safe charset (job_spec.cpp, and the path
// check below) or passed through shell_quote; the run section is fixed text that only reads
// shell variables, so the user's setup lines are the only shell the config contributes.
#include "render.h"

#include <regex>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "exit_codes.h"
#include "job_array.h"
#include "run_layout.h"

namespace trainctl {

namespace {

// Who this job is: its run directory and the id it requeues as. An array task is requeued as
// <array job>_<array index>, the id squeue shows for it, so it requeues alone.
constexpr std::string_view kJobSection = R"bash(run_dir="$TRAINCTL_RUN_DIR"
restart_count="${SLURM_RESTART_COUNT:-0}"
requeue_target="${SLURM_ARRAY_JOB_ID:+${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}}"
requeue_target="${requeue_target:-$SLURM_JOB_ID}"
)bash";

// A [program] job's rendezvous address: the allocation's first node, as SLURM reaches it
// (NodeAddr; a node's name need not resolve), for trainctl-launch to pass on as MASTER_ADDR.
constexpr std::string_view kRendezvousSection = R"bash(master_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
master_addr=$(scontrol show node -o "$master_node" 2>/dev/null | sed -n 's/.* NodeAddr=\([^ ]*\).*/\1/p')
export TRAINCTL_MASTER_ADDR="${master_addr:-$master_node}"
)bash";

// Fixed text, so no config value can reach it unquoted: it only reads the shell variables set
// in front of it (rank_executable, ranks_run, max_requeues, hang_timeout, saved_requeue_code,
// those of kJobSection, and the file variables of run_file_section).
constexpr std::string_view kRunSection = R"bash(if [ -n "${SLURM_ARRAY_JOB_ID:-}" ]; then
  # An array task keeps its job id and its log in its own run directory, as a single job does.
  echo "$requeue_target" > "$job_id_file"
  exec >>"$log_file" 2>&1
fi
# The requeue count outlives the job's record in slurmctld (MinJobAge), for `sweep status`.
echo "$restart_count" > "$requeue_count_file"

# A count kept in a file; anything but digits (a missing or half-written file) reads as 0.
read_count() {
  local value
  value=$(cat "$1" 2>/dev/null) || value=0
  case $value in '' | *[!0-9]*) value=0 ;; esac
  echo "$value"
}

# job.outcome: how this run of the script ended on its first line ("running" until then), then why
# this submission was requeued before (newest first), so a job that completed still tells of its
# faults.
record_outcome() {
  { echo "$1"; grep '^requeued' "$outcome_file" 2>/dev/null; } > "$outcome_file.new"
  mv -f "$outcome_file.new" "$outcome_file"
}

# The hang watchdog: the ranks record their last finished step in the heartbeat file. When it
# has not changed for hang_timeout seconds (start-up, evaluation and saves included), the ranks
# are hung (a stopped or deadlocked rank, a dead peer, a stuck filesystem): their step is killed
# and the job requeued like any infrastructure fault.
kill_hung_step() {
  local step
  step=$(squeue -h -s -j "$SLURM_JOB_ID" -o '%i %j' 2>/dev/null | awk '$2 == "trainctl-ranks" { print $1; exit }')
  if [ -n "$step" ] && scancel --signal=KILL "$step"; then
    return
  fi
  echo "trainctl: cannot find the ranks' step to cancel; killing srun"
  kill -KILL "$1"
}

run_ranks() {
  srun --mpi=pmix --kill-on-bad-exit=1 --job-name=trainctl-ranks "$rank_executable" --run-dir "$run_dir" &
  local srun_pid=$! sleep_pid beat last_beat last_change=$SECONDS
  last_beat=$(read_count "$heartbeat_file")
  while [ "$hang_timeout" -gt 0 ]; do
    # The heartbeat is read every second, and srun's end is taken at once: `wait -n` (bash 4.3)
    # returns when either ends, and bash keeps srun's status for the `wait` below.
    sleep 1 &
    sleep_pid=$!
    wait -n
    if ! kill -0 "$srun_pid" 2>/dev/null; then
      kill "$sleep_pid" 2>/dev/null
      break
    fi
    beat=$(read_count "$heartbeat_file")
    if [ "$beat" != "$last_beat" ]; then
      last_beat=$beat
      last_change=$SECONDS
    elif [ $((SECONDS - last_change)) -ge "$hang_timeout" ]; then
      hung_at=$beat
      echo "trainctl: no step finished for $((SECONDS - last_change)) s (hang_timeout $hang_timeout s) after step $beat: the ranks are hung; killing them"
      kill_hung_step "$srun_pid"
      break
    fi
  done
  wait "$srun_pid"
}

start_step=$(read_count "$progress_file")
# A run that ended without this script's word left "running" first: SLURM itself ended it and
# requeued the job (a node failure).
if [ "$(head -n 1 "$outcome_file" 2>/dev/null)" = running ]; then
  record_outcome "requeued: by SLURM at step $start_step (the run before ended without the batch script's word)"
fi
record_outcome running
echo "trainctl: job $requeue_target run $restart_count starting at step $start_step on $(hostname)"
hung_at=""
rm -rf "$rank_exits_dir"
run_ranks
rc=$?
# A [program]'s ranks each record how their program ended and when (trainctl-launch). The first
# failure decides, not srun's code: after it, --kill-on-bad-exit terminates the other ranks, and
# srun reports their signal. A program's own exit code stays its own, even above 128.
failed_by="" failed_code=""
if [ "$rc" -ne 0 ]; then
  read -r failed_by failed_code < <(cat "$rank_exits_dir"/* 2>/dev/null | sort -n -k 3 |
    awk '$1 == "signal" || $2 != 0 { print $1, $2; exit }')
  case $failed_by in
    signal) rc=$((128 + failed_code)) ;;
    exit) rc=$failed_code ;;
  esac
fi

# Completion needs the ranks' own word (completed.step): srun has been seen to exit 0 when a
# step's launch aborted (a requeued job restarted while its previous step was still being torn
# down).
if [ "$rc" -eq 0 ] && [ -f "$completed_file" ]; then
  echo "trainctl: training complete"
  record_outcome "completed"
  exit 0
fi
if [ "$rc" -eq 0 ]; then
  echo "trainctl: srun exited 0 but the $ranks_run did not record completion; failing the job"
  record_outcome "failed: incomplete"
  exit 1
fi
# The failure taxonomy. The ranks' own codes 1 and 2 (and any other below 128 but 75) are the
# user's to fix: requeuing would fail again. srun exits 128 + N when a rank was killed by signal
# N (the OOM killer, a node going down, an operator): an infrastructure fault, which a requeue
# resumes from the last checkpoint.
end_step=$(read_count "$progress_file")
if [ -n "$hung_at" ]; then
  ending="hung at step $hung_at"
elif [ "$rc" -gt 128 ] && [ "$failed_by" != exit ]; then
  ending="killed by signal $((rc - 128)) at step $end_step"
  echo "trainctl: a rank was killed by signal $((rc - 128)) (srun exit $rc): an infrastructure fault; resuming from the last checkpoint"
elif [ "$rc" -eq "$saved_requeue_code" ]; then
  ending="saved at step $end_step"
else
  echo "trainctl: $ranks_run failed with exit code $rc"
  record_outcome "failed: exit $rc"
  exit "$rc"
fi

# Requeue, unless the job has been requeued too often or keeps ending before it completes a
# step (a time limit shorter than one save interval, a rank killed every time it starts).
stalls=$(read_count "$stalls_file")
if [ "$end_step" -gt "$start_step" ]; then
  stalls=0
else
  stalls=$((stalls + 1))
fi
echo "$stalls" > "$stalls_file"

if [ "$restart_count" -ge "$max_requeues" ]; then
  echo "trainctl: $ending; not requeuing: max_requeues ($max_requeues) reached"
  record_outcome "stopped: max_requeues"
  exit 1
fi
if [ "$stalls" -ge 2 ]; then
  echo "trainctl: $ending; not requeuing: 2 requeues in a row without step progress"
  record_outcome "stopped: no progress"
  exit 1
fi
requeue_number=$((restart_count + 1))
echo "trainctl: $ending; requeuing job $requeue_target (requeue $requeue_number of $max_requeues)"
# Recorded first: SLURM may end this script as soon as the requeue is accepted.
record_outcome "requeued: $ending"
if ! scontrol requeue "$requeue_target"; then
  echo "trainctl: scontrol requeue $requeue_target failed; the job ends here"
  record_outcome "failed: requeue"
  exit 1
fi
exit 0
)bash";

// sbatch splits #SBATCH lines itself and expands '%' patterns in paths, so a path there must
// be plain.
void require_sbatch_safe_path(const std::string& path, const char* what) {
  static const std::regex kSbatchSafePath("/[A-Za-z0-9._/+,:@=-]*");
  if (path.empty() || path.front() != '/')
    throw std::invalid_argument(fmt::format("{} \"{}\" must be an absolute path", what, path));
  if (!std::regex_match(path, kSbatchSafePath))
    throw std::invalid_argument(fmt::format(
        "{} \"{}\" contains characters that cannot appear in an #SBATCH line (allowed: letters, digits and ._/+,:@=-)",
        what, path));
}

// The run directory's files (common/run_layout.h), as shell variables that kRunSection reads.
// The names are plain (run_layout.h asserts it), so inside double quotes only $run_dir and
// $requeue_target expand.
std::string run_file_section() {
  const RunLayout files("$run_dir");
  const std::pair<std::string_view, std::string> variables[] = {
      {"job_id_file", files.job_id_file()},
      {"log_file", files.log("$requeue_target")},
      {"requeue_count_file", files.requeue_count()},
      {"progress_file", files.progress()},
      {"completed_file", files.completed()},
      {"heartbeat_file", files.heartbeat()},
      {"stalls_file", files.requeue_stalls()},
      {"outcome_file", files.outcome()},
      {"rank_exits_dir", files.rank_exits()},
  };
  std::string section = "# The run directory's files.\n";
  for (const auto& [name, path] : variables) section += fmt::format("{}=\"{}\"\n", name, path);
  return section + "\n";
}

void append_sbatch(std::string& script, std::string_view option, const std::optional<std::string>& value) {
  if (value) script += fmt::format("#SBATCH --{}={}\n", option, *value);
}

}  // namespace

std::string shell_quote(std::string_view value) {
  std::string quoted = "'";
  for (char c : value) {
    if (c == '\'')
      quoted += R"('\'')";
    else
      quoted += c;
  }
  quoted += '\'';
  return quoted;
}

std::string render_batch_script(const JobSpec& job, const RenderInputs& inputs) {
  require_sbatch_safe_path(inputs.run_dir, "run directory");
  require_sbatch_safe_path(inputs.rank.executable, "rank executable");

  std::string script = fmt::format("#!/bin/bash\n# generated by trainctl {}\n", TRAINCTL_VERSION);
  script += fmt::format("#SBATCH --job-name={}\n", job.name);
  append_sbatch(script, "partition", job.partition);
  append_sbatch(script, "account", job.account);
  append_sbatch(script, "qos", job.qos);
  script += fmt::format("#SBATCH --nodes={}\n", job.nodes);
  script += fmt::format("#SBATCH --ntasks-per-node={}\n", job.ranks_per_node);
  script += fmt::format("#SBATCH --cpus-per-task={}\n", job.cpus_per_rank);
  if (job.gpus_per_node > 0) script += fmt::format("#SBATCH --gpus-per-node={}\n", job.gpus_per_node);
  append_sbatch(script, "mem", job.mem);
  append_sbatch(script, "time", job.time);
  append_sbatch(script, "constraint", job.constraint);
  append_sbatch(script, "exclude", job.exclude);
  // No "B:": the signal must reach the ranks srun started, which save and exit; the batch shell
  // only has to wait for srun.
  script += fmt::format("#SBATCH --signal={}@{}\n", job.signal, job.signal_grace);
  script += "#SBATCH --requeue\n";
  script += "#SBATCH --open-mode=append\n";
  if (inputs.array) {
    script += fmt::format("#SBATCH --array={}\n", array_option(inputs.array->tasks.size(), inputs.array->max_parallel));
    // Only what happens before a task reaches its run directory lands here.
    script += fmt::format("#SBATCH --output={}/array-%A_%a.out\n", RunLayout(inputs.run_dir).logs());
  } else {
    script += fmt::format("#SBATCH --output={}\n", RunLayout(inputs.run_dir).log("%j"));
  }

  // Not -e: the run section needs srun's exit code.
  script += "\nset -uo pipefail\n\n";
  if (inputs.array) {
    script += fmt::format("export TRAINCTL_SWEEP_DIR={}\n", shell_quote(inputs.run_dir));
    script += "# Array index -> sweep task; manifest.toml in the sweep directory has each task's parameters.\n";
    script += fmt::format("task_of_array_index=({})\n", fmt::join(inputs.array->tasks, " "));
    script += "task=\"${task_of_array_index[${SLURM_ARRAY_TASK_ID:?this script runs as a job array}]}\"\n";
    script += "export TRAINCTL_RUN_DIR=\"$TRAINCTL_SWEEP_DIR/tasks/$task\"\n";
  } else {
    script += fmt::format("export TRAINCTL_RUN_DIR={}\n", shell_quote(inputs.run_dir));
  }
  script += fmt::format("export OMP_NUM_THREADS={}\n", job.cpus_per_rank);
  script += fmt::format("export OPENBLAS_NUM_THREADS={}\n", job.cpus_per_rank);
  for (const auto& [name, value] : job.env) script += fmt::format("export {}={}\n", name, shell_quote(value));

  if (!job.setup.empty()) {
    script += "\n# [job] setup, as written by the user\n";
    for (const std::string& line : job.setup) script += line + "\n";
  }

  if (inputs.rank.user_program) {
    script += "\n# The rendezvous of the [program]'s ranks (MASTER_ADDR).\n";
    script += kRendezvousSection;
  }
  script += "\n# Run the ranks; requeue after a save on a signal or a rank killed by one, within the guards below.\n";
  script += fmt::format("rank_executable={}\n", shell_quote(inputs.rank.executable));
  script += fmt::format("ranks_run={}\n", inputs.rank.user_program ? "program" : "runtime");
  script += fmt::format("max_requeues={}\n", job.max_requeues);
  script += fmt::format("hang_timeout={}\n", job.hang_timeout);
  script += fmt::format("saved_requeue_code={}\n", exit_code::kSavedRequeue);
  script += kJobSection;
  script += run_file_section();
  script += kRunSection;
  return script;
}

}  // namespace trainctl
