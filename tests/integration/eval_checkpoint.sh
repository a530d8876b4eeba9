#!/usr/bin/env bash
# trainctl eval: a checkpoint's validation loss, computed on the CPU from the checkpoint alone,
# is the one its run logged at that step, to 1e-6 relative: for a run of 1 rank and, where the
# build has MPI, one of 2 ranks, whose world size eval takes from the checkpoint. The validation
# set (300 samples) fills neither the ranks' shares nor their micro-batches of 32 evenly, so
# every share ends in a short micro-batch. --json has its fields; the newest checkpoint is the
# default; a step without a checkpoint, a run without data.val and --ckpt on one checkpoint are
# refused with exit 2, the first naming the steps there are.
source "$(dirname "$0")/lib.sh"
mkdir -p data
"$TRAINCTL" data synth -o data/small.h5 --val-out data/small_val.h5 --samples 256 --val-samples 300 --features 32 \
  --classes 4 --seed 5 >/dev/null
eval_config() {
  write_config "$1.toml" "$1" train.steps=20 data.train='"data/small.h5"' data.val='"data/small_val.h5"' \
    train.eval_every=5 checkpoint.every_steps=10 checkpoint.keep_last=3
}

# expect_logged_loss RUN STEP WORLD_SIZE: `trainctl eval RUN --ckpt STEP --json` reports world size
# WORLD_SIZE and the val_loss and val_accuracy the run logged at STEP, and no other step's.
expect_logged_loss() {
  "$TRAINCTL" eval "$1" --ckpt "$2" --json >eval.json || fail "trainctl eval $1 --ckpt $2 failed"
  /usr/bin/python3 - "$1" "$2" "$3" <<'PY' || fail "trainctl eval $1 --ckpt $2 does not reproduce the logged loss (above)"
import json, math, sys
run, step, world_size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
result = json.load(open("eval.json"))
fields = {"run", "checkpoint", "step", "val_loss", "accuracy", "examples", "world_size", "logged_val_loss"}
assert set(result) == fields, f"fields {sorted(result)}, expected {sorted(fields)}"
assert result["run"] == run and result["step"] == step, result
assert result["checkpoint"] == f"{run}/checkpoints/step-{step:08d}.h5", result["checkpoint"]
assert result["examples"] == 300 and result["world_size"] == world_size, result
evals = {}
for line in open(f"{run}/metrics.jsonl"):
    record = json.loads(line)
    if "val_loss" in record:
        evals[record["step"]] = record
assert step in evals, f"{run}/metrics.jsonl has no eval at step {step}: it has {sorted(evals)}"
logged, ours = evals[step]["val_loss"], result["val_loss"]
print(f"{run} step {step}, world size {world_size}: eval {ours!r}, logged {logged!r}")
assert isinstance(ours, float) and math.isfinite(ours) and ours > 0, f"val_loss {ours!r} is no positive number"
assert abs(ours - logged) <= 1e-6 * abs(logged), f"relative difference {abs(ours - logged) / abs(logged):.3g}"
assert result["logged_val_loss"] == logged, result["logged_val_loss"]
assert abs(result["accuracy"] - evals[step]["val_accuracy"]) <= 1e-9, (result["accuracy"], evals[step])
others = [other for other, record in evals.items()
          if other != step and abs(ours - record["val_loss"]) <= 1e-6 * abs(record["val_loss"])]
assert not others, f"the loss is also that of steps {others}: the comparison tells no checkpoint apart"
PY
}

eval_config one-rank
"$TRAINCTL" run one-rank.toml --ranks 1 >one-rank.log
expect_logged_loss runs/one-rank 10 1
expect_logged_loss runs/one-rank 20 1

line=$("$TRAINCTL" eval runs/one-rank)
expected='^eval runs/one-rank checkpoint step 20: val_loss [0-9.]+ \(accuracy [0-9.]+\), 300 examples, world size 1; '
expected+='logged val_loss [0-9.]+$'
[[ $line =~ $expected ]] ||
  fail "trainctl eval without --ckpt: '$line', not the newest checkpoint's line with its logged loss"
echo "$line"

expect_exit 2 "$TRAINCTL" eval runs/one-rank --ckpt 7
grep -qF "runs/one-rank has no checkpoint of step 7; it has those of steps 10, 20" err.txt ||
  fail "a missing step is not refused with the steps there are: $(cat err.txt)"
expect_exit 2 "$TRAINCTL" eval "$(checkpoint_of runs/one-rank 10)" --ckpt 10
grep -qF "is one checkpoint" err.txt || fail "--ckpt on one checkpoint: $(cat err.txt)"
write_config no-val.toml no-val train.steps=2 data.train='"data/small.h5"' checkpoint.every_steps=2
"$TRAINCTL" run no-val.toml --ranks 1 >no-val.log
expect_exit 2 "$TRAINCTL" eval runs/no-val
grep -qF "was trained without data.val" err.txt || fail "a run without data.val: $(cat err.txt)"

if [ "${TRAINCTL_HAVE_MPI:-1}" = 1 ]; then
  eval_config two-ranks
  "$TRAINCTL" run two-ranks.toml --ranks 2 >two-ranks.log
  expect_logged_loss runs/two-ranks 10 2
  expect_logged_loss runs/two-ranks 20 2
  "$TRAINCTL" eval runs/two-ranks --ckpt 10 --world-size 3 --json >eval.json
  /usr/bin/python3 -c 'import json; assert json.load(open("eval.json"))["world_size"] == 3' ||
    fail "--world-size 3 was not used: $(cat eval.json)"
else
  echo "this build has no MPI: the 2-rank half is skipped"
fi
echo "PASS"
