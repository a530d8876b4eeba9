#!/usr/bin/env bash
# train.init_from, fine-tuning from published weights, with PyTorch as the oracle (gpt2_peer.py;
# weights compared by hf_weights.py):
#  - a model.safetensors that PyTorch's own tensors were written to by hand, named as the Hugging
#    Face Hub's GPT-2 files are (no "transformer." prefix, the causal-mask buffers and the tied
#    lm_head.weight stored), for a small GPT-2 with GPT-2's vocabulary of 50257 (padded to 50304
#    in trainctl, unpadded in PyTorch): step 0 holds the file's weights bitwise, the loss of the
#    first batch is PyTorch's to 1e-5, and 20 AdamW steps later the weights and AdamW state are
#    PyTorch's to 1e-4 (eps 1e-6: see gpt2_pytorch.sh);
#  - `export` -> init_from is bitwise, from the export directory and from a checkpoint file;
#  - a run with checkpoints of its own resumes from them, not from init_from;
#  - files that do not fit the config: exit 2 naming the first tensor and both shapes;
#  - configs/gpt2_finetune.toml runs as docs/gpt2.md's "Fine-tune GPT-2 on your text" says.
source "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import torch, h5py' 2>/dev/null || { echo "SKIP: python3-torch or python3-h5py missing"; exit 77; }
peer() { /usr/bin/python3 "$(dirname "$0")/gpt2_peer.py" "$@"; }
hf() { /usr/bin/python3 "$(dirname "$0")/hf_weights.py" "$@"; }
make_token_data
gpt2=(model.kind='"gpt2"' model.vocab_size=50257 job.ranks_per_node=1 data.shuffle=false train.log_every=1
  train.lr=1e-3 train.weight_decay=0.1 train.eps=1e-6)

write_config shape.toml shape "${gpt2[@]}"
peer init shape.toml hub.safetensors --seed 5 >/dev/null
write_config tune.toml tune "${gpt2[@]}" train.steps=20 checkpoint.every_steps=10 train.init_from='"hub.safetensors"'
TRAINCTL_TEST_SAVE_INITIAL=1 "$TRAINCTL" run tune.toml >tune.log
grep -qF "trainctl: init_from at step 0: $work/hub.safetensors" tune.log || fail "no init_from event: $(cat tune.log)"
hf same-weights "$(checkpoint_of runs/tune 0)=hub.safetensors"
first_loss=$(grep '"step":1,' runs/tune/metrics.jsonl | grep '"loss":' | sed -E 's/.*"loss":([-0-9.e+]+).*/\1/')
peer loss "$(checkpoint_of runs/tune 0)" --expect "$first_loss"
peer train "$(checkpoint_of runs/tune 0)" "$(checkpoint_of runs/tune 20)"

# export -> init_from, bitwise: the export directory, and the checkpoint file itself.
"$TRAINCTL" export runs/tune -o exported >/dev/null
write_config again.toml again "${gpt2[@]}" train.steps=1 train.init_from='"exported"'
TRAINCTL_TEST_SAVE_INITIAL=1 "$TRAINCTL" run again.toml >/dev/null
hf same-weights "$(checkpoint_of runs/again 0)=exported/model.safetensors"
write_config from_checkpoint.toml from_checkpoint "${gpt2[@]}" train.steps=1 \
  train.init_from="\"$(checkpoint_of runs/tune 20)\""
TRAINCTL_TEST_SAVE_INITIAL=1 "$TRAINCTL" run from_checkpoint.toml >/dev/null
hf same-weights "$(checkpoint_of runs/from_checkpoint 0)=exported/model.safetensors"

# A run that has checkpoints resumes from them: its step-10 checkpoint, not hub.safetensors, so
# it ends where the uninterrupted run ended, bitwise.
rm "$(checkpoint_of runs/tune 20)" "$(dirname "$(checkpoint_of runs/tune 20)")/step-00000020.json"
"$TRAINCTL" run tune.toml --resume >resumed.log
grep -qF "trainctl: resume at step 10:" resumed.log || fail "the rerun did not resume at step 10: $(cat resumed.log)"
if grep -qF "init_from" resumed.log; then fail "the resumed run loaded init_from again: $(cat resumed.log)"; fi
"$TRAINCTL" export runs/tune -o resumed-export >/dev/null
cmp -s exported/model.safetensors resumed-export/model.safetensors ||
  fail "the resumed run did not end with the uninterrupted run's weights"

# Files that do not fit the config.
expect_init_error() {
  local name=$1 message=$2
  shift 2
  write_config "$name.toml" "$name" "${gpt2[@]}" train.steps=1 "$@"
  expect_exit 2 "$TRAINCTL" run "$name.toml"
  grep -qF "$message" err.txt || fail "expected \"$message\" in: $(cat err.txt)"
}
expect_init_error wide "train.init_from: $work/hub.safetensors holds wte.weight [50257, 32] but the config's model needs [50257, 48]" \
  model.n_embd=48 train.init_from='"hub.safetensors"'
expect_init_error deep "train.init_from: $work/hub.safetensors has no tensor transformer.h.2.ln_1.weight, which the config's model needs" \
  model.n_layer=3 train.init_from='"hub.safetensors"'
expect_init_error shallow "train.init_from: $work/hub.safetensors holds h.1.ln_1.weight [32], which the config's model has no place for" \
  model.n_layer=1 train.init_from='"hub.safetensors"'
expect_init_error bytes "train.init_from: $work/hub.safetensors holds wte.weight [50257, 32] but the config's model needs [256, 32]" \
  model.vocab_size=256 train.init_from='"hub.safetensors"'
expect_init_error missing "train.init_from: cannot read $work/missing.safetensors: No such file or directory" \
  train.init_from='"missing.safetensors"'
head -c 100000 hub.safetensors >cut.safetensors
expect_init_error cut "train.init_from: $work/cut.safetensors: tensor wte.weight ends at byte 6432896 of the data, which has 97112 (truncated)" \
  train.init_from='"cut.safetensors"'

# docs/gpt2.md's fine-tuning example, with its own config file: weights exported from a run of the
# demo's shape, text tokenized into demo-data/, then the config run as it is (on one rank here).
mkdir -p example/configs example/demo-data
cp "$TRAINCTL_SOURCE_DIR/configs/gpt2_finetune.toml" example/configs/
write_config demo.toml gpt2-demo model.kind='"gpt2"' model.n_layer=3 model.n_head=4 model.n_embd=128 \
  model.block_size=128 job.ranks_per_node=1 train.steps=2
"$TRAINCTL" run demo.toml >/dev/null
"$TRAINCTL" export runs/gpt2-demo -o example/weights/gpt2-demo >/dev/null
"$TRAINCTL" data tokenize /usr/share/common-licenses/GPL-3 -o example/demo-data/finetune_train.bin \
  --val-out example/demo-data/finetune_val.bin >/dev/null
"$TRAINCTL" validate example/configs/gpt2_finetune.toml >/dev/null
"$TRAINCTL" run example/configs/gpt2_finetune.toml --ranks 1 --run-dir runs/example >example.log
grep -qF "trainctl: init_from at step 0: $work/example/weights/gpt2-demo" example.log &&
  grep -qF "trainctl: done at step 300" example.log || fail "the fine-tuning example did not run: $(cat example.log)"
echo "PASS"
