#!/usr/bin/env bash
# Synchronous successive halving on the real one-node cluster: 9 MLP trials (3 learning rates x
# 3 widths), η = 3, rungs at steps 10, 30 and 90, max_parallel 2. Task 7 is made to fail (its
# config broken while it waits) and task 8 is signalled in the middle of its first rung, saves,
# is requeued and goes on. Rung 0 cannot complete without task 7: every other trial stops there,
# and `sweep status` shows task 7 FAILED. Once its config is mended, `sweep resubmit --failed`
# runs task 7 alone, and the sweep completes. Checked against the trials' metrics.jsonl: every
# rung's promoted set is exactly the best third of that rung's values; each trial's value at each
# rung it reached is bitwise that of an uninterrupted run of its config (so the decisions and the
# best trial are those the sweep makes without the signal or the failure); the best trial's
# final weights are bitwise those of that run.
source "$(dirname "$0")/lib.sh"
require_cluster 1
make_data
write_config base.toml halving job.ranks_per_node=1 train.steps=90 train.log_every=10 data.val='"data/val.h5"' \
  train.eval_every=10 checkpoint.every_steps=0 checkpoint.keep_last=1
cat base.toml - >sweep.toml <<'TOML'
[sweep]
"train.lr" = [0.003, 0.01, 0.03]
"model.hidden" = [[8], [16], [32]]
max_parallel = 2

[sweep.schedule]
kind = "halving"
min_steps = 10
TOML
sweep=runs/halving

# The test hook holds task 8's rank 0 at the start of step 5 until the signal below: the last
# task, so that no task of its array is pending when it is signalled (docs/sweeps.md, "A SLURM
# 22.05 quirk").
output=$(TRAINCTL_TEST_PAUSE_IN=step@5 TRAINCTL_TEST_PAUSE_TASK=8 "$TRAINCTL" submit sweep.toml) ||
  fail "submit: $output"
job=$(sed -n 's/^submitted sweep of 9 tasks as job //p' <<<"$output")
[ -n "$job" ] || fail "unexpected submit output: $output"
# Task 7 waits behind max_parallel: its config breaks before it starts.
cp "$sweep/tasks/7/config.toml" config-7.toml
echo "not toml" >>"$sweep/tasks/7/config.toml"
wait_until_paused "$sweep/tasks/8" step@5 180
scancel -s TERM "${job}_8"
wait_for_test_jobs 300

"$TRAINCTL" sweep status "$sweep" --sort task | tee before.txt
grep -qE '^ +7 .* FAILED ' before.txt || fail "task 7 is not shown failed"
[ "$(grep -c ' stopped at rung 0 ' before.txt)" = 8 ] || fail "the other 8 trials do not wait at rung 0"
grep -q '^requeued: saved at step' "$sweep/tasks/8/job.outcome" || fail "task 8 was not requeued after its save"

cp config-7.toml "$sweep/tasks/7/config.toml"
output=$("$TRAINCTL" sweep resubmit "$sweep" --failed) || fail "resubmit: $output"
echo "$output"
grep -qE '^resubmitted 1 task\(s\) \(7\) as job [0-9]+$' <<<"$output" || fail "unexpected resubmit output: $output"
wait_for_test_jobs 300

"$TRAINCTL" sweep status "$sweep" | tee after.txt
[ "$(grep -c ' COMPLETED ' after.txt)" = 1 ] || fail "no trial, or more than one, completed"
grep -qE ' (FAILED|CANCELLED|UNKNOWN|promoted) ' after.txt && fail "a trial did not end at a rung or completed"

# Each trial uninterrupted, from its own config, on this machine.
for task in 0 1 2 3 4 5 6 7 8; do
  "$TRAINCTL" run "$sweep/tasks/$task/config.toml" --run-dir "reference/$task" >/dev/null
done
best=$(python3 - "$sweep" reference <<'PY'
import json, sys
sweep, reference = sys.argv[1:]
eta, rungs = 3, [10, 30, 90]

def val_loss(run):
    values = {}
    for line in open(f"{run}/metrics.jsonl"):
        record = json.loads(line)
        if "val_loss" in record:
            values[record["step"]] = record["val_loss"]  # the last value logged at a step
    return values

swept = {t: val_loss(f"{sweep}/tasks/{t}") for t in range(9)}
plain = {t: val_loss(f"{reference}/{t}") for t in range(9)}
at_rung = [{t: swept[t][step] for t in range(9) if step in swept[t]} for step in rungs]
for k, values in enumerate(at_rung):
    for t, value in values.items():
        assert value == plain[t][rungs[k]], (t, k, value, plain[t][rungs[k]])
    if k + 1 < len(rungs):
        best_third = set(sorted(values, key=lambda t: (values[t], t))[: len(values) // eta])
        assert set(at_rung[k + 1]) == best_third, (k, sorted(at_rung[k + 1]), sorted(best_third))
    print(f"rung {k} (step {rungs[k]}): {sorted(values)}", file=sys.stderr)
assert [len(values) for values in at_rung] == [9, 3, 1], at_rung
print(next(iter(at_rung[2])))
PY
) || fail "the promotions or the rungs' values do not hold"
"$TRAINCTL" ckpt diff "$(checkpoint_of "reference/$best" 90)" "$(checkpoint_of "$sweep/tasks/$best" 90)"
echo "PASS"
