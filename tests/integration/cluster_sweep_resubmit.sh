#!/usr/bin/env bash
# Resubmitting a sweep's failed tasks on the real one-node cluster: of a 4-task sweep over
# training files, task 2's file is not there yet (submitted with --no-preflight, which leaves
# the data to the compute nodes), so it fails; task 3 is cancelled while it
# waits. Once the file exists, `sweep resubmit --failed` runs exactly tasks 2 and 3 again as a
# new array, recorded in the manifest, and the table ends all completed.
source "$(dirname "$0")/lib.sh"
require_cluster 1
make_data
cp data/train.h5 data/a.h5
cp data/train.h5 data/b.h5
write_config base.toml staged job.ranks_per_node=1 train.steps=40
cat base.toml - >sweep.toml <<'TOML'
[sweep]
"data.train" = ["data/a.h5", "data/b.h5", "data/c.h5", "data/a.h5"]
max_parallel = 1
TOML
sweep=runs/staged

output=$("$TRAINCTL" submit sweep.toml --no-preflight) || fail "submit: $output"
job=$(sed -n 's/^submitted sweep of 4 tasks as job //p' <<<"$output")
[ -n "$job" ] || fail "unexpected submit output: $output"
scancel "${job}_3"
# A task cancelled while pending has no record of its own in slurmctld; sweep status infers it.
for task in 0 1 2; do wait_for_job "${job}_$task" 120 COMPLETED FAILED; done

"$TRAINCTL" sweep status "$sweep" --sort task | tee before.txt
expect_state() { grep -qE "^[ *]$1 .* $2 " "$3" || fail "task $1 is not $2 in $3"; }
expect_state 0 COMPLETED before.txt
expect_state 1 COMPLETED before.txt
expect_state 2 FAILED before.txt
expect_state 3 CANCELLED before.txt
grep -q "cannot read dataset .*/data/c.h5" "$sweep/tasks/2/logs/slurm-${job}_2.out" || fail "task 2 failed for another reason"

# Tasks 0 and 1 must not run again: their records stay as they are.
untouched=$(cat "$sweep"/tasks/{0,1}/{metrics.jsonl,job_id} | md5sum)
cp data/train.h5 data/c.h5
output=$("$TRAINCTL" sweep resubmit "$sweep" --failed) || fail "resubmit: $output"
echo "$output"
again=$(sed -nE 's/^resubmitted 2 task\(s\) \(2, 3\) as job ([0-9]+)$/\1/p' <<<"$output")
[ -n "$again" ] || fail "unexpected resubmit output: $output"
python3 - "$sweep/manifest.toml" "$again" <<'PY' || fail "the manifest does not record the resubmission"
import sys, tomllib
manifest = tomllib.load(open(sys.argv[1], "rb"))
last = manifest["arrays"][-1]
assert len(manifest["arrays"]) == 2 and last["job_id"] == sys.argv[2], manifest["arrays"]
assert last["tasks"] == [2, 3] and last["reason"] == "resubmit --failed", last
PY
for index in 0 1; do wait_for_job "${again}_$index" 120 COMPLETED FAILED CANCELLED; done

"$TRAINCTL" sweep status "$sweep" --sort task | tee after.txt
for task in 0 1 2 3; do expect_state "$task" COMPLETED after.txt; done
[ "$(cat "$sweep"/tasks/{0,1}/{metrics.jsonl,job_id} | md5sum)" = "$untouched" ] || fail "tasks 0 or 1 ran again"
[ "$(cat "$sweep/tasks/2/job_id")" = "${again}_0" ] && [ "$(cat "$sweep/tasks/3/job_id")" = "${again}_1" ] ||
  fail "tasks 2 and 3 did not run in the new array"
output=$("$TRAINCTL" sweep resubmit "$sweep" --failed)
[ "$output" = "nothing to resubmit: every task of $PWD/$sweep is completed, queued or running" ] ||
  fail "a second resubmit: $output"
echo "PASS"
