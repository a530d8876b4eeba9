#!/usr/bin/env bash
# A time limit on the real cluster: with --time=1 and a 15 s grace, SLURM signals each run 15
# to 45 s in (its time-limit check runs every 30 s); each run saves and requeues, and the job
# ends completed after one or more requeues with the weights of an uninterrupted run.
source "$(dirname "$0")/lib.sh"
require_cluster 1
make_data
# Sized by this machine's speed: 75 s of training cannot fit in one run under a 1-minute limit.
settings=(model.hidden='[512, 512]' train.micro_batch=128 train.log_every=100)
write_config calibrate.toml calibrate "${settings[@]}" train.steps=400
"$TRAINCTL" run calibrate.toml --ranks 2 >/dev/null
steps=$(awk -v seconds="$(last_metric runs/calibrate elapsed_s)" 'BEGIN { printf "%d", 400 / seconds * 75 }')
echo "training for $steps steps (~75 s at this machine's speed)"
settings+=(train.steps="$steps" checkpoint.every_steps=$((steps / 5)))
write_config limited.toml limited job.time=1 job.signal_grace=15 job.max_requeues=10 "${settings[@]}"
write_config reference.toml reference "${settings[@]}"

job=$(submit limited.toml)
wait_for_job "$job" 420 COMPLETED FAILED CANCELLED TIMEOUT
[ "$(job_field "$job" JobState)" = COMPLETED ] || { cat runs/limited/logs/*; fail "job $job did not complete"; }
restarts=$(job_field "$job" Restarts)
[ "$restarts" -ge 1 ] || fail "the time limit never signalled the job (Restarts=$restarts)"
grep -c '"event":"resume"' runs/limited/metrics.jsonl | grep -qx "$restarts" || fail "resume events != requeues"
echo "completed after $restarts requeue(s)"

"$TRAINCTL" run reference.toml --ranks 2 >reference.log
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/reference "$steps")" "$(checkpoint_of runs/limited "$steps")"
echo "PASS"
