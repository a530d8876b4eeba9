#!/usr/bin/env bash
# Asynchronous checkpoints (checkpoint.async = true), 2 ranks, sharded (zero = 1) and not:
# 1. Training does not wait for the writes, and its result does not depend on them: every save
#    is published, and the run ends bitwise equal to one with async = false.
# 2. A stop signal while a write is in flight: rank 0's writer pauses halfway through step 10's
#    checkpoint (the test hook) while training goes on; rank 0 signals itself after step 13. The
#    stop's save publishes step 10 first, then saves step 13 durably, and the run exits for
#    requeue; both checkpoints verify, and the resumed run ends bitwise equal to an
#    uninterrupted one.
# (A write into a full file system is cluster_disk_full's.)
source "$(dirname "$0")/lib.sh"
require_mpi
make_data

settings=(train.steps=40 train.log_every=1 checkpoint.every_steps=5 checkpoint.keep_last=3)
for zero in 0 1; do
  write_config "sync-$zero.toml" "sync-$zero" "${settings[@]}" train.zero=$zero
  write_config "async-$zero.toml" "async-$zero" "${settings[@]}" train.zero=$zero checkpoint.async=true
  "$TRAINCTL" run "sync-$zero.toml" --ranks 2 >/dev/null
  "$TRAINCTL" run "async-$zero.toml" --ranks 2 >/dev/null
  published=$(grep -c '"event":"checkpoint",' "runs/async-$zero/metrics.jsonl")
  [ "$published" = 8 ] || fail "zero = $zero: $published of the 8 asynchronous saves were published"
  for step in 30 35 40; do
    "$TRAINCTL" ckpt diff "$(checkpoint_of "runs/sync-$zero" $step)" "$(checkpoint_of "runs/async-$zero" $step)" \
      >/dev/null || fail "zero = $zero: async differs from sync at step $step"
  done
  "$TRAINCTL" ckpt verify "runs/async-$zero" >/dev/null
  echo "zero = $zero: 8 asynchronous saves published; bitwise equal to synchronous ones"
done

write_config stopped.toml stopped "${settings[@]}" train.zero=1 checkpoint.async=true checkpoint.every_steps=10
if TRAINCTL_TEST_PAUSE_IN=save@10 TRAINCTL_TEST_SIGNAL_AT_STEP=13 "$TRAINCTL" run stopped.toml --ranks 2 \
  >stopped.log 2>&1; then
  fail "the run did not stop at the signal"
fi
grep -q "stopped by a signal after saving" stopped.log || { cat stopped.log; fail "the run failed instead of stopping"; }
[ -f runs/stopped/test-paused.save@10 ] || fail "the writer never paused in step 10's write"
metrics=runs/stopped/metrics.jsonl
step13=$(grep -n '"step":13,"loss"' "$metrics" | cut -d: -f1)
published10=$(grep -n '"step":10,"event":"checkpoint",' "$metrics" | cut -d: -f1)
[ -n "$step13" ] && [ -n "$published10" ] && [ "$published10" -gt "$step13" ] ||
  fail "step 10's checkpoint was not still in flight at step 13: $(cat "$metrics")"
grep -q '"step":13,"event":"checkpoint",' "$metrics" || fail "no durable checkpoint at step 13"
for step in 10 13; do [ -f "$(checkpoint_of runs/stopped $step)/manifest.json" ] || fail "step $step unpublished"; done
"$TRAINCTL" ckpt verify runs/stopped >/dev/null
"$TRAINCTL" run stopped.toml --ranks 2 --resume >/dev/null
grep -q '"step":13,"event":"resume"' "$metrics" || fail "did not resume at step 13"
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/sync-1 40)" "$(checkpoint_of runs/stopped 40)" >/dev/null ||
  fail "the resumed run differs from the uninterrupted one"
echo "a stop during step 10's write: steps 10 and 13 published, the resume bitwise equal"
echo "PASS"
