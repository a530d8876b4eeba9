#!/usr/bin/env bash
# The checkpoint layout seen by h5dump: PyTorch state_dict names and shapes under /model,
# optimizer state under /optimizer, a crc32 on every dataset, the position and provenance
# attributes on /, and the JSON sidecar with the file's checksum. A rewritten step attribute, a
# flipped byte of the config attribute and a flipped superblock byte are each reported by
# `ckpt verify` (exit 1, naming the file) and skipped by a resume, which falls back past them.
source "$(dirname "$0")/lib.sh"
make_data
write_config layout.toml layout model.hidden='[48, 24]' train.steps=4 checkpoint.every_steps=4
"$TRAINCTL" run layout.toml >/dev/null
checkpoint=$(checkpoint_of runs/layout 4)
h5dump -H "$checkpoint" >header.txt

expect() { grep -qE "$1" header.txt || fail "h5dump -H shows no $1"; }
expect 'GROUP "model"'
expect 'GROUP "optimizer"'
for name in 0 2 4; do
  expect "DATASET \"$name.weight\""
  expect "DATASET \"$name.bias\""
  expect "GROUP \"$name.weight\""
done
for attribute in format_version step epoch sample_position rng_seed world_size global_batch optimizer \
  optimizer_step loss best_val_loss best_step evals_since_best config tokenizer_path tokenizer_hash hostnames trainctl_version \
  created_utc crc32; do
  expect "ATTRIBUTE \"$attribute\""
done
expect 'DATASET "exp_avg"'
expect 'DATASET "exp_avg_sq"'
# Shapes as torch.nn.Linear stores them: weight [out, in].
# dumped: an h5dump of the checkpoint holds the text.
dumped() { local text=$1; shift; grep -qF -- "$text" <<<"$(h5dump "$@" "$checkpoint")"; }
dumped 'H5T_IEEE_F32LE' -H -d /model/0.weight || fail "0.weight is not float32"
dumped 'SIMPLE { ( 48, 32 ) / ( 48, 32 ) }' -H -d /model/0.weight || fail "0.weight shape"
dumped 'SIMPLE { ( 24, 48 ) / ( 24, 48 ) }' -H -d /model/2.weight || fail "2.weight shape"
dumped 'SIMPLE { ( 4 ) / ( 4 ) }' -H -d /model/4.bias || fail "4.bias shape"
dumped '(0): 4' -a /step || fail "the step attribute is not 4"
sidecar=${checkpoint%.h5}.json
grep -q '"step":4,' "$sidecar" || fail "sidecar lacks the step"
grep -q '"hostname":"' "$sidecar" || fail "sidecar lacks the host"
grep -q '"hardware":"' "$sidecar" || fail "sidecar lacks the hardware"
grep -qE "\"file_bytes\":$(stat -c %s "$checkpoint"),\"file_crc32\":[0-9]+}" "$sidecar" || fail "sidecar lacks the file checksum"

write_config corrupt.toml corrupt train.steps=8 checkpoint.every_steps=2 checkpoint.keep_last=4
"$TRAINCTL" run corrupt.toml >/dev/null
"$TRAINCTL" ckpt verify runs/corrupt >/dev/null
/usr/bin/python3 - "$(checkpoint_of runs/corrupt 8)" "$(checkpoint_of runs/corrupt 6)" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    f.attrs.modify("step", 80)
with open(sys.argv[2], "r+b") as f:
    offset = f.read().index(b"every_steps")
    f.seek(offset)
    f.write(b"E")
PY
printf '\xff' | dd of="$(checkpoint_of runs/corrupt 4)" bs=1 seek=9 conv=notrunc status=none
if "$TRAINCTL" ckpt verify runs/corrupt >verify.log 2>&1; then fail "ckpt verify accepted corrupt checkpoints"; fi
for step in 8 6 4; do
  grep -qE "^BAD  $(checkpoint_of runs/corrupt $step): (file checksum mismatch|the file has)" verify.log ||
    { cat verify.log; fail "verify did not report step $step"; }
done
grep -q "^ok   $(checkpoint_of runs/corrupt 2)\$" verify.log || { cat verify.log; fail "verify did not pass step 2"; }
write_config corrupt.toml corrupt train.steps=10 checkpoint.every_steps=2 checkpoint.keep_last=4
"$TRAINCTL" run corrupt.toml --resume >resume.log 2>&1
for step in 8 6 4; do
  grep -q "warning: skipping a checkpoint that does not verify: $PWD/$(checkpoint_of runs/corrupt $step): " resume.log ||
    { cat resume.log; fail "no warning about step $step"; }
done
grep -q '"event":"resume","detail":"[^"]*step-00000002.h5"' runs/corrupt/metrics.jsonl || fail "did not fall back to step 2"
"$TRAINCTL" ckpt verify "$(checkpoint_of runs/corrupt 10)" >/dev/null
echo "PASS"
