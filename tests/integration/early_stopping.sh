#!/usr/bin/env bash
# Early stopping and the best checkpoint: a run whose validation loss stops improving (an MLP
# overfitting 256 samples, lib.sh's write_early_stop_config) ends before train.steps, at the
# evaluation that exhausts its patience, keeps the best checkpoint apart from keep_last, and
# says so in `status`. The same run stopped by a signal
# between its best evaluation and its end resumes and ends at the same step, with bitwise-equal
# best and last checkpoints: the best loss, its step and the patience count are resumable state.
source "$(dirname "$0")/lib.sh"
require_mpi
write_early_stop_config clean.toml clean
write_early_stop_config preempted.toml preempted

"$TRAINCTL" run clean.toml --ranks 2 >clean.log
stopped=$(sed -nE 's/.*"step":([0-9]+),"event":"early_stop".*/\1/p' runs/clean/metrics.jsonl)
[ "$stopped" = 55 ] || fail "the run did not stop early at step 55 (event at '${stopped}')"
[ "$(cat runs/clean/completed.step)" = "$stopped" ] || fail "completed.step is not the early stop's step"
best=$(ls runs/clean/checkpoints/best | sed -nE 's/^step-0*([0-9]+)\.h5$/\1/p')
[ "$(echo "$best" | wc -l)" = 1 ] || fail "checkpoints/best holds '${best}', not one checkpoint"
[ "$best" = 40 ] || fail "patience 3 x eval_every 5: the best should be step 40, is $best"
[ ! -e "$(checkpoint_of runs/clean "$best")" ] || fail "keep_last = 1 should have pruned step $best from checkpoints/"
"$TRAINCTL" ckpt verify runs/clean/checkpoints/best/"$(printf 'step-%08d.h5' "$best")"
best_val_loss=$(sed -nE "s/.*\"step\":$best,\"val_loss\":([-0-9.e+]+).*/\1/p" runs/clean/metrics.jsonl | tail -n 1)
grep -q "\"event\":\"early_stop\",\"detail\":\"3 evaluations without improving on val_loss [0-9.]* of step $best " \
  runs/clean/metrics.jsonl || fail "the event does not name the best step"
"$TRAINCTL" status runs/clean >status.txt
grep -q "stopped early at step $stopped" status.txt || { cat status.txt; fail "status does not say it stopped early"; }
echo "stopped early at step $stopped, best at step $best (val_loss $best_val_loss)"

# A signal after the best evaluation, before the end: the resumed run must count on from there.
signal_step=$((best + 7))
if TRAINCTL_TEST_SIGNAL_AT_STEP=$signal_step "$TRAINCTL" run preempted.toml --ranks 2 >preempted.log 2>&1; then
  fail "the run did not stop at the signal"
fi
grep -q "\"step\":$signal_step,\"event\":\"stop\"" runs/preempted/metrics.jsonl || fail "no stop at step $signal_step"
"$TRAINCTL" run preempted.toml --ranks 2 --resume >resumed.log
grep -q "\"step\":$stopped,\"event\":\"early_stop\"" runs/preempted/metrics.jsonl ||
  fail "the resumed run did not stop early at step $stopped"
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/clean "$stopped")" "$(checkpoint_of runs/preempted "$stopped")"
"$TRAINCTL" ckpt diff runs/{clean,preempted}/checkpoints/best/"$(printf 'step-%08d.h5' "$best")"
# Started again, a run that stopped early trains no further.
"$TRAINCTL" run preempted.toml --ranks 2 --resume >again.log
[ "$(grep -c '"event":"early_stop"' runs/preempted/metrics.jsonl)" = 2 ] || fail "a rerun did not stop at once"
grep -q "\"step\":$((stopped + 1)),\"loss\"" runs/preempted/metrics.jsonl && fail "a rerun trained past the early stop"
echo "PASS"
