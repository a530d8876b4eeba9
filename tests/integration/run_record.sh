#!/usr/bin/env bash
# run.json and what trainctl refuses before a job is queued (docs/usage.md, "Frozen code"):
# `trainctl run` records trainctl's and the runtime's versions; a run recorded under another
# trainctl-runtime is refused by `run --resume` (exit 2, both versions named) and by the runtime
# itself, as a requeued job would start it, until --allow-runtime-change records the installed one.
# A [program]'s code snapshot over program.snapshot_max_mb is refused by `submit` (exit 2) naming
# the biggest file, in a plain folder and in a git work tree, before anything is created or
# SLURM is asked.
source "$(dirname "$0")/lib.sh"
make_data
write_config small.toml small job.ranks_per_node=1 train.steps=20
"$TRAINCTL" run small.toml >run.log 2>&1 || fail "run: $(cat run.log)"
installed=$("$TRAINCTL_BUILD_DIR/runtime/trainctl-runtime" --version)
/usr/bin/python3 - runs/small/run.json "$installed" <<'PY' || fail "run.json: $(cat runs/small/run.json)"
import json, sys
record = json.load(open(sys.argv[1]))
assert record["runtime_version"] == sys.argv[2], record
assert record["trainctl_version"].startswith("trainctl "), record
assert "code" not in record, record
print("run.json:", record)
PY

/usr/bin/python3 - runs/small/run.json <<'PY'
import json, sys
record = json.load(open(sys.argv[1]))
record["runtime_version"] = "trainctl-runtime 0.0.1 (revision older)"
json.dump(record, open(sys.argv[1], "w"))
PY
expect_exit 2 "$TRAINCTL" run small.toml --resume
grep -q "was submitted to trainctl-runtime 0.0.1 (revision older), and this is $installed" err.txt ||
  fail "run --resume did not name both versions: $(cat err.txt)"
# What a requeued job does: the runtime started on the run directory.
expect_exit 2 "$TRAINCTL_BUILD_DIR/runtime/trainctl-runtime" --run-dir runs/small
grep -q "runtime changed .*--allow-runtime-change" err.txt || fail "the runtime did not refuse: $(cat err.txt)"
"$TRAINCTL" run small.toml --resume --allow-runtime-change >resume.log 2>&1 || fail "allowed resume: $(cat resume.log)"
grep -qF "\"runtime_version\": \"$installed\"" runs/small/run.json || fail "run.json keeps the old version"

# Too big a snapshot: a plain folder, then a git work tree, each with one big file.
mkdir -p plain/sub
head -c 3000000 /dev/zero >plain/sub/weights.bin
head -c 1000 /dev/zero >plain/train.py
cat >big.toml <<TOML
[job]
name = "big"
[program]
workdir = "plain"
command = ["python3", "train.py"]
snapshot_max_mb = 2
TOML
expect_exit 2 "$TRAINCTL" submit big.toml
grep -q "code snapshot of 2 files from $work/plain is 2.9 MB, more than program.snapshot_max_mb (2); the biggest: sub/weights.bin (2.9 MB), train.py (0.0 MB)" err.txt ||
  fail "the refusal does not name the biggest file: $(cat err.txt)"
[ ! -e runs/big ] || fail "a refused submit left runs/big"
git init -q repo && cp plain/train.py repo/ && cp plain/sub/weights.bin repo/data.bin
git -C repo add . && git -C repo -c user.name=t -c user.email=t@t commit -qm code
sed -i 's#workdir = "plain"#workdir = "repo"#' big.toml
expect_exit 2 "$TRAINCTL" submit big.toml
grep -q "code snapshot of 2 files from $work/repo is 2.9 MB, .* the biggest: data.bin (2.9 MB)" err.txt ||
  fail "the git snapshot's refusal does not name the biggest file: $(cat err.txt)"
echo "PASS"
