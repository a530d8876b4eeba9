#!/usr/bin/env bash
# A sweep of a user's program on the real one-node cluster: 4 tasks of configs/program_demo.py
# over params.lr with max_parallel = 2. squeue never shows more than 2 running; each task's
# params.json carries its own lr; one task, cancelled before it starts, goes again
# with `sweep resubmit --failed`; `sweep status` ranks the 4 completed tasks by the validation
# losses the program wrote to its metrics.jsonl.
source "$(dirname "$0")/lib.sh"
require_cluster 1
require_torch
write_program_config base.toml lr-sweep job.ranks_per_node=1 params.steps=60 params.eval_every=20 \
  params.step_sleep=0.02
cat base.toml - >sweep.toml <<'TOML'

[sweep]
"params.lr" = [0.003, 0.01, 0.03, 0.1]
max_parallel = 2
TOML
described=$("$TRAINCTL" validate sweep.toml) || fail "validate: $described"
grep -q "sweep: 4 tasks over params.lr, at most 2 at once" <<<"$described" ||
  fail "validate does not describe the sweep"

output=$("$TRAINCTL" submit sweep.toml) || fail "submit: $output"
job=$(sed -n 's/^submitted sweep of 4 tasks as job //p' <<<"$output")
[ -n "$job" ] || fail "unexpected submit output: $output"
sweep=runs/lr-sweep
track_most_running "$job" most_running &
sampler=$!
scancel "${job}_3"  # still pending: max_parallel lets tasks 0 and 1 run first
for task in 0 1 2; do wait_for_job "${job}_$task" 120 COMPLETED FAILED CANCELLED; done
wait "$sampler"
[ "$(cat most_running)" = 2 ] || fail "expected at most (and at some point) 2 running tasks, saw $(cat most_running)"
echo "at most 2 tasks ran at once"

"$TRAINCTL" sweep status "$sweep" | tee status.txt
grep -qE "^ +3 .*CANCELLED" status.txt || fail "task 3 is not shown as cancelled"
output=$("$TRAINCTL" sweep resubmit "$sweep" --failed) || fail "resubmit: $output"
resubmitted=$(sed -n 's/^resubmitted 1 task(s) (3) as job //p' <<<"$output")
[ -n "$resubmitted" ] || fail "unexpected resubmit output: $output"
wait_for_job "${resubmitted}_0" 120 COMPLETED FAILED CANCELLED

"$TRAINCTL" sweep status "$sweep" | tee status.txt
[ "$(grep -c ' COMPLETED ' status.txt)" = 4 ] || fail "sweep status does not show 4 completed tasks"
"$TRAINCTL" sweep status "$sweep" --json >status.json
/usr/bin/python3 - "$sweep" status.json <<'PY' || fail "sweep status disagrees with the program's metrics"
import json, sys
sweep, rows = sys.argv[1], json.load(open(sys.argv[2]))
lrs = [0.003, 0.01, 0.03, 0.1]
best = {}
for task in range(4):
    lines = [json.loads(line) for line in open(f"{sweep}/tasks/{task}/metrics.jsonl")]
    best[task] = min(line["val_loss"] for line in lines if "val_loss" in line)
    assert json.load(open(f"{sweep}/tasks/{task}/params.json"))["lr"] == lrs[task], task
assert [row["task"] for row in rows] == sorted(best, key=best.get), (rows, best)
for position, row in enumerate(rows):
    assert row["rank"] == position + 1 and row["state"] == "COMPLETED" and row["step"] == 60, row
    assert row["best_val_loss"] == best[row["task"]], (row, best)
    assert row["params"]["params.lr"] == lrs[row["task"]], row
print("ranked by best val_loss:", [(row["task"], row["best_val_loss"]) for row in rows])
PY
echo "PASS"
