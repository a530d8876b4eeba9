#!/usr/bin/env bash
# Crash safety of checkpoints: a rank killed by SIGKILL in the middle of writing one leaves the
# previous checkpoint usable and no half-written step file; the run resumes from it and ends
# with the weights of an uninterrupted run. A corrupted newest checkpoint is detected, and a
# resume falls back to the one before it, with a warning. A stop signal raised at a known step
# (the test hook TRAINCTL_TEST_SIGNAL_AT_STEP) stops both ranks at exactly that step, and the
# resumed run also ends with the uninterrupted run's weights.
source "$(dirname "$0")/lib.sh"
require_mpi
make_data
write_config crash.toml crash train.steps=30 checkpoint.every_steps=10
write_config clean.toml clean train.steps=30 checkpoint.every_steps=10

"$TRAINCTL" run clean.toml --ranks 2 >clean.log

# Rank 0 (the writer) kills itself after the model group of step 20 is in the temporary file.
if TRAINCTL_TEST_KILL_DURING_SAVE=20 "$TRAINCTL" run crash.toml --ranks 2 >crash.log 2>&1; then
  fail "the run survived SIGKILL"
fi
[ ! -e "$(checkpoint_of runs/crash 20)" ] || fail "a step-20 checkpoint exists after a crash during its write"
compgen -G 'runs/crash/checkpoints/.step-00000020.h5.tmp-*' >/dev/null || fail "the crash did not happen mid-write"
"$TRAINCTL" ckpt verify runs/crash
[ "$(cat runs/crash/progress.step)" = 10 ] || fail "progress.step should still be 10"

"$TRAINCTL" run crash.toml --ranks 2 --resume >resume.log
grep -q '"event":"resume","detail":"[^"]*step-00000010.h5"' runs/crash/metrics.jsonl || fail "did not resume at step 10"
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/clean 30)" "$(checkpoint_of runs/crash 30)"

# Rank 0 raises SIGTERM once step 17 is done: both ranks agree to stop there, between scheduled saves.
write_config stop.toml stop train.steps=30 checkpoint.every_steps=10
if TRAINCTL_TEST_SIGNAL_AT_STEP=17 "$TRAINCTL" run stop.toml --ranks 2 >stop.log 2>&1; then
  fail "the run did not stop at the signal"
fi
grep -q "stopped by a signal after saving" stop.log || { cat stop.log; fail "the run failed instead of stopping"; }
stopped=$(sed -nE 's/.*"step":([0-9]+),"event":"stop".*/\1/p' runs/stop/metrics.jsonl)
[ "$stopped" = 17 ] || fail "asked to stop at step 17, stopped at '${stopped}'"
"$TRAINCTL" run stop.toml --ranks 2 --resume >stop_resume.log
grep -q '"event":"resume","detail":"[^"]*step-00000017.h5"' runs/stop/metrics.jsonl || fail "did not resume at step 17"
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/clean 30)" "$(checkpoint_of runs/stop 30)"

# Truncate the newest checkpoint: verify names it, and a longer run resumes from step 20.
newest=$(checkpoint_of runs/crash 30)
truncate -s $(($(stat -c %s "$newest") / 2)) "$newest"
if "$TRAINCTL" ckpt verify runs/crash >verify.log; then fail "ckpt verify accepted a truncated checkpoint"; fi
grep -q "BAD  $newest: the file has [0-9]* bytes, its sidecar step-00000030.json records" verify.log ||
  { cat verify.log; fail "verify did not name it"; }
write_config crash.toml crash train.steps=40 checkpoint.every_steps=10
"$TRAINCTL" run crash.toml --ranks 2 --resume >fallback.log 2>&1
grep -q "warning: skipping a checkpoint that does not verify: $PWD/$newest: the file has" fallback.log ||
  { cat fallback.log; fail "no warning about the corrupt checkpoint"; }
grep -q '"event":"resume","detail":"[^"]*step-00000020.h5"' runs/crash/metrics.jsonl || fail "did not fall back to 20"
"$TRAINCTL" ckpt verify "$(checkpoint_of runs/crash 40)"
echo "PASS"
