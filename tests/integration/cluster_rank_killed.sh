#!/usr/bin/env bash
# The fault matrix's "SIGKILL of one rank mid-step" on the real one-node cluster: one rank of a
# 2-rank job gets kill -9 mid-run. srun ends the step (--kill-on-bad-exit) and exits 128 + 9;
# the batch script takes that for an infrastructure fault and requeues the job, which resumes
# from its last checkpoint and completes with weights bitwise equal to an uninterrupted run's.
# `trainctl status` names the signal.
source "$(dirname "$0")/lib.sh"
require_cluster 1
make_data
settings=(model.hidden='[256, 256]' train.micro_batch=64 train.steps=1500 train.log_every=25
  checkpoint.every_steps=100)
write_config killed.toml killed "${settings[@]}"
write_config reference.toml reference "${settings[@]}"

job=$(submit killed.toml)
wait_for_step runs/killed 250 120
# A rank, not srun: its argv[0] is the runtime itself (other jobs' ranks have other run directories).
rank=$(pgrep -f "^[^ ]*trainctl-runtime --run-dir $work/runs/killed\$" | head -n 1)
[ -n "$rank" ] || fail "no rank of job $job found"
kill -9 "$rank"
wait_for_job "$job" 240 COMPLETED FAILED CANCELLED
log=$(cat runs/killed/logs/slurm-"$job".out)
[ "$(job_field "$job" JobState)" = COMPLETED ] || { echo "$log"; fail "job $job did not complete"; }
[ "$(job_field "$job" Restarts)" = 1 ] || fail "expected exactly one requeue, got $(job_field "$job" Restarts)"

grep -q "trainctl: a rank was killed by signal 9 (srun exit 137): an infrastructure fault" <<<"$log" ||
  { echo "$log"; fail "the batch script did not see the rank killed by signal 9"; }
grep -qE "trainctl: killed by signal 9 at step [0-9]+; requeuing job $job \(requeue 1 of 5\)" <<<"$log" ||
  fail "no requeue line"
resume_step=$(sed -nE 's/.*"step":([0-9]+),"event":"resume".*/\1/p' runs/killed/metrics.jsonl)
[ "$resume_step" -ge 200 ] && [ "$((resume_step % 100))" -eq 0 ] ||
  fail "resumed at step '$resume_step', not from a checkpoint after step 200"
printf 'completed\nrequeued: killed by signal 9 at step %s\n' "$resume_step" | cmp -s - runs/killed/job.outcome ||
  fail "job.outcome: $(cat runs/killed/job.outcome)"
"$TRAINCTL" status runs/killed | tee status.txt
grep -qE "killed +$job +COMPLETED +1 +1500 .* completed; requeued: killed by signal 9 at step $resume_step\$" status.txt ||
  fail "status does not name the signal"
echo "killed by signal 9, requeued and resumed at step $resume_step"

# The same world size and thread counts, never interrupted.
"$TRAINCTL" run reference.toml --ranks 2 >reference.log
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/reference 1500)" "$(checkpoint_of runs/killed 1500)"
echo "PASS"
