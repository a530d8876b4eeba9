#!/usr/bin/env bash
# A sweep that stops its losers early, on the real one-node cluster: 27 MLP trials (9 learning
# rates x 3 widths) under ASHA, η = 3, rungs at steps 20, 60, 180 and 540, max_parallel 4, beside
# the full grid of the same 27 run to step 540. `validate` and `render` show the rungs and the
# budget. The sweep completes with no trial failed and trains at most 40% of the grid's steps
# (`sweep status`). What holds in any order the trials reach their rungs is checked against the
# grid's uninterrupted runs and against rungs.jsonl: every rung result is the value the grid's
# run of that trial logged at that step, bitwise; replaying ASHA's rule over rungs.jsonl in its
# order gives exactly the trials that went on from each rung, and those include each rung's final
# best third. The best trial's final weights are bitwise those of the grid's run of its config;
# whether the grid's best is the same trial is reported, not asserted (ASHA may stop the grid's
# best on an early rung). `plot` draws the rungs.
source "$(dirname "$0")/lib.sh"
require_cluster 1
make_data
# Tiny trials: 540 steps of a 32-8/16/32-4 MLP take a fraction of a second; the run's start (srun,
# MPI) is most of a trial's time. Only the ends of rungs save.
write_config base.toml asha job.ranks_per_node=1 model.hidden='[8]' train.steps=540 train.log_every=20 \
  data.val='"data/val.h5"' train.eval_every=20 checkpoint.every_steps=0 checkpoint.keep_last=1
axes='"train.lr" = [0.001, 0.002, 0.003, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1]
"model.hidden" = [[8], [16], [32]]
max_parallel = 4'
{ cat base.toml; echo "[sweep]"; echo "$axes"; cat <<'TOML'

[sweep.schedule]
kind = "asha"
metric = "val_loss"
reduction_factor = 3
min_steps = 20
TOML
} >asha.toml
{ sed 's/^name = "asha"/name = "grid"/' base.toml; echo "[sweep]"; echo "$axes"; } >grid.toml

"$TRAINCTL" validate asha.toml | tee validate.txt
grep -qxF "schedule: asha on val_loss (min), reduction_factor 3: rungs at steps 20, 60, 180, 540" validate.txt ||
  fail "validate does not show the rungs"
grep -qF "budget: 1620 steps, 11.1% of the full grid's 14580 (27 trials x 540 steps)" validate.txt ||
  fail "validate does not show the budget"
"$TRAINCTL" render asha.toml 2>render.txt >asha.sbatch
grep -qxF "  trials at each rung with synchronous halving: 27, 9, 3, 1" render.txt || fail "render does not show the rungs"
grep -qF '"$scheduler" sweep rung "$TRAINCTL_SWEEP_DIR" --task "$task"' asha.sbatch ||
  fail "the rendered script does not ask at its rungs"

started=$SECONDS
submit_output=$("$TRAINCTL" submit asha.toml) || fail "submit: $submit_output"
"$TRAINCTL" submit grid.toml >/dev/null
# A trial promoted from a rung it stopped at runs in a new array, which a running task submits:
# the sweeps are done once no job of this test is left.
wait_for_test_jobs 400
echo "both sweeps ended in $((SECONDS - started)) s"

"$TRAINCTL" sweep status runs/asha | tee status.txt
grep -qE ' (FAILED|CANCELLED|UNKNOWN|promoted) ' status.txt && fail "a trial did not end at a rung or completed"
percent=$(sed -nE 's/^steps: [0-9]+ trained, ([0-9.]+)% of the full grid.s 14580 \(27 trials x 540 steps\)$/\1/p' status.txt)
[ -n "$percent" ] || fail "sweep status does not give the steps trained"
python3 -c "import sys; sys.exit(0 if float('$percent') <= 40 else 1)" || fail "ASHA trained $percent% of the grid's steps"
"$TRAINCTL" sweep status runs/asha --json >asha.json

best=$(python3 - runs/asha runs/grid asha.json <<'PY'
import json, sys
asha, grid = sys.argv[1], sys.argv[2]
eta, rungs = 3, [20, 60, 180, 540]

def logged(run, key):
    values = {}
    for line in open(f"{run}/metrics.jsonl"):
        record = json.loads(line)
        if key in record:
            values[record["step"]] = record[key]  # the last value logged at a step
    return values

log = [json.loads(line) for line in open(f"{asha}/rungs.jsonl")]
assert sorted((r["trial"], r["rung"]) for r in log) == sorted({(r["trial"], r["rung"]) for r in log}), "a rung twice"
assert {r["trial"] for r in log if r["rung"] == 0} == set(range(27)), "a trial without its first rung"
grid_values = {task: logged(f"{grid}/tasks/{task}", "val_loss") for task in range(27)}
for r in log:
    assert r["step"] == rungs[r["rung"]], r
    assert r["value"] == grid_values[r["trial"]][r["step"]], (r, grid_values[r["trial"]][r["step"]])
print(f"{len(log)} rung results equal the grid's uninterrupted runs at the same steps", file=sys.stderr)

# ASHA's rule over the record, in its order: after each result at a rung, its best n // eta go on.
results, promoted = {k: [] for k in range(4)}, {k: set() for k in range(3)}
for r in log:
    results[r["rung"]].append((r["value"], r["trial"]))
    if r["rung"] < 3:
        promoted[r["rung"]] |= {t for _, t in sorted(results[r["rung"]])[: len(results[r["rung"]]) // eta]}
for k in range(3):
    went_on = {r["trial"] for r in log if r["rung"] == k + 1}
    assert went_on == promoted[k], (k, sorted(went_on), sorted(promoted[k]))
    final_best = {t for _, t in sorted(results[k])[: len(results[k]) // eta]}
    assert final_best <= went_on, (k, final_best, went_on)
for t in range(27):  # no trial trained past the rung it stopped at
    last = max(r["rung"] for r in log if r["trial"] == t)
    assert max(logged(f"{asha}/tasks/{t}", "val_loss")) == rungs[last], t
print("trials per rung:", [len(results[k]) for k in range(4)], file=sys.stderr)

ranked = json.load(open(sys.argv[3]))
asha_best = ranked[0]["task"]
assert ranked[0]["rungs"][-1]["value"] == min(results[3])[0], ranked[0]
grid_final = [t for _, t in sorted((grid_values[t][540], t) for t in range(27))]
print(f"ASHA's best: task {asha_best}, val_loss {grid_values[asha_best][540]:.6f} at step 540; the full grid's best "
      f"there: task {grid_final[0]}, val_loss {grid_values[grid_final[0]][540]:.6f}; "
      + ("the same trial" if asha_best == grid_final[0] else f"ASHA's best ranks {grid_final.index(asha_best) + 1} of 27"),
      file=sys.stderr)
print(asha_best)
PY
) || fail "the ASHA sweep's decisions or values do not hold"
# The best trial resumed at every rung; its weights are those of the grid's uninterrupted run.
"$TRAINCTL" ckpt diff "$(checkpoint_of "runs/asha/tasks/$best" 540)" "$(checkpoint_of "runs/grid/tasks/$best" 540)"

"$TRAINCTL" plot runs/asha --width 800 --height 450 >/dev/null
[ "$(png_size runs/asha/loss.png)" = 800x450 ] || fail "the sweep's plot is not 800x450"
echo "PASS"
