#!/usr/bin/env bash
# The save signal (scancel -s TERM, as SLURM sends before a time limit or a preemption) on the
# real one-node cluster, landing in each phase of a 2-rank run:
#   start-up (before the first step), mid-step, evaluation, and the middle of a checkpoint write.
# Every time the ranks finish the phase they are in, agree to stop at the next step boundary,
# save, and exit for requeue; the batch script requeues, the job resumes from that checkpoint,
# and it completes with weights bitwise equal to an uninterrupted run's. The test hook
# TRAINCTL_TEST_PAUSE_IN (docs/runtime.md) holds rank 0 in start-up, at the start of step 100
# (the other rank goes on into that step's gradient all-reduce), in the evaluation at step 1200
# and halfway through writing step 1500's checkpoint until the signal arrives, so each signal
# lands in its phase however fast the machine trains.
source "$(dirname "$0")/lib.sh"
require_cluster 1
make_data
settings=(model.hidden='[512, 512]' train.micro_batch=128 train.steps=1800 train.log_every=25
  train.eval_every=300 data.val='"data/val.h5"' checkpoint.every_steps=300 job.max_requeues=6)
write_config phases.toml phases "${settings[@]}"
write_config reference.toml reference "${settings[@]}"

# The uninterrupted run, with the same world size and thread counts, while the job runs.
"$TRAINCTL" run reference.toml --ranks 2 >reference.log 2>&1 &
reference=$!

job=$(TRAINCTL_TEST_PAUSE_IN=startup,step@100,eval@1200,save@1500 submit phases.toml)
signal_when_paused() {
  wait_until_paused runs/phases "$1" 120
  scancel -s TERM "$job"
  echo "signalled in $1 (${SECONDS} s)"
}
signal_when_paused startup
signal_when_paused step@100
signal_when_paused eval@1200
signal_when_paused save@1500
wait_for_job "$job" 240 COMPLETED FAILED CANCELLED
echo "job $job ended (${SECONDS} s)"
log=$(cat runs/phases/logs/slurm-"$job".out)
[ "$(job_field "$job" JobState)" = COMPLETED ] || { echo "$log"; fail "job $job did not complete"; }
[ "$(job_field "$job" Restarts)" = 4 ] || fail "expected four requeues, got $(job_field "$job" Restarts)"

# Each stop comes at the first step boundary after its phase: step 1 after start-up, 101 after
# the start of step 100 (101 is the step the signal came in), 1201 after the evaluation at 1200
# and 1501 after the checkpoint at 1500.
mapfile -t stops < <(sed -nE 's/.*"step":([0-9]+),"event":"stop".*/\1/p' runs/phases/metrics.jsonl)
[ "${#stops[@]}" -eq 4 ] || fail "expected four stop events, got ${stops[*]}"
[ "${stops[0]}" -eq 1 ] || fail "the start-up signal stopped at step ${stops[0]}, not 1"
[ "${stops[1]}" -eq 101 ] || fail "the mid-step signal stopped at step ${stops[1]}, not 101"
[ "${stops[2]}" -eq 1201 ] || fail "the evaluation signal stopped at step ${stops[2]}, not 1201"
[ "${stops[3]}" -eq 1501 ] || fail "the checkpoint-write signal stopped at step ${stops[3]}, not 1501"
mapfile -t resumes < <(sed -nE 's/.*"step":([0-9]+),"event":"resume".*/\1/p' runs/phases/metrics.jsonl)
[ "${resumes[*]}" = "${stops[*]}" ] || fail "resumed at ${resumes[*]}, stopped at ${stops[*]}"
for stop in "${stops[@]}"; do
  grep -q "trainctl: saved at step $stop; requeuing job $job" <<<"$log" || fail "no requeue line at step $stop"
done
# The evaluation and the checkpoint the signal interrupted completed before the stop.
grep -q '"step":1200,"val_loss"' runs/phases/metrics.jsonl || fail "no evaluation at step 1200"
grep -q '"step":1500,"event":"checkpoint"' runs/phases/metrics.jsonl || fail "no checkpoint at step 1500"
echo "stopped at steps ${stops[*]} and resumed there"

wait "$reference" || fail "the reference run failed: $(cat reference.log)"
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/reference 1800)" "$(checkpoint_of runs/phases 1800)"
echo "PASS"
