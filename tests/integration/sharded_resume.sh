#!/usr/bin/env bash
# Sharded checkpoints across world sizes, and the steps that must not be resumed from.
# 1. Resharding: a run of N ranks, stopped by a signal at step 10 (saved durably), resumes on M
#    ranks with the same global batch (micro_batch x grad_accum x ranks), any ZeRO stage on
#    either side (ZeRO-3's 4 ranks to ZeRO-1's 2 and to one rank without ZeRO, and ZeRO-0's
#    checkpoint into ZeRO-3), and ends within 1e-6 relative of an uninterrupted N-rank run: only
#    the order the gradients are summed in differs.
# 2. A step directory missing a shard, with a corrupt shard, or without its manifest is skipped
#    with a warning naming the file, and the run falls back to the step before; it then ends
#    bitwise equal to an uninterrupted run.
source "$(dirname "$0")/lib.sh"
require_mpi
make_data

# reshard NAME FROM_RANKS FROM_ZERO "FROM SETTINGS" TO_RANKS TO_ZERO "TO SETTINGS" [SHARED...]
reshard() {
  local name=$1 from=$2 from_zero=$3 from_settings=$4 to=$5 to_zero=$6 to_settings=$7
  shift 7
  local shared=("$@" train.steps=20 checkpoint.every_steps=5)
  # shellcheck disable=SC2086 # the settings are words
  write_config "$name-reference.toml" "$name-reference" "${shared[@]}" job.ranks_per_node="$from" \
    train.zero="$from_zero" $from_settings
  # shellcheck disable=SC2086
  write_config "$name-from.toml" "$name" "${shared[@]}" job.ranks_per_node="$from" train.zero="$from_zero" $from_settings
  # shellcheck disable=SC2086
  write_config "$name-to.toml" "$name" "${shared[@]}" job.ranks_per_node="$to" train.zero="$to_zero" $to_settings
  "$TRAINCTL" run "$name-reference.toml" --ranks "$from" >/dev/null
  TRAINCTL_TEST_SIGNAL_AT_STEP=10 "$TRAINCTL" run "$name-from.toml" --ranks "$from" >"$name-from.log" 2>&1 &&
    fail "$name: the $from-rank run did not stop at the signal"
  grep -q '"step":10,"event":"stop"' "runs/$name/metrics.jsonl" || { cat "$name-from.log"; fail "$name: no stop at 10"; }
  "$TRAINCTL" run "$name-to.toml" --ranks "$to" --resume >/dev/null
  grep -q '"step":10,"event":"resume"' "runs/$name/metrics.jsonl" || fail "$name: did not resume at step 10"
  "$TRAINCTL" ckpt inspect "$(checkpoint_of "runs/$name" 20)" >"$name-inspect.txt" &&
    grep -q "world_size $to," "$name-inspect.txt" ||
    fail "$name: the last checkpoint is not of $to ranks"
  "$TRAINCTL" ckpt diff "$(checkpoint_of "runs/$name-reference" 20)" "$(checkpoint_of "runs/$name" 20)" --rtol 1e-6 ||
    fail "$name: $from ranks (zero $from_zero) -> $to ranks (zero $to_zero) differs from the reference"
  echo "$name: $from ranks (zero $from_zero) -> $to ranks (zero $to_zero) within 1e-6 of the reference"
}
reshard two-to-three 2 1 "train.micro_batch=6" 3 0 "train.micro_batch=2 train.grad_accum=2"
reshard three-to-two 3 0 "train.micro_batch=4" 2 1 "train.micro_batch=2 train.grad_accum=3"
reshard four-to-two 4 1 "train.micro_batch=8" 2 1 "train.micro_batch=8 train.grad_accum=2"
reshard four-to-two-unsharded 4 0 "train.micro_batch=8" 2 0 "train.micro_batch=8 train.grad_accum=2"
reshard three-to-one 3 1 "train.micro_batch=4" 1 0 "train.micro_batch=4 train.grad_accum=3"
reshard three-to-one-zero 3 0 "checkpoint.sharded=true train.micro_batch=4" 1 1 "train.micro_batch=4 train.grad_accum=3"
reshard zero3-to-zero1 4 3 "train.micro_batch=8" 2 1 "train.micro_batch=8 train.grad_accum=2"
reshard zero3-to-zero0 4 3 "train.micro_batch=8" 1 0 "train.micro_batch=8 train.grad_accum=4"
reshard zero0-to-zero3 2 0 "train.micro_batch=8 train.grad_accum=2" 4 3 "train.micro_batch=8"

# Step 30's directory, damaged three ways; each copy of the run falls back to step 20.
write_config clean.toml clean train.zero=1 train.steps=40 checkpoint.every_steps=10 checkpoint.keep_last=5
"$TRAINCTL" run clean.toml --ranks 2 >/dev/null
write_config damaged.toml damaged train.zero=1 train.steps=40 checkpoint.every_steps=10 checkpoint.keep_last=5
TRAINCTL_TEST_SIGNAL_AT_STEP=30 "$TRAINCTL" run damaged.toml --ranks 2 >/dev/null 2>&1 && fail "no stop at step 30"
step30=$(checkpoint_of runs/damaged 30)
[ -f "$step30/manifest.json" ] || fail "step 30 was not saved sharded"
for damage in missing-shard corrupt-shard no-manifest; do
  cp -a runs/damaged "runs/$damage"
  dir=runs/$damage/checkpoints/$(basename "$step30")
  case $damage in
    missing-shard) rm "$dir/shard-00001-of-00002.h5"; expected="shard-00001-of-00002.h5 is missing" ;;
    corrupt-shard)
      printf '\xff' | dd of="$dir/shard-00000-of-00002.h5" bs=1 seek=4000 conv=notrunc status=none
      expected="shard-00000-of-00002.h5: file checksum mismatch" ;;
    no-manifest) rm "$dir/manifest.json"; expected="no manifest.json (the save did not finish)" ;;
  esac
  if "$TRAINCTL" ckpt verify "runs/$damage" >verify.log; then fail "$damage: ckpt verify accepted it"; fi
  grep -qF "BAD  $dir: $expected" verify.log || { cat verify.log; fail "$damage: verify did not name the file"; }
  "$TRAINCTL" run damaged.toml --ranks 2 --resume --run-dir "runs/$damage" >"$damage.log" 2>&1 ||
    { cat "$damage.log"; fail "$damage: the resume failed"; }
  grep -qF "warning: skipping a checkpoint that does not verify: $PWD/$dir: $expected" "$damage.log" ||
    { cat "$damage.log"; fail "$damage: no warning naming the file"; }
  grep -q '"step":20,"event":"resume"' "runs/$damage/metrics.jsonl" || fail "$damage: did not fall back to step 20"
  "$TRAINCTL" ckpt diff "$(checkpoint_of runs/clean 40)" "$(checkpoint_of "runs/$damage" 40)" >/dev/null ||
    fail "$damage: not bitwise equal to the uninterrupted run"
  echo "$damage: skipped with a warning naming the file; resumed from step 20, bitwise equal at step 40"
done
echo "PASS"
