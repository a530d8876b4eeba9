#!/usr/bin/env bash
# The fault matrix's rank faults on the real four-node cluster, in one job of 2 nodes x 1 rank:
# - SIGKILL of one rank mid-step: srun ends the step (--kill-on-bad-exit) and exits 128 + 9; the
#   batch script takes that for an infrastructure fault, blames the rank's node (srun names it)
#   and requeues the job without it;
# - SIGSTOP of rank 0 in the resumed run: rank 1 blocks in the step's gradient reduce-scatter, the
#   heartbeat stops, and the batch script's watchdog asks every rank for its hang report: rank 1
#   reports the collective it waits in, the stopped rank nothing. The watchdog names rank 0 and its node,
#   kills the step within job.hang_timeout and requeues the job as hung, without that node either.
# The job resumes from its last checkpoint each time, on the two nodes never blamed, and completes
# with weights bitwise equal to an uninterrupted run's; `trainctl status` names both faults and
# both excluded nodes. The test hook TRAINCTL_TEST_PAUSE_IN (docs/runtime.md) holds rank 0 at the
# start of step 250 and, in the resumed run, of step 1000, where each fault is caused, so that the
# job cannot finish first however fast the machine trains.
source "$(dirname "$0")/lib.sh"
require_cluster 4
make_data
hang_timeout=15
settings=(job.nodes=2 job.ranks_per_node=1 job.env='{ OMPI_MCA_btl = "self,tcp" }' model.hidden='[256, 256]'
  train.micro_batch=64 train.steps=1500 train.log_every=25 checkpoint.every_steps=100)
write_config faults.toml faults job.hang_timeout=$hang_timeout "${settings[@]}"
write_config reference.toml reference "${settings[@]}"

# rank_process R: the process of rank R, not srun: its argv[0] is the runtime itself (other jobs'
# ranks have other run directories), and its environment holds SLURM_PROCID=R.
rank_process() {
  local pid
  for pid in $(pgrep -f "^[^ ]*trainctl-runtime --run-dir $work/runs/faults\$"); do
    if grep -qx "SLURM_PROCID=$1" <<<"$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null)"; then
      echo "$pid"
      return
    fi
  done
}
# node_of PID: the SLURM node that process runs on.
node_of() { tr '\0' '\n' <"/proc/$1/environ" | sed -n 's/^SLURMD_NODENAME=//p'; }

job=$(TRAINCTL_TEST_PAUSE_IN=step@250,step@1000 submit faults.toml)
wait_until_paused runs/faults step@250 120
rank=$(rank_process 1)
[ -n "$rank" ] || fail "no rank 1 of job $job found"
killed_node=$(node_of "$rank")
kill -9 "$rank"
echo "killed rank 1 ($rank, on $killed_node) with SIGKILL (${SECONDS} s)"

# The resumed run: stop one of its ranks once it has made progress of its own.
wait_for_event runs/faults resume 1 120
resume_step=$(grep -m 1 '"event":"resume"' runs/faults/metrics.jsonl | sed -nE 's/.*"step":([0-9]+),"event":"resume".*/\1/p')
wait_until_paused runs/faults step@1000 120
rank=$(rank_process 0)
[ -n "$rank" ] || fail "no rank 0 of the resumed run found"
stopped_node=$(node_of "$rank")
[ "$stopped_node" != "$killed_node" ] || fail "the resumed run landed on $killed_node again"
kill -STOP "$rank"
stopped_at=$SECONDS
echo "stopped rank 0 ($rank, on $stopped_node) with SIGSTOP (${SECONDS} s)"
# The uninterrupted run meanwhile, with the same world size and thread counts.
"$TRAINCTL" run reference.toml --ranks 2 >reference.log &
reference=$!
while kill -0 "$rank" 2>/dev/null; do
  # The timeout, the wait for hang reports (5 s: the stopped rank writes none) and a margin.
  [ $((SECONDS - stopped_at)) -le $((hang_timeout + 30)) ] || fail "the stopped rank was not killed within hang_timeout"
  sleep 0.5
done
echo "the watchdog killed the stopped rank after $((SECONDS - stopped_at)) s (hang_timeout $hang_timeout s)"

wait_for_job "$job" 240 COMPLETED FAILED CANCELLED
echo "job $job ended (${SECONDS} s)"
log=$(cat runs/faults/logs/slurm-"$job".out)
[ "$(job_field "$job" JobState)" = COMPLETED ] || { echo "$log"; fail "job $job did not complete"; }
[ "$(job_field "$job" Restarts)" = 2 ] || fail "expected exactly two requeues, got $(job_field "$job" Restarts)"

# srun's exit code is the last rank's to end: 137, or 141 where rank 0 died of its broken pipe to the
# killed rank 1 first; srun's word names rank 1 either way.
grep -qE "^trainctl: a rank was killed by signal (9|13) \(srun exit 1(37|41)\): an infrastructure fault" <<<"$log" ||
  { echo "$log"; fail "the batch script did not see the rank killed by a signal"; }
killed_line=$(grep -E "^trainctl: killed by signal (9|13) at step [0-9]+; rank 1 on $killed_node: Killed; requeuing job $job \(requeue 1 of 5\)" <<<"$log") ||
  fail "no requeue line naming rank 1 on $killed_node"
killed=$(sed -nE 's/^trainctl: (killed by .*); requeuing job .*/\1/p' <<<"$killed_line")
# The step of progress.step when the batch script looked; a kill just after a checkpoint was
# published and before progress.step was updated resumes from that newer checkpoint.
killed_at=$(sed -nE 's/.* at step ([0-9]+);.*/\1/p' <<<"$killed_line")
hung_line=$(grep -E "trainctl: no step finished for [0-9]+ s \(hang_timeout $hang_timeout s\) after step [0-9]+: the ranks are hung; killing them" <<<"$log") ||
  { echo "$log"; fail "the watchdog did not report the hang"; }
hung_at=$(sed -nE 's/.* after step ([0-9]+): .*/\1/p' <<<"$hung_line")
# Rank 1 waits in step 1000's first collective, the gradients' reduce-scatter.
grep -qE "^trainctl: hang report: rank=1 node=[a-z0-9]+ step=1000 phase=collective collective=reduce-scatter waited_s=[0-9.]+$" \
  <<<"$log" || { echo "$log"; fail "rank 1's hang report does not say it waits in step 1000's reduce-scatter"; }
grep -qx "trainctl: hang report: rank=0 node=$stopped_node no-report" <<<"$log" || fail "the stopped rank 0 reported"
hung="hung at step $hung_at; rank 0 on $stopped_node did not reach the reduce-scatter"
grep -qF "trainctl: $hung; requeuing job $job (requeue 2 of 5)" <<<"$log" || fail "no requeue line for the hang"
grep -qx "trainctl: the requeued job excludes $killed_node" <<<"$log" || fail "the first requeue did not exclude $killed_node"
grep -qx "trainctl: the requeued job excludes $killed_node,$stopped_node" <<<"$log" ||
  fail "the second requeue did not exclude $killed_node and $stopped_node"
last_nodes=$(sed -nE "s/^trainctl: job $job run 2 starting at step [0-9]+ on (.*)$/\1/p" <<<"$log")
[ -n "$last_nodes" ] || fail "the job's third start does not say its nodes"
grep -qxE "$killed_node|$stopped_node" <<<"$(scontrol show hostnames "$last_nodes")" &&
  fail "the last start ran on $last_nodes, a blamed node among them"
[ "$resume_step" -ge "$killed_at" ] && [ "$resume_step" -ge 200 ] && [ "$((resume_step % 100))" -eq 0 ] ||
  fail "resumed at step '$resume_step', not from a checkpoint at or after step $killed_at"
# The heartbeat is written at most ten times a second, so it may lag the step the ranks stopped at.
[ "$hung_at" -ge "$resume_step" ] || fail "hung at step $hung_at, before the resumed run's first step $resume_step"
printf 'completed\nrequeued: %s\nrequeued: %s\n' "$hung" "$killed" |
  cmp -s - runs/faults/job.outcome || fail "job.outcome: $(cat runs/faults/job.outcome)"
"$TRAINCTL" status runs/faults | tee status.txt
grep -qE "faults +$job +COMPLETED +2 +1500 .* completed; requeued: $hung; requeued: $killed\$" status.txt ||
  fail "status does not name both faults"
excluded="excluded nodes: $killed_node (killed: rank 1 (Killed) at step $killed_at), $stopped_node (hung: rank 0 did not reach the reduce-scatter of step 1000)"
grep -qxF "$excluded" status.txt || fail "status does not name the excluded nodes"

wait "$reference" || fail "the reference run failed: $(cat reference.log)"
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/reference 1500)" "$(checkpoint_of runs/faults 1500)"
echo "PASS"
