#!/usr/bin/env bash
# A [program] sweep under ASHA on the real one-node cluster: 9 trials of a small Python program
# (written here) over params.lr, judged by its own metric "score" (mode max), rungs at steps 5, 15
# and 45 (max_steps), max_parallel 3. The program reads its budget from {budget.steps} and
# TRAINCTL_BUDGET_STEPS, saves its state in the checkpoint directory, and on a start with a state
# asserts that it resumes from the step it stopped at (its last logged step), so a promoted trial
# that did not resume from its own checkpoint fails. One trial's score is not finite (null): it
# is stopped at the first rung as the worst, not failed. The promotions are ASHA's rule replayed
# over rungs.jsonl, and the trial with the best score completes.
source "$(dirname "$0")/lib.sh"
require_cluster 1
cat >rungs.py <<'PY'
import json, os, sys

run_dir, lr, budget = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
assert os.environ["TRAINCTL_BUDGET_STEPS"] == str(budget), os.environ["TRAINCTL_BUDGET_STEPS"]
state_path = os.path.join(os.environ["TRAINCTL_CHECKPOINT_DIR"], "state.json")
metrics = os.path.join(run_dir, "metrics.jsonl")
step, x = 0, 0.0
if os.path.exists(state_path):
    with open(state_path) as f:
        state = json.load(f)
    step, x = state["step"], state["x"]
    with open(metrics) as f:
        stopped_at = max(json.loads(line)["step"] for line in f)
    assert step == stopped_at, f"resumed at step {step}, but stopped at step {stopped_at}"
    print(f"resumed from step {step}")
else:
    assert os.path.getsize(metrics) == 0, "a first start finds metrics logged"
while step < budget:
    step += 1
    x += lr * (1 - x)
    if step % 5 == 0:
        with open(metrics, "a") as f:
            f.write(json.dumps({"step": step, "score": None if lr > 0.5 else x}) + "\n")
for path, text in ((state_path, json.dumps({"step": step, "x": x})), (os.path.join(run_dir, "progress.step"), f"{step}\n")):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
PY
cat >sweep.toml <<TOML
[job]
name = "program-asha"
ranks_per_node = 1

[program]
command = ["/usr/bin/python3", "rungs.py", "{run_dir}", "{params.lr}", "{budget.steps}"]

[params]
lr = 0.01

[sweep]
"params.lr" = [0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.9]
max_parallel = 3

[sweep.schedule]
kind = "asha"
metric = "score"
mode = "max"
min_steps = 5
max_steps = 45
TOML
"$TRAINCTL" validate sweep.toml | tee validate.txt
grep -qxF "schedule: asha on score (max), reduction_factor 3: rungs at steps 5, 15, 45" validate.txt ||
  fail "validate does not show the rungs"

"$TRAINCTL" submit sweep.toml --no-snapshot >/dev/null
sweep=runs/program-asha
wait_for_test_jobs 300
"$TRAINCTL" sweep status "$sweep" | tee status.txt
grep -qE ' (FAILED|CANCELLED|UNKNOWN|promoted) ' status.txt && fail "a trial did not end at a rung or completed"
grep -qE '^ +8 +0\.9 +stopped at rung 0 .* score not finite$' status.txt || fail "the non-finite trial is not stopped"
grep -qE '^\*7 +0\.08 +COMPLETED ' status.txt || fail "the best trial did not complete"

python3 - "$sweep" <<'PY' || fail "the promotions are not ASHA's"
import glob, json, sys
sweep, eta, rungs = sys.argv[1], 3, [5, 15, 45]
log = [json.loads(line) for line in open(f"{sweep}/rungs.jsonl")]
results, promoted = {k: [] for k in range(3)}, {k: set() for k in range(2)}
for r in log:
    value = r["value"]
    results[r["rung"]].append((float("inf") if value is None else -value, r["trial"]))
    if r["rung"] < 2:
        best = sorted(results[r["rung"]])[: len(results[r["rung"]]) // eta]
        promoted[r["rung"]] |= {t for badness, t in best if badness != float("inf")}
for k in range(2):
    went_on = {r["trial"] for r in log if r["rung"] == k + 1}
    assert went_on == promoted[k], (k, went_on, promoted[k])
for t in range(9):
    reached = max(r["rung"] for r in log if r["trial"] == t)
    logs = "".join(open(path).read() for path in glob.glob(f"{sweep}/tasks/{t}/logs/*.out"))
    resumes = sorted(int(line.split()[-1]) for line in logs.splitlines() if line.startswith("resumed from step"))
    assert resumes == rungs[:reached], (t, resumes, rungs[:reached])
print("trials per rung:", [len(results[k]) for k in range(3)], "; each promotion resumed at its rung")
PY
echo "PASS"
