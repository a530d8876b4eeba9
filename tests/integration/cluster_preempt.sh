#!/usr/bin/env bash
# Preemption on the real one-node cluster: a 2-rank job signalled mid-run (scancel -s TERM)
# saves at the next step boundary, requeues itself from its batch script, resumes from that
# checkpoint, and finishes with weights bitwise equal to an uninterrupted run's.
source "$(dirname "$0")/lib.sh"
require_cluster 1
make_data
settings=(model.hidden='[512, 512]' train.micro_batch=128 train.steps=2500 train.log_every=25
  checkpoint.every_steps=500)
write_config preempted.toml preempted "${settings[@]}"
write_config reference.toml reference "${settings[@]}"

job=$(submit preempted.toml)
wait_for_step runs/preempted 200 120
scancel -s TERM "$job"
wait_for_job "$job" 240 COMPLETED FAILED CANCELLED
[ "$(job_field "$job" JobState)" = COMPLETED ] || { cat runs/preempted/logs/*; fail "job $job did not complete"; }
[ "$(job_field "$job" Restarts)" = 1 ] || fail "expected exactly one requeue, got $(job_field "$job" Restarts)"

log=$(cat runs/preempted/logs/slurm-"$job".out)
grep -q "saved after a stop signal" <<<"$log" || fail "the runtime did not save on the signal"
grep -qE "trainctl: saved at step [0-9]+; requeuing job $job \(requeue 1 of 5\)" <<<"$log" || fail "no requeue line"
stop_step=$(sed -nE 's/.*"step":([0-9]+),"event":"stop".*/\1/p' runs/preempted/metrics.jsonl)
[ "$stop_step" -gt 200 ] && [ "$stop_step" -lt 2500 ] || fail "stopped at step '$stop_step', not mid-run"
grep -q "\"step\":$stop_step,\"event\":\"resume\"" runs/preempted/metrics.jsonl || fail "no resume at $stop_step"
echo "signalled, saved and resumed at step $stop_step"

# The same world size and thread counts, never interrupted.
"$TRAINCTL" run reference.toml --ranks 2 >reference.log
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/reference 2500)" "$(checkpoint_of runs/preempted 2500)"
echo "PASS"
