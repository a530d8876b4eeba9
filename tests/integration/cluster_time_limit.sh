#!/usr/bin/env bash
# A time limit on the real cluster: with --time=1 and a 15 s grace, SLURM signals each run 15
# to 45 s in (its time-limit check runs every 30 s); each run saves and requeues, and the job
# ends completed after the requeues with the weights of an uninterrupted run.
# How many runs it takes depends on no machine's speed: the training is short (seconds), and the
# test hook TRAINCTL_TEST_PAUSE_IN (docs/runtime.md) holds rank 0 in the evaluation at step 100
# and in the write of step 200's checkpoint until the signal comes, so the time limit ends the
# first run at step 101 and the second at 201, and the third completes. A machine so slow or so
# busy that a run's signal comes before its pause point costs one more requeue (that run stops
# where it is, and the next goes on to the pause point), within max_requeues.
source "$(dirname "$0")/lib.sh"
require_cluster 1
make_data
settings=(train.steps=300 train.log_every=50 train.eval_every=100 data.val='"data/val.h5"'
  checkpoint.every_steps=100)
write_config limited.toml limited job.time=1 job.signal_grace=15 job.max_requeues=10 "${settings[@]}"
write_config reference.toml reference "${settings[@]}"

job=$(TRAINCTL_TEST_PAUSE_IN=eval@100,save@200 submit limited.toml)
wait_for_job "$job" 420 COMPLETED FAILED CANCELLED TIMEOUT
[ "$(job_field "$job" JobState)" = COMPLETED ] || { cat runs/limited/logs/*; fail "job $job did not complete"; }
restarts=$(job_field "$job" Restarts)
mapfile -t stops < <(sed -nE 's/.*"step":([0-9]+),"event":"stop".*/\1/p' runs/limited/metrics.jsonl)
mapfile -t resumes < <(sed -nE 's/.*"step":([0-9]+),"event":"resume".*/\1/p' runs/limited/metrics.jsonl)
echo "completed after $restarts requeue(s); the runs stopped at steps ${stops[*]}"
[ "${#stops[@]}" -eq "$restarts" ] || fail "$restarts requeues, but ${#stops[@]} stop events"
[ "${resumes[*]}" = "${stops[*]}" ] || fail "resumed at ${resumes[*]}, stopped at ${stops[*]}"
for step in 101 201; do
  [[ " ${stops[*]} " == *" $step "* ]] || fail "no run was stopped by the time limit at step $step"
done

"$TRAINCTL" run reference.toml --ranks 2 >reference.log
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/reference 300)" "$(checkpoint_of runs/limited 300)"
echo "PASS"
