#!/usr/bin/env bash
# A sweep on the real one-node cluster: a 6-task grid with max_parallel = 2 runs as one job
# array. squeue, sampled throughout, never shows more than 2 tasks running. One task,
# signalled mid-run, saves, requeues only itself (<array job>_<index>), resumes and ends with
# weights bitwise equal to the same task run uninterrupted; the other tasks are untouched.
# `sweep status` ends with 6 completed rows whose losses are those of each task's metrics, and
# `plot` draws the sweep at the size asked for.
source "$(dirname "$0")/lib.sh"
require_cluster 1
make_data
write_config base.toml grid job.ranks_per_node=1 model.hidden='[512, 512]' train.micro_batch=128 \
  train.steps=1500 train.log_every=25 data.val='"data/val.h5"' train.eval_every=500 checkpoint.every_steps=500
cat base.toml - >sweep.toml <<'TOML'
[sweep]
"train.lr" = [3e-3, 1e-2, 3e-2]
"train.seed" = [1, 2]
max_parallel = 2
TOML
described=$("$TRAINCTL" validate sweep.toml) || fail "validate: $described"
grep -q "sweep: 6 tasks over train.lr, train.seed, at most 2 at once" <<<"$described" ||
  fail "validate does not describe the sweep"

# The test hook holds task 5's rank 0 at the start of its step 300 until the signal below, so
# that it lands mid-run however fast the machine trains; the other tasks do not pause.
output=$(TRAINCTL_TEST_PAUSE_IN=step@300 TRAINCTL_TEST_PAUSE_TASK=5 "$TRAINCTL" submit sweep.toml) ||
  fail "submit: $output"
job=$(sed -n 's/^submitted sweep of 6 tasks as job //p' <<<"$output")
[ -n "$job" ] || fail "unexpected submit output: $output"
sweep=runs/grid

# The throttle, sampled until the array has left the queue's active states.
track_most_running "$job" most_running &
sampler=$!

# Signal task 5 mid-run, the way SLURM does before a time limit. The last task, because while an
# array still has pending tasks, slurmctld 22.05 answers `scancel -s` to one of its running tasks
# with "Job can not be altered now, try again later" although it delivered the signal, and
# scancel retries every few seconds, signalling the requeued run again. (The time-limit signal
# comes from slurmctld itself and is not affected.)
wait_until_paused "$sweep/tasks/5" step@300 180
scancel -s TERM "${job}_5"
wait_for_job "${job}_5" 60 PENDING
echo "task 5 signalled and requeued"

for task in 0 1 2 3 4 5; do wait_for_job "${job}_$task" 300 COMPLETED FAILED CANCELLED; done
wait "$sampler"
[ "$(cat most_running)" = 2 ] || fail "expected at most (and at some point) 2 running tasks, saw $(cat most_running)"
echo "at most 2 tasks ran at once"

# Only task 5 was requeued, and only it stopped and resumed.
for task in 0 1 2 3 4 5; do
  expected=$([ "$task" = 5 ] && echo 1 || echo 0)
  [ "$(job_field "${job}_$task" Restarts)" = "$expected" ] || fail "task $task: Restarts $(job_field "${job}_$task" Restarts)"
  events=$(grep -c '"event":"\(stop\|resume\)"' "$sweep/tasks/$task/metrics.jsonl" || true)
  [ "$events" = "$((2 * expected))" ] || fail "task $task has $events stop/resume events"
done
grep -qE "trainctl: saved at step [0-9]+; requeuing job ${job}_5 \(requeue 1 of 5\)" \
  "$sweep/tasks/5/logs/slurm-${job}_5.out" || fail "task 5 did not requeue itself"

"$TRAINCTL" sweep status "$sweep" | tee status.txt
[ "$(grep -c ' COMPLETED ' status.txt)" = 6 ] || fail "sweep status does not show 6 completed tasks"
grep -qxF "plot: trainctl plot $sweep  (writes $sweep/loss.png)" status.txt || fail "sweep status does not say where the plot goes"
"$TRAINCTL" plot "$sweep" --width 800 --height 450 >/dev/null
[ "$(png_size "$sweep/loss.png")" = 800x450 ] || fail "the sweep's plot is $(png_size "$sweep/loss.png"), not 800x450"
"$TRAINCTL" sweep status "$sweep" --json >status.json
python3 - "$sweep" status.json <<'PY' || fail "sweep status --json disagrees with the metrics files"
import json, sys
sweep, rows = sys.argv[1], json.load(open(sys.argv[2]))
assert sorted(row["task"] for row in rows) == list(range(6)), rows
best = min(rows, key=lambda row: row["best_val_loss"])
assert rows[0] is best and rows[0]["rank"] == 1, "the best task is not ranked first"
for row in rows:
    lines = [json.loads(line) for line in open(f"{sweep}/tasks/{row['task']}/metrics.jsonl")]
    train = [line for line in lines if "loss" in line]
    evals = [line["val_loss"] for line in lines if "val_loss" in line]
    assert row["state"] == "COMPLETED" and row["step"] == 1500, row
    assert row["loss"] == train[-1]["loss"], (row, train[-1])
    assert row["best_val_loss"] == min(evals), (row, evals)
    assert row["restarts"] == (1 if row["task"] == 5 else 0), row
print("status rows match the metrics files")
PY

# Task 5 again, from its own resolved config, never interrupted.
"$TRAINCTL" run "$sweep/tasks/5/config.toml" --run-dir reference >reference.log
"$TRAINCTL" ckpt diff "$(checkpoint_of reference 1500)" "$(checkpoint_of "$sweep/tasks/5" 1500)"
echo "PASS"
