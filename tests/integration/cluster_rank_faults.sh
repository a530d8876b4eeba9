#!/usr/bin/env bash
# The fault matrix's rank faults on the real one-node cluster, in one 2-rank job:
# - SIGKILL of one rank mid-step: srun ends the step (--kill-on-bad-exit) and exits 128 + 9; the
#   batch script takes that for an infrastructure fault and requeues the job;
# - SIGSTOP of one rank in the resumed run: the others block in the step's all-reduce, the
#   heartbeat stops, and the batch script's watchdog kills the step within job.hang_timeout and
#   requeues the job as hung.
# The job resumes from its last checkpoint each time and completes with weights bitwise equal to
# an uninterrupted run's; `trainctl status` names both faults. The test hook TRAINCTL_TEST_PAUSE_IN
# (docs/runtime.md) holds rank 0 at the start of step 250 and, in the resumed run, of step 1000,
# where each fault is caused, so that the job cannot finish first however fast the machine trains.
source "$(dirname "$0")/lib.sh"
require_cluster 1
make_data
hang_timeout=15
settings=(model.hidden='[256, 256]' train.micro_batch=64 train.steps=1500 train.log_every=25
  checkpoint.every_steps=100)
write_config faults.toml faults job.hang_timeout=$hang_timeout "${settings[@]}"
write_config reference.toml reference "${settings[@]}"

# A rank, not srun: its argv[0] is the runtime itself (other jobs' ranks have other run directories).
a_rank() { pgrep -f "^[^ ]*trainctl-runtime --run-dir $work/runs/faults\$" | sed -n 1p; }

job=$(TRAINCTL_TEST_PAUSE_IN=step@250,step@1000 submit faults.toml)
wait_until_paused runs/faults step@250 120
rank=$(a_rank)
[ -n "$rank" ] || fail "no rank of job $job found"
kill -9 "$rank"
echo "killed rank $rank with SIGKILL (${SECONDS} s)"

# The resumed run: stop one of its ranks once it has made progress of its own.
wait_for_event runs/faults resume 1 120
resume_step=$(grep -m 1 '"event":"resume"' runs/faults/metrics.jsonl | sed -nE 's/.*"step":([0-9]+),"event":"resume".*/\1/p')
wait_until_paused runs/faults step@1000 120
rank=$(a_rank)
[ -n "$rank" ] || fail "no rank of the resumed run found"
kill -STOP "$rank"
stopped_at=$SECONDS
echo "stopped rank $rank with SIGSTOP (${SECONDS} s)"
# The uninterrupted run meanwhile, with the same world size and thread counts.
"$TRAINCTL" run reference.toml --ranks 2 >reference.log &
reference=$!
while kill -0 "$rank" 2>/dev/null; do
  [ $((SECONDS - stopped_at)) -le $((hang_timeout + 20)) ] || fail "the stopped rank was not killed within hang_timeout"
  sleep 0.5
done
echo "the watchdog killed the stopped rank after $((SECONDS - stopped_at)) s (hang_timeout $hang_timeout s)"

wait_for_job "$job" 240 COMPLETED FAILED CANCELLED
echo "job $job ended (${SECONDS} s)"
log=$(cat runs/faults/logs/slurm-"$job".out)
[ "$(job_field "$job" JobState)" = COMPLETED ] || { echo "$log"; fail "job $job did not complete"; }
[ "$(job_field "$job" Restarts)" = 2 ] || fail "expected exactly two requeues, got $(job_field "$job" Restarts)"

grep -q "trainctl: a rank was killed by signal 9 (srun exit 137): an infrastructure fault" <<<"$log" ||
  { echo "$log"; fail "the batch script did not see the rank killed by signal 9"; }
killed_line=$(grep -E "trainctl: killed by signal 9 at step [0-9]+; requeuing job $job \(requeue 1 of 5\)" <<<"$log") ||
  fail "no requeue line for the killed rank"
# The step of progress.step when the batch script looked; a kill just after a checkpoint was
# published and before progress.step was updated resumes from that newer checkpoint.
killed_at=$(sed -nE 's/.* at step ([0-9]+);.*/\1/p' <<<"$killed_line")
hung_line=$(grep -E "trainctl: no step finished for [0-9]+ s \(hang_timeout $hang_timeout s\) after step [0-9]+: the ranks are hung; killing them" <<<"$log") ||
  { echo "$log"; fail "the watchdog did not report the hang"; }
hung_at=$(sed -nE 's/.* after step ([0-9]+): .*/\1/p' <<<"$hung_line")
grep -qE "trainctl: hung at step $hung_at; requeuing job $job \(requeue 2 of 5\)" <<<"$log" || fail "no requeue line for the hang"
[ "$resume_step" -ge "$killed_at" ] && [ "$resume_step" -ge 200 ] && [ "$((resume_step % 100))" -eq 0 ] ||
  fail "resumed at step '$resume_step', not from a checkpoint at or after step $killed_at"
# The heartbeat is written at most ten times a second, so it may lag the step the ranks stopped at.
[ "$hung_at" -ge "$resume_step" ] || fail "hung at step $hung_at, before the resumed run's first step $resume_step"
printf 'completed\nrequeued: hung at step %s\nrequeued: killed by signal 9 at step %s\n' "$hung_at" "$killed_at" |
  cmp -s - runs/faults/job.outcome || fail "job.outcome: $(cat runs/faults/job.outcome)"
"$TRAINCTL" status runs/faults | tee status.txt
grep -qE "faults +$job +COMPLETED +2 +1500 .* completed; requeued: hung at step $hung_at; requeued: killed by signal 9 at step $killed_at\$" status.txt ||
  fail "status does not name both faults"

wait "$reference" || fail "the reference run failed: $(cat reference.log)"
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/reference 1500)" "$(checkpoint_of runs/faults 1500)"
echo "PASS"
