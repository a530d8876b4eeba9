#!/usr/bin/env bash
# Resume on another world size: a run of 2 ranks x grad_accum 1, stopped at a known step, goes
# on as 1 rank x grad_accum 2 (the same global batch, so the same samples at every step), and
# ends with the weights of an uninterrupted 2-rank run up to the summation order of the
# gradients (1e-6 relative).
source "$(dirname "$0")/lib.sh"
require_mpi
make_data
write_config clean.toml clean train.steps=30 checkpoint.every_steps=10
write_config two.toml moved train.steps=30 checkpoint.every_steps=10
write_config one.toml moved train.steps=30 checkpoint.every_steps=10 job.ranks_per_node=1 train.grad_accum=2

"$TRAINCTL" run clean.toml --ranks 2 >clean.log
if TRAINCTL_TEST_SIGNAL_AT_STEP=17 "$TRAINCTL" run two.toml --ranks 2 >stop.log 2>&1; then
  fail "the 2-rank run did not stop at the signal"
fi
grep -q "stopped by a signal after saving" stop.log || { cat stop.log; fail "the 2-rank run failed instead of stopping"; }
"$TRAINCTL" run one.toml --resume --run-dir runs/moved >resume.log 2>&1 || { cat resume.log; fail "the 1-rank resume failed"; }
grep -q '"event":"resume","detail":"[^"]*step-00000017.h5"' runs/moved/metrics.jsonl || fail "did not resume at step 17"
"$TRAINCTL" ckpt diff "$(checkpoint_of runs/clean 30)" "$(checkpoint_of runs/moved 30)" --rtol 1e-6
echo "PASS"
