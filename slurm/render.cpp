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

// How long the watchdog waits for the ranks' hang reports before it kills them: a rank writes
// its report from a signal handler at once, unless it is stopped or stuck in the kernel.
constexpr int kHangReportWaitSeconds = 5;

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

// [notify]: each event is told by `trainctl notify`, which reads where to send it, and whether
// to, from the run's config.toml: nothing of [notify] is in this script. Its output goes to the
// job's log, and a notification that fails never fails the job.
constexpr std::string_view kNotifySection = R"bash(notify() {
  "$notifier" notify "$run_dir" --event "$1" --job "$requeue_target" || true
}
)bash";
constexpr std::string_view kNoNotifySection = "notify() { :; }  # the config has no [notify]\n";

// Fixed text, so no config value can reach it unquoted: it only reads the shell variables set
// in front of it (rank_executable, ranks_run, max_requeues, hang_timeout, hang_report_wait,
// max_excluded_nodes, user_exclude, saved_requeue_code, bad_node_code, those of kJobSection, and
// the file variables of run_file_section) and calls notify EVENT.
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
# finish OUTCOME CODE: the end of this run of the script, recorded, told (as "completed", or else
# "failed") and returned as the script's exit code.
finish() {
  record_outcome "$1"
  if [ "$1" = completed ]; then notify completed; else notify failed; fi
  exit "$2"
}

# Bad nodes: bad.nodes holds a line "NODE<tab>REASON" for each failure a node was blamed for (by
# the ranks' node check, or here). A requeued job excludes them.
blame_node() {
  printf '%s\t%s\n' "$1" "$2" >> "$bad_nodes_file"
  echo "trainctl: blaming node $1: $2"
}
# The nodes blamed, each once, in the order first blamed.
blamed_nodes() {
  awk -F '\t' 'NF >= 2 && !seen[$1]++ { print $1 }' "$bad_nodes_file" 2>/dev/null
}
# "n1 (why), n2 (why)": each blamed node with the latest reason.
blamed_nodes_with_reasons() {
  awk -F '\t' 'NF >= 2 { if (!($1 in why)) order[++count] = $1; why[$1] = $2 }
    END { for (i = 1; i <= count; i++) printf "%s%s (%s)", (i > 1 ? ", " : ""), order[i], why[order[i]] }' \
    "$bad_nodes_file" 2>/dev/null
}
# The node rank R ran on in this start (each rank writes rank.nodes/R as it starts), or "?".
node_of_rank() {
  local node
  node=$(cat "$rank_nodes_dir/$1" 2>/dev/null)
  echo "${node:-?}"
}

# The hang watchdog: the ranks record their last finished step in the heartbeat file. When it
# has not changed for hang_timeout seconds (start-up, evaluation and saves included), the ranks
# are hung (a stopped or deadlocked rank, a dead peer, a stuck filesystem): their step is killed
# and the job requeued like any infrastructure fault. Before that, every rank is asked with
# SIGQUIT for its hang report (hang/R: its step, phase, the collective it waits in, its stack);
# the rank that did not reach the collective the others wait in is named and its node blamed.
ranks_step() {
  squeue -h -s -j "$SLURM_JOB_ID" -o '%i %j' 2>/dev/null | awk '$2 == "trainctl-ranks" { print $1; exit }'
}
hang_report() {
  local step=$1 ranks=${SLURM_NTASKS:-1} deadline=$((SECONDS + hang_report_wait)) rank line
  scancel --signal=QUIT "$step" 2>/dev/null || return 0
  while [ "$(find "$hang_dir" -type f 2>/dev/null | wc -l)" -lt "$ranks" ] && [ "$SECONDS" -lt "$deadline" ]; do
    sleep 0.2
  done
  for ((rank = 0; rank < ranks; rank++)); do
    line=$(head -n 1 "$hang_dir/$rank" 2>/dev/null)
    echo "trainctl: hang report: ${line:-rank=$rank node=$(node_of_rank "$rank") no-report}"
  done | tee "$hang_dir.summary"
  # The collective most ranks wait in, and the first rank not in it: "RANK NODE COLLECTIVE STEP".
  read -r hung_rank hung_node hung_collective hung_step < <(sed 's/^trainctl: hang report: //' "$hang_dir.summary" |
    awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); field[NR, kv[1]] = kv[2] }
           if (field[NR, "phase"] == "collective") waiting[field[NR, "collective"] " " field[NR, "step"]]++ }
         END { for (c in waiting) if (waiting[c] > most) { most = waiting[c]; where = c }
               if (where == "") exit
               split(where, w, " ")
               for (r = 1; r <= NR; r++)
                 if (field[r, "phase"] != "collective" || field[r, "collective"] " " field[r, "step"] != where) {
                   print field[r, "rank"], field[r, "node"], w[1], w[2]; exit } }')
  rm -f "$hang_dir.summary"
}

kill_hung_step() {
  local step
  step=$(ranks_step)
  if [ -n "$step" ]; then
    hang_report "$step"
    scancel --signal=KILL "$step" && return
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

# The rank a signal killed, by srun's word in this start's part of the log ("srun: error: n2:
# task 1: Killed"): "NODE RANK WHAT".
rank_killed_by_signal() {
  awk -v start="trainctl: job $requeue_target run $restart_count starting" '
    index($0, start) == 1 { found = "" }
    found == "" && match($0, /^srun: error: [^:]+: tasks? [0-9]+[^:]*: /) {
      split(substr($0, 14, RLENGTH - 15), part, ": ")
      sub(/^tasks? /, "", part[2]); sub(/[^0-9].*/, "", part[2])
      found = part[1] " " part[2] " " substr($0, RLENGTH + 1) }
    END { if (found != "") print found }' "$log_file" 2>/dev/null
}

# One start of the ranks: their exit code in rc (for a [program], the first failed rank's, in
# failed_rank, failed_by and failed_code), a hang in hung_*.
start_ranks() {
  hung_at=""
  hung_rank="" hung_node="" hung_collective="" hung_step=""
  bad_lines_before=$(cat "$bad_nodes_file" 2>/dev/null | wc -l)
  rm -rf "$rank_exits_dir" "$rank_nodes_dir" "$hang_dir"
  run_ranks
  rc=$?
  # A [program]'s ranks each record how their program ended and when (trainctl-launch). The first
  # failure decides, not srun's code: after it, --kill-on-bad-exit terminates the other ranks, and
  # srun reports their signal. A program's own exit code stays its own, even above 128.
  failed_rank="" failed_by="" failed_code=""
  if [ "$rc" -ne 0 ]; then
    read -r failed_rank failed_by failed_code < <(for end in "$rank_exits_dir"/*; do
        [ -f "$end" ] && echo "${end##*/} $(cat "$end")"
      done | sort -n -k 4 | awk '$2 == "signal" || $3 != 0 { print $1, $2, $3; exit }')
    case $failed_by in
      signal) rc=$((128 + failed_code)) ;;
      exit) rc=$failed_code ;;
    esac
  fi
}

start_step=$(read_count "$progress_file")
# A run that ended without this script's word left "running" first: SLURM itself ended it and
# requeued the job (a node failure). The nodes it ran on that SLURM now holds down are blamed.
if [ "$(head -n 1 "$outcome_file" 2>/dev/null)" = running ]; then
  record_outcome "requeued: by SLURM at step $start_step (the run before ended without the batch script's word)"
  notify requeued
  previous_nodes=$(cat "$nodes_file" 2>/dev/null)
  if [ -n "$previous_nodes" ]; then
    sinfo -h -N -n "$previous_nodes" -t down,drain,fail,no_respond -o '%N %T' 2>/dev/null | sort -u |
      while read -r node state; do blame_node "$node" "down: SLURM held it $state after ending the job"; done
  fi
fi
record_outcome running
echo "trainctl: job $requeue_target run $restart_count starting at step $start_step on ${SLURM_JOB_NODELIST:-$(hostname)}"
echo "${SLURM_JOB_NODELIST:-}" > "$nodes_file"
if [ -s "$bad_nodes_file" ]; then
  echo "trainctl: nodes blamed before: $(blamed_nodes_with_reasons)"
fi
)bash";

// The ranks started once, to the end of training. Completion needs the ranks' own word
// (completed.step): srun has been seen to exit 0 when a step's launch aborted (a requeued job
// restarted while its previous step was still being torn down).
constexpr std::string_view kRanksToTheEnd = R"bash(start_ranks
if [ "$rc" -eq 0 ] && [ -f "$completed_file" ]; then
  echo "trainctl: training complete"
  finish completed 0
fi
if [ "$rc" -eq 0 ]; then
  echo "trainctl: srun exited 0 but the $ranks_run did not record completion; failing the job"
  finish "failed: incomplete" 1
fi
stop_if_not_finite() { :; }
)bash";

// [sweep.schedule]: the ranks started rung by rung, each start trained to its step budget
// (TRAINCTL_BUDGET_STEPS). At each rung's end `trainctl sweep rung` records the trial's metric
// under the sweep's lock and answers (cli/sweeps/rung_step.h): "train STEPS" on to the next rung
// (in this job, at once), "stop K" (job.outcome says why; a later decision may submit the trial
// again from there) or "complete". A failed start whose metric or loss went non-finite stops the
// trial (stop_if_not_finite) instead of failing it. Reads the variables of kRunSection, scheduler
// and task.
constexpr std::string_view kRanksByRung = R"bash(rc=0
rung_answer=$("$scheduler" sweep rung "$TRAINCTL_SWEEP_DIR" --task "$task") ||
  finish "failed: trainctl sweep rung exited $?" 1
while [ "${rung_answer%% *}" = train ]; do
  export TRAINCTL_BUDGET_STEPS="${rung_answer#train }"
  echo "trainctl: task $task trains to step $TRAINCTL_BUDGET_STEPS, its next rung"
  start_ranks
  [ "$rc" -eq 0 ] || break
  rung_answer=$("$scheduler" sweep rung "$TRAINCTL_SWEEP_DIR" --task "$task" --reached "$TRAINCTL_BUDGET_STEPS") ||
    finish "failed: trainctl sweep rung exited $?" 1
  [ "$rung_answer" != "train $TRAINCTL_BUDGET_STEPS" ] || finish "failed: trainctl sweep rung answered \"$rung_answer\" again" 1
done
if [ "$rc" -eq 0 ]; then
  case $rung_answer in
    complete)
      if [ -f "$completed_file" ]; then
        echo "trainctl: training complete (the schedule's last rung)"
        finish completed 0
      fi
      echo "trainctl: the $ranks_run reached the last rung but did not record completion; failing the job"
      finish "failed: incomplete" 1
      ;;
    stop\ *)
      echo "trainctl: $(head -n 1 "$outcome_file")"
      exit 0
      ;;
    *) finish "failed: trainctl sweep rung answered \"$rung_answer\"" 1 ;;
  esac
fi
stop_if_not_finite() {
  local answer
  answer=$("$scheduler" sweep rung "$TRAINCTL_SWEEP_DIR" --task "$task" --ranks-failed) || return 0
  [ "${answer%% *}" = stop ] || return 0
  echo "trainctl: $ranks_run failed with exit code $rc; $(head -n 1 "$outcome_file")"
  exit 0
}
)bash";

// After the ranks' start(s): requeue after a save on a signal or a rank killed by one, within
// the guards; fail on the ranks' own failure. Reads the variables and functions of kRunSection
// and stop_if_not_finite.
constexpr std::string_view kRanksEnded = R"bash(# The failure taxonomy. The ranks' own codes 1 and 2 (and any other below 128 but 75 and 76) are
# the user's to fix: requeuing would fail again. srun exits 128 + N when a rank was killed by
# signal N (the OOM killer, a node going down, an operator): an infrastructure fault, which a
# requeue resumes from the last checkpoint. 76 is the ranks' node check: a node is bad.
end_step=$(read_count "$progress_file")
progress_counts=true
# The nodes this start's node check blamed.
checked_bad=$(tail -n +$((bad_lines_before + 1)) "$bad_nodes_file" 2>/dev/null |
  awk -F '\t' '$2 ~ /^node check: / && !seen[$1]++ { printf "%s%s", (n++ ? ", " : ""), $1 }')
if [ -n "$hung_at" ]; then
  ending="hung at step $hung_at"
  if [ -n "$hung_rank" ]; then
    ending="$ending; rank $hung_rank on $hung_node did not reach the $hung_collective"
    [ "$hung_node" = "?" ] ||
      blame_node "$hung_node" "hung: rank $hung_rank did not reach the $hung_collective of step $hung_step"
  fi
  notify hung
elif [ "$rc" -eq "$bad_node_code" ] || [ -n "$checked_bad" ]; then
  # A rank whose check's collective timed out exits 76 and srun kills the hung one, so srun's code
  # may be that signal's: the check's blames decide.
  ending="node check failed${checked_bad:+ on $checked_bad}"
  # A failed check ends a start before its first step: that is the check's doing, and the
  # exclusion below, bounded by max_excluded_nodes, keeps it from repeating.
  progress_counts=false
elif [ "$rc" -gt 128 ] && [ "$failed_by" != exit ]; then
  ending="killed by signal $((rc - 128)) at step $end_step"
  echo "trainctl: a rank was killed by signal $((rc - 128)) (srun exit $rc): an infrastructure fault; resuming from the last checkpoint"
  # srun's own exit code may be another rank's, which died of the first one's death (a broken
  # pipe): the first rank to die is named from its record or srun's word.
  killed_node="" killed_rank="" killed_how=""
  if [ -n "$failed_rank" ]; then
    killed_node=$(node_of_rank "$failed_rank") killed_rank=$failed_rank killed_how="signal $failed_code"
  else
    read -r killed_node killed_rank killed_how < <(rank_killed_by_signal)
  fi
  if [ "$killed_node" = "?" ]; then
    ending="$ending; rank $killed_rank: $killed_how"
  elif [ -n "$killed_rank" ]; then
    ending="$ending; rank $killed_rank on $killed_node: $killed_how"
    blame_node "$killed_node" "killed: rank $killed_rank ($killed_how) at step $end_step"
  fi
elif [ "$rc" -eq "$saved_requeue_code" ]; then
  ending="saved at step $end_step"
else
  stop_if_not_finite
  echo "trainctl: $ranks_run failed with exit code $rc"
  finish "failed: exit $rc" "$rc"
fi

# Requeue, unless the job has been requeued too often, keeps ending before it completes a
# step (a time limit shorter than one save interval, a rank killed every time it starts), or has
# more bad nodes than it may exclude.
stalls=$(read_count "$stalls_file")
if [ "$end_step" -gt "$start_step" ]; then
  stalls=0
elif $progress_counts; then
  stalls=$((stalls + 1))
fi
echo "$stalls" > "$stalls_file"

if [ "$restart_count" -ge "$max_requeues" ]; then
  echo "trainctl: $ending; not requeuing: max_requeues ($max_requeues) reached"
  finish "stopped: max_requeues" 1
fi
if [ "$stalls" -ge 2 ]; then
  echo "trainctl: $ending; not requeuing: 2 requeues in a row without step progress"
  finish "stopped: no progress" 1
fi
blamed=$(blamed_nodes | paste -sd , -)
blamed_count=$(blamed_nodes | wc -l)
if [ "$blamed_count" -gt "$max_excluded_nodes" ]; then
  echo "trainctl: $ending; not requeuing: $blamed_count bad nodes, more than max_excluded_nodes ($max_excluded_nodes): $(blamed_nodes_with_reasons)"
  finish "failed: $blamed_count bad nodes, more than max_excluded_nodes ($max_excluded_nodes): $(blamed_nodes_with_reasons)" 1
fi
requeue_number=$((restart_count + 1))
echo "trainctl: $ending; requeuing job $requeue_target (requeue $requeue_number of $max_requeues)"
# Recorded and told first: SLURM may end this script as soon as the requeue is accepted.
record_outcome "requeued: $ending"
notify requeued
# The requeue's SIGTERM must not end this script before the exclusion is set: the requeued job
# cannot start before this script ends, and SLURM sends SIGKILL KillWait seconds later.
trap '' TERM
if ! scontrol requeue "$requeue_target"; then
  echo "trainctl: scontrol requeue $requeue_target failed; the job ends here"
  finish "failed: requeue" 1
fi
if [ -n "$blamed" ]; then
  exclusion="${user_exclude:+$user_exclude,}$blamed"
  # An exclusion that leaves the partition too few nodes would keep the job pending for ever: the
  # job goes back onto its nodes instead, and the requeue guards bound the repeats.
  usable=$(comm -23 <(sinfo -h -N -p "${SLURM_JOB_PARTITION:-}" -o '%N' 2>/dev/null | sort -u) \
    <(scontrol show hostnames "$exclusion" 2>/dev/null | sort -u) | wc -l)
  if [ "$usable" -lt "${SLURM_JOB_NUM_NODES:-1}" ]; then
    echo "trainctl: not excluding $blamed: partition ${SLURM_JOB_PARTITION:-?} would have $usable usable nodes, the job needs ${SLURM_JOB_NUM_NODES:-1}"
  elif scontrol update JobId="$requeue_target" ExcNodeList="$exclusion"; then
    echo "trainctl: the requeued job excludes $exclusion"
  else
    echo "trainctl: scontrol update JobId=$requeue_target ExcNodeList=$exclusion failed; the requeued job may land on $blamed again"
  fi
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
      {"rank_nodes_dir", files.rank_nodes()},
      {"hang_dir", files.hang()},
      {"bad_nodes_file", files.bad_nodes()},
      {"nodes_file", files.job_nodes()},
  };
  std::string section = "# The run directory's files.\n";
  for (const auto& [name, path] : variables) section += fmt::format("{}=\"{}\"\n", name, path);
  return section + "\n";
}

// The user's job.exclude and the nodes blamed in an earlier submission of the run (`submit
// --resume`), which come from a file and so are held to SLURM's node-name charset here.
std::optional<std::string> excluded_nodes(const JobSpec& job, const RenderInputs& inputs) {
  static const std::regex kNodeName("[A-Za-z0-9._-]+");
  std::vector<std::string> parts;
  if (job.exclude) parts.push_back(*job.exclude);
  for (const std::string& node : inputs.excluded_nodes) {
    if (!std::regex_match(node, kNodeName))
      throw std::invalid_argument(fmt::format("bad node \"{}\" is not a SLURM node name (allowed: letters, digits and ._-)", node));
    parts.push_back(node);
  }
  if (parts.empty()) return std::nullopt;
  return fmt::format("{}", fmt::join(parts, ","));
}

void append_sbatch(std::string& script, std::string_view option, const std::optional<std::string>& value) {
  if (value) script += fmt::format("#SBATCH --{}={}\n", option, *value);
}

// The #SBATCH lines that say where a job runs and who pays: the same for the training job and its
// follow-ups.
void append_placement(std::string& script, const JobSpec& job) {
  append_sbatch(script, "partition", job.partition);
  append_sbatch(script, "account", job.account);
  append_sbatch(script, "qos", job.qos);
}

// The job's environment ([job] env, thread counts) and the user's setup lines.
std::string environment_section(const JobSpec& job) {
  std::string section = fmt::format("export OMP_NUM_THREADS={}\n", job.cpus_per_rank);
  section += fmt::format("export OPENBLAS_NUM_THREADS={}\n", job.cpus_per_rank);
  for (const auto& [name, value] : job.env) section += fmt::format("export {}={}\n", name, shell_quote(value));
  if (!job.setup.empty()) {
    section += "\n# [job] setup, as written by the user\n";
    for (const std::string& line : job.setup) section += line + "\n";
  }
  return section;
}

// A follow-up job records how it ended in then/N.outcome, for `trainctl status` after SLURM has
// forgotten the job.
constexpr std::string_view kFollowUpSection = R"bash(mkdir -p "${outcome_file%/*}"
echo running > "$outcome_file"
echo "trainctl: follow-up $follow_up of $TRAINCTL_RUN_DIR: ${follow_up_command[*]}"
(cd "$TRAINCTL_RUN_DIR" && "${follow_up_command[@]}")
rc=$?
if [ "$rc" -eq 0 ]; then
  echo completed > "$outcome_file"
else
  echo "failed: exit $rc" > "$outcome_file"
fi
exit "$rc"
)bash";

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
  if (inputs.notifier) require_sbatch_safe_path(*inputs.notifier, "notifier");

  std::string script = fmt::format("#!/bin/bash\n# generated by trainctl {}\n", TRAINCTL_VERSION);
  script += fmt::format("#SBATCH --job-name={}\n", job.name);
  append_placement(script, job);
  script += fmt::format("#SBATCH --nodes={}\n", job.nodes);
  script += fmt::format("#SBATCH --ntasks-per-node={}\n", job.ranks_per_node);
  script += fmt::format("#SBATCH --cpus-per-task={}\n", job.cpus_per_rank);
  if (job.gpus_per_node > 0) script += fmt::format("#SBATCH --gpus-per-node={}\n", job.gpus_per_node);
  append_sbatch(script, "mem", job.mem);
  append_sbatch(script, "time", job.time);
  append_sbatch(script, "constraint", job.constraint);
  append_sbatch(script, "exclude", excluded_nodes(job, inputs));
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
  if (job.check_nodes) script += fmt::format("export TRAINCTL_NODE_CHECK_TIMEOUT={}\n", job.check_nodes_timeout);
  script += environment_section(job);

  if (inputs.rank.user_program) {
    script += "\n# The rendezvous of the [program]'s ranks (MASTER_ADDR).\n";
    script += kRendezvousSection;
  }
  script += "\n# Run the ranks; requeue after a save on a signal or a rank killed by one, within the guards below.\n";
  script += fmt::format("rank_executable={}\n", shell_quote(inputs.rank.executable));
  script += fmt::format("ranks_run={}\n", inputs.rank.user_program ? "program" : "runtime");
  script += fmt::format("max_requeues={}\n", job.max_requeues);
  script += fmt::format("hang_timeout={}\n", job.hang_timeout);
  script += fmt::format("hang_report_wait={}\n", kHangReportWaitSeconds);
  script += fmt::format("max_excluded_nodes={}\n", job.max_excluded_nodes);
  script += fmt::format("user_exclude={}\n", shell_quote(job.exclude.value_or("")));
  script += fmt::format("saved_requeue_code={}\n", exit_code::kSavedRequeue);
  script += fmt::format("bad_node_code={}\n", exit_code::kBadNode);
  script += kJobSection;
  script += run_file_section();
  if (inputs.notifier) {
    script += "# Tell of the job's events ([notify]).\n";
    script += fmt::format("notifier={}\n", shell_quote(*inputs.notifier));
    script += kNotifySection;
  } else {
    script += kNoNotifySection;
  }
  script += "\n";
  script += kRunSection;
  if (inputs.array && inputs.array->scheduler) {
    script += fmt::format("\n# [sweep.schedule]: trainctl answers at each rung.\nscheduler={}\n",
                          shell_quote(*inputs.array->scheduler));
    script += kRanksByRung;
  } else {
    script += kRanksToTheEnd;
  }
  script += kRanksEnded;
  return script;
}

std::string render_follow_up_script(const JobSpec& job, const FollowUpJob& follow_up) {
  require_sbatch_safe_path(follow_up.run_dir, "run directory");
  const RunLayout run(follow_up.run_dir);
  std::string script = fmt::format("#!/bin/bash\n# generated by trainctl {}: follow-up {} ({}) of {}\n", TRAINCTL_VERSION,
                                   follow_up.index, follow_up.kind, follow_up.run_dir);
  script += fmt::format("#SBATCH --job-name={}-then-{}\n", job.name, follow_up.kind);
  append_placement(script, job);
  script += "#SBATCH --nodes=1\n#SBATCH --ntasks=1\n";
  script += fmt::format("#SBATCH --cpus-per-task={}\n", job.cpus_per_rank);
  append_sbatch(script, "mem", job.mem);
  script += fmt::format("#SBATCH --output={}/then-{}-{}-%j.out\n", run.logs(), follow_up.index, follow_up.kind);
  script += "\nset -uo pipefail\n\n";
  script += fmt::format("export TRAINCTL_RUN_DIR={}\n", shell_quote(follow_up.run_dir));
  script += environment_section(job);
  script += fmt::format("\nfollow_up={}\n", follow_up.index);
  script += fmt::format("outcome_file={}\n", shell_quote(run.follower_outcome(follow_up.index)));
  std::string words;
  for (const std::string& word : follow_up.argv) words += " " + shell_quote(word);
  script += fmt::format("follow_up_command=({})\n", words.empty() ? words : words.substr(1));
  script += kFollowUpSection;
  return script;
}

}  // namespace trainctl
