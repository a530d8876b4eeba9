#!/usr/bin/env bash
# Resume on another world size, on the real one-node cluster: a job of 2 ranks x grad_accum 1,
# stopped by SLURM's signal mid-run (max_requeues = 0, so it saves and stays down), is resubmitted
# with `submit --resume` as 1 rank x grad_accum 2: the same global batch, so the same samples at
# every step. It ends with the weights of an uninterrupted 2-rank run up to the summation order of
# the gradients (1e-6 relative).
source "$(dirname "$0")/lib.sh"
require_cluster 1
make_data
settings=(model.hidden='[256, 256]' train.micro_batch=64 train.steps=4000 train.log_every=25
  checkpoint.every_steps=500)
write_config clean.toml clean "${settings[@]}"
write_config two.toml moved job.max_requeues=0 "${settings[@]}"
write_config one.toml moved job.ranks_per_node=1 train.grad_accum=2 "${settings[@]}"

# The uninterrupted 2-rank run, while the jobs run.
"$TRAINCTL" run clean.toml --ranks 2 >clean.log 2>&1 &
clean=$!

# The test hook holds rank 0 at the start of step 300 until the signal: it lands mid-run however
# fast the machine trains.
job=$(TRAINCTL_TEST_PAUSE_IN=step@300 submit two.toml)
wait_until_paused runs/moved step@300 120
scancel -s TERM "$job"
wait_for_job "$job" 120 COMPLETED FAILED CANCELLED
[ "$(head -n 1 runs/moved/job.outcome)" = "stopped: max_requeues" ] || fail "job.outcome: $(cat runs/moved/job.outcome)"
stop_step=$(sed -nE 's/.*"step":([0-9]+),"event":"stop".*/\1/p' runs/moved/metrics.jsonl)
[ "$stop_step" = 301 ] || fail "the 2-rank job did not stop mid-run (stop at '$stop_step')"
echo "the 2-rank job saved and stopped at step $stop_step"

job=$(submit one.toml --resume)
wait_for_job "$job" 120 COMPLETED FAILED CANCELLED
[ "$(job_field "$job" JobState)" = COMPLETED ] || { cat runs/moved/logs/slurm-"$job".out; fail "the 1-rank resume failed"; }
grep -q "\"step\":$stop_step,\"event\":\"resume\"" runs/moved/metrics.jsonl || fail "did not resume at step $stop_step"
"$TRAINCTL" ckpt inspect "$(checkpoint_of runs/moved 4000)" >inspect.txt && grep -q "world_size 1, global_batch 128" inspect.txt ||
  fail "the final checkpoint is not a 1-rank one with the same global batch"

wait "$clean" || fail "the uninterrupted run failed: $(cat clean.log)"
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/clean 4000)" "$(checkpoint_of runs/moved 4000)" --rtol 1e-6
echo "PASS"
