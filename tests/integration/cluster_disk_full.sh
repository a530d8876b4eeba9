#!/usr/bin/env bash
# A disk that fills during a checkpoint write, on the real one-node cluster: the run directory's
# checkpoints/ is a small tmpfs of the test's own, with room for two checkpoints and not three.
# The third save fails with an error naming the path and the OS's reason; nothing partial is
# left where resume looks, the two earlier checkpoints still verify, and the job fails as the
# user's to fix (exit 1) instead of requeuing into the same full disk. Once the filesystem is
# grown, `submit --resume` resumes from the last checkpoint and completes with weights bitwise
# equal to an uninterrupted run's.
# With checkpoint.async the same full disk costs only the save that hit it: the write fails on the
# writer thread, the run reports it (path and reason) and trains on, the last complete checkpoint
# stays the newest, and the next save, once the filesystem has room again, succeeds; the job
# completes bitwise equal to an uninterrupted run.
source "$(dirname "$0")/lib.sh"
require_cluster 1
make_data
settings=(model.hidden='[256, 256]' train.micro_batch=64 train.steps=600 train.log_every=50
  checkpoint.every_steps=100 checkpoint.keep_last=3)
write_config full.toml full "${settings[@]}"
write_config reference.toml reference "${settings[@]}"
"$TRAINCTL" run reference.toml --ranks 2 >reference.log

# full_disk RUN REFERENCE STEP: mounts on RUN's checkpoints/ a tmpfs with room for two and a half
# of REFERENCE's step-STEP checkpoints; unmounted at exit.
mounted=()
trap 'umount "${mounted[@]}" 2>/dev/null || true; cleanup' EXIT
full_disk() {
  local checkpoints=$work/runs/$1/checkpoints bytes
  mkdir -p "$checkpoints"
  bytes=$(stat -c %s "$(checkpoint_of "runs/$2" "$3")")
  mount -t tmpfs -o size=$((bytes * 5 / 2)) trainctl-test-full "$checkpoints" ||
    { echo "SKIP: cannot mount a tmpfs here"; exit 77; }
  mounted+=("$checkpoints")
}
full_disk full reference 600
checkpoints=$work/runs/full/checkpoints

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
echo "the synchronous save failed the job; resumed once the disk had room"

# Asynchronous: a bigger model (about 13 ms a step here), so that training runs on for seconds
# after the failed save at step 300 while the test grows the filesystem.
async_settings=(model.hidden='[1024, 1024]' train.micro_batch=64 train.steps=1500 train.log_every=100
  checkpoint.every_steps=100 checkpoint.keep_last=3)
write_config async.toml async "${async_settings[@]}" checkpoint.async=true
write_config async_reference.toml async-reference "${async_settings[@]}"
"$TRAINCTL" run async_reference.toml --ranks 2 >async_reference.log
full_disk async async-reference 1500
async_checkpoints=$work/runs/async/checkpoints
job=$(submit async.toml)
wait_for_event runs/async checkpoint_failed 1 120
mount -o remount,size=256m "$async_checkpoints"
wait_for_job "$job" 240 COMPLETED FAILED CANCELLED
log=$(cat runs/async/logs/slurm-"$job".out)
[ "$(job_field "$job" JobState)" = COMPLETED ] || { echo "$log"; fail "the asynchronous job did not go on"; }
grep -q '"step":300,"event":"checkpoint_failed","detail":"cannot write checkpoint [^"]*step-00000300.h5: No space left on device"' \
  runs/async/metrics.jsonl || fail "no checkpoint_failed event naming step 300 and the full disk"
grep -qF "warning: cannot write checkpoint $async_checkpoints/step-00000300.h5: No space left on device; training goes on" \
  <<<"$log" || { echo "$log"; fail "no warning naming the checkpoint and the full disk"; }
grep -q '"step":200,"event":"checkpoint",' runs/async/metrics.jsonl || fail "step 200 was not published"
grep -q '"step":400,"event":"checkpoint",' runs/async/metrics.jsonl || fail "the save after the failure did not succeed"
"$TRAINCTL" ckpt verify runs/async >/dev/null
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/async-reference 1500)" "$(checkpoint_of runs/async 1500)"
echo "the asynchronous save at step 300 failed; training went on, step 400 saved, the job completed"
echo "PASS"
