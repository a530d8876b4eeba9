#!/usr/bin/env bash
# A disk that fills during a checkpoint write, on the real one-node cluster: the run directory's
# checkpoints/ is a small tmpfs of the test's own, with room for two checkpoints and not three.
# The third save fails with an error naming the path and the OS's reason; nothing partial is
# left where resume looks, the two earlier checkpoints still verify, and the job fails as the
# user's to fix (exit 1) instead of requeuing into the same full disk. Once the filesystem is
# grown, `submit --resume` resumes from the last checkpoint and completes with weights bitwise
# equal to an uninterrupted run's.
source "$(dirname "$0")/lib.sh"
require_cluster 1
make_data
settings=(model.hidden='[256, 256]' train.micro_batch=64 train.steps=600 train.log_every=50
  checkpoint.every_steps=100 checkpoint.keep_last=3)
write_config full.toml full "${settings[@]}"
write_config reference.toml reference "${settings[@]}"
"$TRAINCTL" run reference.toml --ranks 2 >reference.log

checkpoints=$work/runs/full/checkpoints
mkdir -p "$checkpoints"
checkpoint_bytes=$(stat -c %s "$(checkpoint_of runs/reference 600)")
mount -t tmpfs -o size=$((checkpoint_bytes * 5 / 2)) trainctl-test-full "$checkpoints" ||
  { echo "SKIP: cannot mount a tmpfs here"; exit 77; }
trap 'umount "$checkpoints" 2>/dev/null || true; cleanup' EXIT

job=$(submit full.toml)
wait_for_job "$job" 120 COMPLETED FAILED CANCELLED
log=$(cat runs/full/logs/slurm-"$job".out)
[ "$(job_field "$job" JobState)" = FAILED ] || { echo "$log"; fail "job $job did not fail"; }
[ "$(job_field "$job" Restarts)" = 0 ] || fail "a full disk was requeued"
grep -qF "cannot write checkpoint $checkpoints/step-00000300.h5: No space left on device" <<<"$log" ||
  { echo "$log"; fail "no error naming the checkpoint and the full disk"; }
grep -q "trainctl: runtime failed with exit code 1" <<<"$log" || fail "not the user's failure: $log"
[ "$(head -n 1 runs/full/job.outcome)" = "failed: exit 1" ] || fail "job.outcome: $(cat runs/full/job.outcome)"
# Nothing partial where resume looks: no temporary, no sidecar of the failed step.
listing=$(ls -A "$checkpoints")
[ "$listing" = "$(printf 'step-00000100.h5\nstep-00000100.json\nstep-00000200.h5\nstep-00000200.json')" ] ||
  fail "checkpoints/ holds: $listing"
[ "$(cat runs/full/progress.step)" = 200 ] || fail "progress.step says $(cat runs/full/progress.step)"
"$TRAINCTL" ckpt verify runs/full
echo "the disk filled at step 300; steps 100 and 200 intact"

mount -o remount,size=64m "$checkpoints"
job=$(submit full.toml --resume)
wait_for_job "$job" 120 COMPLETED FAILED CANCELLED
[ "$(job_field "$job" JobState)" = COMPLETED ] || { cat runs/full/logs/slurm-"$job".out; fail "the resumed job failed"; }
grep -q '"step":200,"event":"resume"' runs/full/metrics.jsonl || fail "did not resume from step 200"
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/reference 600)" "$(checkpoint_of runs/full 600)"
echo "PASS"
