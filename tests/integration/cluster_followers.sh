#!/usr/bin/env bash
# Jobs that follow jobs, on the real one-node cluster (docs/usage.md, "Jobs that follow jobs"):
# - `submit --after RUN` (afterok, --kill-on-invalid-dep=yes) waits while RUN runs; when RUN fails,
#   SLURM cancels the follower, and `status` says why;
# - a training job with [[then]] export and evaluate, and a run submitted --after it: all three
#   wait while it trains, and still wait while it is requeued after a signal; they start once it
#   has completed, the export writes model.safetensors of the final step, and `trainctl eval` of a
#   checkpoint gives the validation loss the run logged at that step within 1e-6 relative;
# - the training job's [notify] webhook refuses connections: the job completes all the same;
# - runs whose run.json name each other as predecessors, and one that names itself: `status`
#   shows each with the loop named, exit 0.
source "$(dirname "$0")/lib.sh"
require_cluster 1
make_data

# job_state_is JOB STATE [REASON]
job_state_is() {
  local state reason
  state=$(job_field "$1" JobState) reason=$(job_field "$1" Reason)
  [ "$state" = "$2" ] && { [ -z "${3:-}" ] || [ "$reason" = "$3" ]; } ||
    fail "job $1 is $state ($reason), expected $2${3:+ ($3)}"
}

cat >fails.toml <<TOML
[job]
name = "fails"
[program]
# Bounded: a test that fails before it lets the job go must not leave it holding the node.
command = ["timeout", "300", "sh", "-c", "while [ ! -e $work/go ]; do sleep 0.2; done; exit 1"]
snapshot = "none"
TOML
cat >orphan.toml <<'TOML'
[job]
name = "orphan"
[program]
command = ["echo", "orphan ran"]
snapshot = "none"
TOML
failing=$(submit fails.toml)
orphan=$(submit orphan.toml --after runs/fails)
wait_for_job "$failing" 60 RUNNING
job_state_is "$orphan" PENDING Dependency
"$TRAINCTL" status runs/orphan >status.txt
grep -qF "waits for $work/runs/fails (job $failing) to complete (afterok)" status.txt || fail "status: $(cat status.txt)"
touch go
wait_for_job "$failing" 60 FAILED
wait_for_job "$orphan" 60 CANCELLED
"$TRAINCTL" status runs/orphan >status.txt
grep -qF "CANCELLED" status.txt &&
  grep -qF "cancelled: $work/runs/fails (job $failing) ended FAILED: failed: exit 1, and --after ok needed it to complete" status.txt ||
  fail "the cancelled follower's status: $(cat status.txt)"

write_config trained.toml trained train.steps=40 data.val='"data/val.h5"' train.eval_every=10
cat >>trained.toml <<'TOML'
[[then]]
kind = "export"

[[then]]
kind = "evaluate"

[notify]
webhook = "http://127.0.0.1:1/refused"
TOML
cat >after.toml <<'TOML'
[job]
name = "after"
[program]
command = ["echo", "after ran"]
snapshot = "none"
TOML
"$TRAINCTL" validate trained.toml >validate.txt && grep -q "; notifies 127.0.0.1:1 of .*; then export, evaluate$" validate.txt ||
  fail "validate does not tell the notifications and the follow-ups: $(cat validate.txt)"
training=$(TRAINCTL_TEST_PAUSE_IN=step@20 submit trained.toml)
run=runs/trained
read -r export_job evaluate_job < <(/usr/bin/python3 -c '
import json, sys
followers = json.load(open(sys.argv[1]))["then"]
assert [f["kind"] for f in followers] == ["export", "evaluate"], followers
print(*[f["job"] for f in followers])' "$run/run.json")
after=$(submit after.toml --after "$run")
wait_until_paused "$run" step@20 120
for job in "$export_job" "$evaluate_job" "$after"; do job_state_is "$job" PENDING Dependency; done
"$TRAINCTL" status "$run" >status.txt
grep -qF "then: export job $export_job PENDING (Dependency), evaluate job $evaluate_job PENDING (Dependency)" status.txt ||
  fail "status does not show the follow-ups: $(cat status.txt)"
scancel -s TERM "$training"
wait_for_job "$training" 60 PENDING
for job in "$export_job" "$evaluate_job" "$after"; do job_state_is "$job" PENDING; done
wait_for_job "$training" 240 COMPLETED FAILED CANCELLED
log=$(cat "$run/logs/slurm-$training.out")
[ "$(job_field "$training" JobState)" = COMPLETED ] || fail "training ended $(job_field "$training" JobState): $log"
expect_one_signal_requeue "$training" "$run"
grep -q "trainctl: notify completed: " <<<"$log" || fail "no word of the refused webhook: $log"
ended=$(job_field "$training" EndTime)
for job in "$export_job" "$evaluate_job" "$after"; do
  wait_for_job "$job" 120 COMPLETED FAILED CANCELLED
  job_state_is "$job" COMPLETED
  started=$(job_field "$job" StartTime)
  [[ ! "$started" < "$ended" ]] || fail "job $job started at $started, before the training ended at $ended"
done
grep -q "^exported .*(step 40, model mlp)" "$run/logs/then-0-export-$export_job.out" ||
  fail "the export: $(cat "$run/logs/then-0-export-$export_job.out")"
[ -s "$run/export/model.safetensors" ] || fail "no $run/export/model.safetensors"
grep -q "val_loss" "$run/logs/then-1-evaluate-$evaluate_job.out" ||
  fail "the evaluation: $(cat "$run/logs/then-1-evaluate-$evaluate_job.out")"
"$TRAINCTL" status "$run" >status.txt
grep -qF "then: export job $export_job COMPLETED, evaluate job $evaluate_job COMPLETED" status.txt ||
  fail "status after the follow-ups: $(cat status.txt)"

# A checkpoint's validation loss, as the run logged it at that step (the same 2 ranks).
"$TRAINCTL" eval "$run" --ckpt 30 --json >eval.json || fail "trainctl eval"
/usr/bin/python3 - eval.json "$run/metrics.jsonl" <<'PY' || fail "eval disagrees with the logged validation loss"
import json, sys
result = json.load(open(sys.argv[1]))
logged = [json.loads(line) for line in open(sys.argv[2])]
[val_loss] = [record["val_loss"] for record in logged if record.get("step") == 30 and "val_loss" in record]
assert result["world_size"] == 2 and result["step"] == 30, result
assert abs(result["val_loss"] - val_loss) <= 1e-6 * abs(val_loss), (result["val_loss"], val_loss)
print(f"eval of step 30: {result['val_loss']!r}, logged {val_loss!r}")
PY

# Predecessor loops, as run directories written by hand (or by an older trainctl) can hold them.
/usr/bin/python3 - "$work" "$orphan" "$after" <<'PY'
import json, sys
work, orphan, after = sys.argv[1:]
def wait(run, predecessor, job):
    path = f"{work}/runs/{run}/run.json"
    record = json.load(open(path))
    record["after"] = {"run": f"{work}/runs/{predecessor}", "job": job, "condition": "ok"}
    json.dump(record, open(path, "w"))
wait("fails", "orphan", orphan)
wait("after", "after", after)
PY
"$TRAINCTL" status runs/fails runs/orphan runs/after >loops.txt || fail "status of the loops exited $?: $(cat loops.txt)"
grep -qF "predecessor loop: $work/runs/fails waits for $work/runs/orphan, which waits for $work/runs/fails" loops.txt &&
  grep -qF "predecessor loop: $work/runs/orphan waits for $work/runs/fails, which waits for $work/runs/orphan" loops.txt &&
  grep -qF "predecessor loop: $work/runs/after waits for itself" loops.txt || fail "status of the loops: $(cat loops.txt)"
echo "PASS"
