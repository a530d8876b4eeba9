#!/usr/bin/env bash
# trainctl data tokenize and trainctl export: licence texts tokenized byte by byte hold their
# bytes; a tiny MLP and a tiny GPT-2, trained by trainctl, export to model.safetensors with
# exactly their checkpoints' /model tensors (read back in Python with numpy and h5py) and a
# config.json describing the model (GPT2LMHeadModel's fields for gpt2); and export's errors:
# no checkpoint (exit 2), a checkpoint that does not verify (exit 1), a corrupt newest one
# skipped for the one before.
source "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import numpy, h5py' 2>/dev/null || { echo "SKIP: python3-numpy or python3-h5py missing"; exit 77; }
check() { /usr/bin/python3 "$TRAINCTL_SOURCE_DIR/tests/integration/export_safetensors.py" "$@"; }

mkdir -p data
licences=(/usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0)
"$TRAINCTL" data tokenize "${licences[@]}" -o data/train.bin --val-out data/val.bin --val-fraction 0.1 >tokenize.log
grep -qx 'wrote data/train.bin ([0-9]* tokens)' tokenize.log || fail "tokenize printed: $(cat tokenize.log)"
grep -qx 'wrote data/val.bin ([0-9]* tokens)' tokenize.log || fail "tokenize printed: $(cat tokenize.log)"
check tokens data/train.bin data/val.bin 0.1 "${licences[@]}"

# An MLP, whose runtime exists already.
make_data
write_config mlp.toml mlp train.steps=4 checkpoint.every_steps=4
"$TRAINCTL" run mlp.toml >/dev/null
"$TRAINCTL" export runs/mlp -o exported-mlp >export-mlp.log
check export exported-mlp "$(checkpoint_of runs/mlp 4)"

# A tiny byte-level GPT-2 on the tokenized licences.
cat >gpt2.toml <<'EOF'
[job]
name = "gpt2"

[model]
kind = "gpt2"
n_layer = 2
n_head = 2
n_embd = 32
block_size = 16
vocab_size = 256

[data]
train = "data/train.bin"
val = "data/val.bin"

[train]
steps = 6
micro_batch = 4
lr = 1e-3
seed = 3
log_every = 2

[checkpoint]
every_steps = 3
EOF
"$TRAINCTL" run gpt2.toml >/dev/null
"$TRAINCTL" export runs/gpt2 -o exported >export.log
grep -q "^exported $(checkpoint_of runs/gpt2 6) (step 6, model gpt2): " export.log ||
  fail "export printed: $(cat export.log)"
check export exported "$(checkpoint_of runs/gpt2 6)"

# Errors. Nothing to export: exit 2, naming the path.
expect_export_error() {
  local code=$1 message=$2
  shift 2
  set +e
  "$TRAINCTL" export "$@" -o none 2>error.log
  local got=$?
  set -e
  [ "$got" -eq "$code" ] || fail "export $* exited $got, expected $code"
  grep -qxE -- "$message" error.log || fail "export $* printed: $(cat error.log)"
  [ ! -e none ] || fail "a failed export wrote none/"
}
expect_export_error 2 'trainctl: error: runs/nowhere does not exist' runs/nowhere
mkdir -p empty-run/checkpoints
expect_export_error 2 'trainctl: error: no checkpoint in empty-run' empty-run

# A flipped byte in a checkpoint's data: that file fails to verify (exit 1); a run directory
# exports the newest one that verifies, saying what it skipped, and none that verifies is exit 1.
flip_model_byte() {
  /usr/bin/python3 - "$1" <<'EOF'
import sys, h5py
with h5py.File(sys.argv[1], "r") as file:
    offset = file["model/transformer.wte.weight"].id.get_offset()
with open(sys.argv[1], "r+b") as file:
    file.seek(offset)
    byte = file.read(1)[0]
    file.seek(offset)
    file.write(bytes([byte ^ 0x5A]))
EOF
}
cp -r runs/gpt2 corrupt
newest=$(checkpoint_of corrupt 6)
flip_model_byte "$newest"
mismatch="file checksum mismatch: crc32 [0-9]+, its sidecar step-00000006.json records [0-9]+"
expect_export_error 1 "trainctl: error: $newest: $mismatch" "$newest"
"$TRAINCTL" export corrupt -o exported-older >export-older.log 2>skipped.log
grep -qxE "trainctl: skipped $newest: $mismatch" skipped.log ||
  fail "export warned: $(cat skipped.log)"
check export exported-older "$(checkpoint_of corrupt 3)"
flip_model_byte "$(checkpoint_of corrupt 3)"
expect_export_error 1 'trainctl: error: no checkpoint in corrupt verifies:.*' corrupt
echo "PASS"
