#!/usr/bin/env bash
# A user's own program on the real one-node cluster (docs/programs.md): configs/program_demo.py,
# PyTorch DDP over gloo on 2 ranks, submitted through a [program] config whose --tag argument is
# hostile. SLURM's signal mid-run: both ranks save, exit 75, the batch script requeues, and the
# program resumes from its own checkpoint and completes. Its final weights equal an uninterrupted
# `trainctl run --ranks 2` of the same config, bit for bit. Every rank saw the contract's
# environment (MASTER_ADDR the node's address, MASTER_PORT from the job id, TRAINCTL_RESTART);
# the hostile argument arrived byte-exact and ran nothing; `status` reads the program's metrics
# and `logs` shows its output.
source "$(dirname "$0")/lib.sh"
require_cluster 1
require_torch
tag="\$(touch $work/pwned) \`touch $work/pwned\` '; touch $work/pwned; \" {x} \\ end"
toml_tag=$(/usr/bin/python3 -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$tag")
write_program_config ddp.toml ddp params.steps=150 params.save_every=40 params.step_sleep=0.05 \
  params.tag="$toml_tag"
"$TRAINCTL" validate ddp.toml >validate.txt &&
  grep -q 'valid: job "ddp" with 1 node(s) x 2 rank(s); program \["/usr/bin/python3", "program_demo.py",' validate.txt ||
  fail "validate does not describe the program"

job=$(submit ddp.toml)
run=runs/ddp
wait_for_step "$run" 50 120
scancel -s TERM "$job"
wait_for_job "$job" 60 PENDING
echo "signalled at step $(last_metric "$run" step) and requeued"
wait_for_job "$job" 120 COMPLETED FAILED CANCELLED
log=$(cat "$run/logs/slurm-$job.out")
[ "$(job_field "$job" JobState)" = COMPLETED ] || fail "job ended $(job_field "$job" JobState): $log"

saved=$(sed -n 's/^trainctl: saved at step \([0-9]*\); requeuing job .* (requeue 1 of 3)$/\1/p' <<<"$log")
[ -n "$saved" ] || fail "no requeue after a save: $log"
grep -q "program_demo: rank 0: stop signal: saved at step $saved; exiting with TRAINCTL_EXIT_REQUEUE" <<<"$log" ||
  fail "rank 0 did not save at step $saved"
grep -q "program_demo: rank 1: resuming from step-$(printf %08d "$saved").pt" <<<"$log" ||
  fail "rank 1 did not resume from its checkpoint of step $saved"
port=$((10000 + job % 20000))
expected_tag=$(/usr/bin/python3 -c 'import sys; print(repr(sys.argv[1]))' "$tag")
for rank in 0 1; do
  for restart in 0 1; do
    grep -qF "program_demo: rank $rank of 2 (local $rank of 2) on n1, master 127.0.0.1:$port, restart $restart, tag $expected_tag" \
      <<<"$log" || fail "rank $rank, restart $restart: not the contract's environment or not the tag as written: $log"
  done
done
[ ! -e pwned ] || fail "the hostile argument ran a command"
grep -q "trainctl: training complete" <<<"$log" || fail "no completion: $log"
"$TRAINCTL" logs "$run" >logs.txt && grep -q "^program_demo: rank 0 of 2 " logs.txt || fail "trainctl logs does not show the program's output"
[ "$(cat "$run/progress.step")" = 150 ] || fail "progress.step is $(cat "$run/progress.step")"
[ "$(cat "$run/completed.step")" = 150 ] || fail "completed.step is $(cat "$run/completed.step")"
for rank in 0 1; do
  [ "$(cut -d' ' -f1-2 "$run/rank.exits/$rank")" = "exit 0" ] || fail "rank $rank ended: $(cat "$run/rank.exits/$rank")"
done
[ "$(cat "$run/params.json")" = "{\"eval_every\":0,\"lr\":0.05,\"save_every\":40,\"seed\":0,\"step_sleep\":0.05,\"steps\":150,\"tag\":$toml_tag}" ] ||
  fail "params.json: $(cat "$run/params.json")"

"$TRAINCTL" status "$run" --json >status.json
/usr/bin/python3 - status.json "$run/metrics.jsonl" <<'PY' || fail "status disagrees with the program's metrics"
import json, sys
[row] = json.load(open(sys.argv[1]))
last = [json.loads(line) for line in open(sys.argv[2]) if "loss" in line][-1]
assert row["state"] == "COMPLETED" and row["restarts"] == 1, row
assert row["step"] == 150 and row["loss"] == last["loss"], (row, last)
assert row["requeue_reasons"][0].startswith("requeued: saved at step "), row
print("status:", row["state"], row["step"], row["loss"], row["requeue_reasons"])
PY

# The same config, never interrupted, on this machine.
"$TRAINCTL" run ddp.toml --ranks 2 --run-dir reference >reference.log 2>&1 || fail "reference run: $(cat reference.log)"
same_weights reference "$run"
echo "PASS"
