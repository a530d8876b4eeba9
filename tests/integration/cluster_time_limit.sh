#!/usr/bin/env bash
# A time limit on the real cluster: with --time=1 and a 45 s grace, SLURM signals every run
# ~15 s in; each run saves and requeues, and the job ends completed after one or more requeues
# with the weights of an uninterrupted run.
source "$(dirname "$0")/lib.sh"
require_cluster 1
make_data
settings=(model.hidden='[512, 512]' train.micro_batch=128 train.steps=5000 train.log_every=100
  checkpoint.every_steps=1000)
write_config limited.toml limited job.time=1 job.signal_grace=45 job.max_requeues=10 "${settings[@]}"
write_config reference.toml reference "${settings[@]}"

job=$(submit limited.toml)
wait_for_job "$job" 400 COMPLETED FAILED CANCELLED TIMEOUT
[ "$(job_field "$job" JobState)" = COMPLETED ] || { cat runs/limited/logs/*; fail "job $job did not complete"; }
restarts=$(job_field "$job" Restarts)
[ "$restarts" -ge 1 ] || fail "the time limit never signalled the job (Restarts=$restarts)"
grep -c '"event":"resume"' runs/limited/metrics.jsonl | grep -qx "$restarts" || fail "resume events != requeues"
echo "completed after $restarts requeue(s)"

"$TRAINCTL" run reference.toml --ranks 2 >reference.log
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/reference 5000)" "$(checkpoint_of runs/limited 5000)"
echo "PASS"
